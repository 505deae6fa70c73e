/**
 * `vole wait POD --db F` beside a running agent (configMap volumes: directories, no
 * mounts): it exits 3 with `vole why` as soon as the pod can only wait for a change
 * outside vole, 0 once the change came and the pod is mounted, and 1 at its timeout.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { startVole, vole } from '../support/agent-process.js';

const dir = mkdtempSync(join(tmpdir(), 'vole-wait-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const podYaml = `apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default}
spec:
  containers: [{name: app, image: nginx, volumeMounts: [{name: html, mountPath: /html}]}]
  volumes: [{name: html, configMap: {name: web}}]
`;
const configMapYaml = `apiVersion: v1
kind: ConfigMap
metadata: {name: web, namespace: default}
data: {index.html: hello}
`;

test('vole wait: 3 with the explanation while only outside change helps, then 0 once mounted', async () => {
  const manifests = join(dir, 'manifests');
  mkdirSync(manifests, { recursive: true });
  const db = join(dir, 'vole.db');
  writeFileSync(join(manifests, 'pod.yaml'), podYaml);
  const agent = startVole([
    'run',
    '--manifests',
    manifests,
    '--root',
    join(dir, 'root'),
    '--db',
    db,
  ]);
  try {
    await agent.line(/waiting for \[html\].*not found/);
    const explained = vole('wait', 'default/web', '--db', db, '--timeout', '60');
    assert.equal(explained.status, 3, explained.stdout + explained.stderr);
    assert.match(explained.stdout, /1 of 1 volume\(s\) not ready/);
    assert.match(explained.stdout, /configmap "web" not found/);
    assert.match(explained.stdout, /nothing left that vole can do without a change outside it/);

    writeFileSync(join(manifests, 'web-configmap.yaml'), configMapYaml);
    const mounted = vole('wait', 'web', '--db', db, '--timeout', '60');
    assert.equal(mounted.status, 0, mounted.stdout + mounted.stderr);
    assert.match(mounted.stdout, /pod web: every volume mounted \(seq \d+\)/);

    const absent = vole('wait', 'default/nosuch', '--db', db, '--timeout', '0.5');
    assert.equal(absent.status, 1, absent.stdout + absent.stderr);
    assert.match(absent.stdout, /timed out after 0.5 s: no pod "default\/nosuch" in the log/);
  } finally {
    await agent.stop();
  }
});

test('vole wait refuses a timeout that is not a positive number', () => {
  const run = vole('wait', 'web', '--db', join(dir, 'none.db'), '--timeout', 'soon');
  assert.equal(run.status, 2, run.stdout + run.stderr);
  assert.match(run.stderr, /--timeout soon: give a number of seconds above 0/);
});
