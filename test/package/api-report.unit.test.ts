/**
 * The public surface is what etc/*.api.md records (API Extractor's report of each entry
 * point of package.json `exports`), and docs/api/ is generated from the same doc comments:
 * a change to either shows as a diff here, to be committed on purpose with
 * `node scripts/api-report.mjs`.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';

const root = join(import.meta.dirname, '..', '..');

test('the API reports and the reference pages are those the sources give', (t) => {
  const run = spawnSync(process.execPath, ['scripts/api-report.mjs', '--check'], {
    cwd: root,
    encoding: 'utf8',
  });
  const output = `${run.stdout}${run.stderr}`;
  t.diagnostic(
    output
      .split('\n')
      .filter((l) => !l.startsWith('Analysis will use'))
      .join('\n'),
  );
  assert.equal(run.status, 0, `the public API changed:\n${output}`);
  assert.match(run.stdout, /the public API matches etc\/ and docs\/api\/ \(5 entry points\)/);
});
