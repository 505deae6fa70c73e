/**
 * `vole run --once` as a user meets it (configMap and emptyDir volumes: directories, no
 * mounts): it watches the manifest directory, so advice such as "create it" works;
 * it exits 0 once every pod is mounted, and 3 when what is left can only wait for a change
 * outside vole, printing `vole why` for each such pod. A key typo's message names the
 * field path and the manifest file; `vole status` prints times as offsets, never epoch ms.
 * And a manifest pod without a UID, deleted and created again, is a new pod.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { repo, startVole, vole } from '../support/agent-process.js';
import { until } from '../support/host.js';

const dir = mkdtempSync(join(tmpdir(), 'vole-once-'));
after(() => rmSync(dir, { recursive: true, force: true }));

function place(name: string) {
  const base = join(dir, name);
  const manifests = join(base, 'manifests');
  mkdirSync(manifests, { recursive: true });
  return { manifests, root: join(base, 'root'), db: join(base, 'vole.db') };
}

const podYaml = (items = '') => `apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default}
spec:
  containers:
    - name: app
      image: nginx
      volumeMounts: [{name: html, mountPath: /usr/share/nginx/html}]
  volumes:
    - name: html
      configMap: {name: web${items}}
`;

const configMapYaml = `apiVersion: v1
kind: ConfigMap
metadata: {name: web, namespace: default}
data: {index.html: hello}
`;

test('vole run --once watches: a ConfigMap added while it runs lets the pod mount (exit 0)', async () => {
  const at = place('watch');
  writeFileSync(join(at.manifests, 'pod.yaml'), podYaml());
  const agent = startVole([
    ...['run', '--manifests', at.manifests, '--root', at.root, '--db', at.db],
    ...['--once', '--timeout', '60'],
  ]);
  try {
    await agent.line(/waiting for \[html\].*not found; create ConfigMap default\/web/);
    writeFileSync(join(at.manifests, 'web-configmap.yaml'), configMapYaml);
    await agent.line(/settled: 1 pod\(s\) mounted/, 30_000);
    // It exits by itself (a SIGTERM now could land after its handlers are gone).
    const code = await agent.exited;
    assert.equal(code, 0, agent.lines.join('\n'));
  } finally {
    await agent.stop();
  }
});

test('vole run --once exits 3 on a key typo, printing vole why, the field path and the file', () => {
  const at = place('typo');
  const podFile = join(at.manifests, 'pod.yaml');
  writeFileSync(podFile, podYaml(', items: [{key: indx.html, path: index.html}]'));
  writeFileSync(join(at.manifests, 'web-configmap.yaml'), configMapYaml);
  // No --timeout: it must end by itself, long before the 120 s default (killed at 90 s).
  const started = Date.now();
  const run = spawnSync(
    process.execPath,
    [
      ...['--import', 'tsx', join(repo, 'src/cli/main.ts')],
      ...['run', '--manifests', at.manifests, '--root', at.root, '--db', at.db, '--once'],
    ],
    { encoding: 'utf8', timeout: 90_000 },
  );
  assert.ok(Date.now() - started < 60_000, `it took ${Date.now() - started} ms`);
  const out = run.stdout;
  assert.equal(run.status, 3, out + run.stderr);
  const typo =
    'spec.volumes[0].configMap.items[0].key: configmap "default/web" has no key "indx.html"';
  assert.ok(out.includes(typo), out);
  assert.ok(out.includes(`pod default/web (${podFile}): waiting for [html]`), out);
  assert.match(out, /pod default\/web \([0-9a-f-]{36}\) at seq \d+: 1 of 1 volume\(s\) not ready/);
  assert.match(out, /nothing left that vole can do without a change outside it/);

  const status = vole('status', '--db', at.db);
  assert.equal(status.status, 0, status.stderr);
  assert.match(status.stdout, /world at seq \d+ \(\+[0-9.]+s\)/);
  assert.doesNotMatch(status.stdout, /\+\d{6,} ms/, 'no wall-clock time printed as a duration');
});

test('vole run --once --timeout: exit 1 at the timeout, printing vole why for each pod left', () => {
  const at = place('timeout');
  writeFileSync(join(at.manifests, 'pod.yaml'), podYaml()); // its ConfigMap never comes
  const run = vole(
    ...['run', '--manifests', at.manifests, '--root', at.root, '--db', at.db],
    ...['--once', '--timeout', '1'],
  );
  assert.equal(run.status, 1, run.stdout + run.stderr);
  assert.match(run.stdout, /timed out after 1 s without settling/);
  assert.match(
    run.stdout,
    /pod default\/web \([0-9a-f-]{36}\) at seq \d+: 1 of 1 volume\(s\) not ready/,
  );
  assert.match(
    run.stdout,
    /html \(kubernetes\.io\/configmap\/[^)]+\): waits on ConfigMap default\/web since seq \d+ .*configmap "web" not found; setUp waits for it to be created/,
  );
  // The kubelet's words (apierrors.NewNotFound of the "configmap" resource), as its
  // FailedMount Event says them; the wait above says what to create.
  assert.match(run.stdout, /last error at seq \d+ \(\+[0-9.]+s\): .*configmap "web" not found$/m);
});

test('vole run: a pod without a UID deleted and created again is a new pod, its emptyDir new', async () => {
  const at = place('recreate');
  const podFile = join(at.manifests, 'pod.yaml');
  const scratchPod = `apiVersion: v1
kind: Pod
metadata: {name: task, namespace: default}
spec:
  containers: [{name: app, image: busybox, volumeMounts: [{name: scratch, mountPath: /s}]}]
  volumes: [{name: scratch, emptyDir: {}}]
`;
  writeFileSync(podFile, scratchPod);
  const agent = startVole(['run', '--manifests', at.manifests, '--root', at.root, '--db', at.db]);
  try {
    await agent.line(/pod default\/task: mounted \[scratch\]/);
    const pods = join(at.root, 'pods');
    const [first] = readdirSync(pods);
    const scratch = (uid: string) =>
      join(pods, uid, 'volumes', 'kubernetes.io~empty-dir', 'scratch');
    writeFileSync(join(scratch(first!), 'left-behind'), 'old pod data');
    rmSync(podFile);
    await until(() => !existsSync(join(pods, first!)), 'the old pod torn down');
    writeFileSync(podFile, scratchPod);
    await until(() => existsSync(pods) && readdirSync(pods).length === 1, 'the new pod');
    const [second] = readdirSync(pods);
    await until(() => existsSync(scratch(second!)), 'its emptyDir');
    assert.notEqual(second, first, 'a new UID');
    assert.equal(existsSync(join(scratch(second!), 'left-behind')), false, 'a new, empty emptyDir');
  } finally {
    await agent.stop();
  }
});
