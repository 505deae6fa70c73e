/**
 * `vole chaos --cluster` from the command line: exit 0 and a summary when every seed
 * holds; the same seed prints the same JSON in another process; bad input is a usage error.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { vole } from '../support/agent-process.js';

test('vole chaos --cluster: a seed is the same run in another process, and it passes', () => {
  const first = vole('chaos', '--cluster', '--seed', '11', '--runs', '3', '--json');
  const again = vole('chaos', '--cluster', '--seed', '11', '--runs', '3', '--json');
  assert.equal(first.status, 0, first.stderr);
  assert.equal(first.stdout, again.stdout);
  const report = JSON.parse(first.stdout) as { runs: number; failures: unknown[]; terms: number };
  assert.equal(report.runs, 3);
  assert.deepEqual(report.failures, []);
  assert.ok(report.terms >= 3, `every run had a leader (${report.terms} terms)`);
  assert.match(first.stderr, /SEED=11 .* runs=3 mode=cluster/);
});

test('vole chaos --cluster: a bad --runs is a usage error naming the option', () => {
  const r = vole('chaos', '--cluster', '--runs', 'many');
  assert.equal(r.status, 2);
  assert.match(r.stderr, /--runs many: give a whole number/);
  assert.doesNotMatch(r.stderr, /at .*\.ts:\d+/);
});
