/**
 * Real atomic-writer volumes, as root in a private mount namespace: configMap, secret (on
 * tmpfs), downwardAPI and projected files with their modes and fsGroup; a ConfigMap edit
 * reaches the running pod's files through one `..data` swap, while a reader never sees
 * half an update; the Secret's bytes never reach the log; a hostPath leading (through a
 * symlink) into vole's root or its log directory is refused.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { VolumeManager } from '../../src/agent/volume-manager.js';
import { isMountPoint } from '../../src/host/mount.js';
import { MemorySink } from '../../src/engine/sink.js';
import { builtinPlugins } from '../../src/plugins/builtin/index.js';
import type { ServiceAccountTokens } from '../../src/plugins/builtin/content.js';
import { ObjectContents } from '../../src/sources/contents.js';
import { hostSandbox, hostTestSkipReason, until } from '../support/host.js';

const skip = hostTestSkipReason();
const { base, root } = hostSandbox('content');
const big = (c: string) => c.repeat(512 * 1024);

function agent(opts: { forbidden?: string[]; tokens?: ServiceAccountTokens } = {}) {
  const contents = new ObjectContents();
  const sink = new MemorySink();
  const vm = VolumeManager.create({
    node: 'node-1',
    plugins: builtinPlugins({
      root,
      contents,
      ...(opts.forbidden === undefined ? {} : { forbiddenHostPaths: opts.forbidden }),
      ...(opts.tokens === undefined ? {} : { tokens: opts.tokens }),
    }),
    ...(opts.tokens === undefined ? {} : { tokenRequests: true }),
    controllerAttachDetach: false,
    contents,
    log: { sink, history: [] },
  });
  vm.start();
  return { vm, sink };
}

const vol = (uid: string, plugin: string, name: string) =>
  join(root, 'pods', uid, 'volumes', plugin.replace('/', '~'), name);

const webConfigMap = (data: Record<string, string>) => ({
  apiVersion: 'v1',
  kind: 'ConfigMap' as const,
  metadata: { name: 'web', namespace: 'shop' },
  data,
});
const labelsFile = { path: 'meta/labels', fieldRef: { fieldPath: 'metadata.labels' } };
const oldConf = { key: 'old.conf', path: 'conf/old.conf', mode: 0o600 };

test('host: content volumes are written; an edit swaps ..data atomically', { skip }, async () => {
  const { vm, sink } = agent();
  vm.inputs.upsertObject(
    webConfigMap({ 'index.html': big('a'), 'old.conf': 'gone after the edit' }),
  );
  vm.inputs.upsertObject({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: 'creds', namespace: 'shop' },
    data: { token: Buffer.from('s3cr3t-value').toString('base64') },
  });
  vm.inputs.addPod({
    metadata: { name: 'web', namespace: 'shop', uid: 'uid-web', labels: { app: 'web' } },
    spec: {
      securityContext: { fsGroup: 3000 },
      volumes: [
        { name: 'html', configMap: { name: 'web' } },
        { name: 'token', secret: { secretName: 'creds', defaultMode: 0o400 } },
        { name: 'info', downwardAPI: { items: [labelsFile] } },
        {
          name: 'all',
          projected: {
            sources: [
              { configMap: { name: 'web', items: [oldConf] } },
              { secret: { name: 'creds' } },
              {
                downwardAPI: {
                  items: [{ path: 'name', fieldRef: { fieldPath: 'metadata.name' } }],
                },
              },
            ],
          },
        },
      ],
    },
  });
  vm.inputs.markSourcesReady();
  await vm.waitForAttachAndMount('uid-web', { timeoutMs: 30_000 });

  const html = vol('uid-web', 'kubernetes.io/configmap', 'html');
  assert.equal(readFileSync(join(html, 'index.html'), 'utf8'), big('a'));
  assert.equal(readlinkSync(join(html, 'index.html')), '..data/index.html');
  const firstData = readlinkSync(join(html, '..data'));
  assert.match(firstData, /^\.\.\d{4}_/);
  assert.equal(statSync(join(html, 'index.html')).mode & 0o777, 0o644 | 0o040);
  assert.equal(statSync(join(html, 'index.html')).gid, 3000);

  const token = vol('uid-web', 'kubernetes.io/secret', 'token');
  assert.equal(readFileSync(join(token, 'token'), 'utf8'), 's3cr3t-value');
  assert.ok(await isMountPoint(token), 'the secret volume is a tmpfs of its own');
  assert.equal(statSync(join(token, 'token')).mode & 0o777, 0o440);

  const info = vol('uid-web', 'kubernetes.io/downward-api', 'info');
  assert.equal(readFileSync(join(info, 'meta/labels'), 'utf8'), 'app="web"');
  const all = vol('uid-web', 'kubernetes.io/projected', 'all');
  assert.equal(readFileSync(join(all, 'conf/old.conf'), 'utf8'), 'gone after the edit');
  assert.equal(readFileSync(join(all, 'token'), 'utf8'), 's3cr3t-value');
  assert.equal(readFileSync(join(all, 'name'), 'utf8'), 'web');
  assert.ok(await isMountPoint(all));

  // The edit: a reader loops on the file while the volume is set up again.
  let reading = true;
  const seen = new Set<string>();
  const reader = (async () => {
    while (reading) {
      const text = await readFile(join(html, 'index.html'), 'utf8');
      seen.add(`${text.slice(0, 1)}${text.length}`);
    }
  })();
  vm.inputs.upsertObject(webConfigMap({ 'index.html': big('b'), 'new.conf': 'new' }));
  const deadline = Date.now() + 20_000;
  while (readFileSync(join(html, 'index.html'), 'utf8') !== big('b') && Date.now() < deadline)
    await new Promise((r) => setTimeout(r, 10));
  await new Promise((r) => setTimeout(r, 50));
  reading = false;
  await reader;
  assert.equal(readFileSync(join(html, 'index.html'), 'utf8'), big('b'));
  assert.ok(seen.size > 0, 'the reader read during the update');
  const whole = [`a${big('a').length}`, `b${big('b').length}`];
  for (const s of seen) assert.ok(whole.includes(s), `a reader saw ${s}`);
  assert.notEqual(readlinkSync(join(html, '..data')), firstData, '..data points elsewhere');
  // The old directory goes right after the swap the reader saw: wait for it, not a fixed time.
  await until(() => !existsSync(join(html, firstData)), 'the old directory is gone');
  assert.equal(existsSync(join(html, 'old.conf')), false, 'a key no longer there is removed');
  assert.equal(readFileSync(join(html, 'new.conf'), 'utf8'), 'new');
  assert.ok(lstatSync(html).isDirectory());
  const ops = sink.events.filter((e) => e.type === 'CallStarted' && e.call === 'tearDown');
  assert.equal(ops.length, 0, 'no tearDown for the update');

  // Secrets stay out of the log: neither the bytes nor their base64 appear in any event.
  const log = JSON.stringify(sink.events);
  assert.equal(log.includes('s3cr3t-value'), false);
  assert.equal(log.includes(Buffer.from('s3cr3t-value').toString('base64')), false);
  assert.match(log, /"contentHash":"sha256:[0-9a-f]{64}"/);

  vm.inputs.removePod('uid-web');
  await vm.waitForUnmount('uid-web');
  assert.equal(existsSync(join(root, 'pods', 'uid-web')), false);
  assert.equal(await isMountPoint(token), false);
  await vm.drainAndStop();
});

const tokenOwners =
  'host: a token file belongs to the one user all containers run as, 0600; with fsGroup only, 0640';
test(tokenOwners, { skip }, async () => {
  const tokens: ServiceAccountTokens = {
    token: (namespace, part) => Promise.resolve(`token-of-${namespace}/${part.podName}`),
  };
  const { vm } = agent({ tokens });
  const mounts = [{ name: 'sa', mountPath: '/var/run/secrets/tokens' }];
  const pod = (name: string, spec: Record<string, unknown>) => ({
    metadata: { name, namespace: 'shop', uid: `uid-${name}` },
    spec: {
      ...spec,
      volumes: [
        {
          name: 'sa',
          projected: { sources: [{ serviceAccountToken: { path: 'token' } }] },
        },
      ],
    },
  });
  // One user: the pod's runAsUser, which the second container names again.
  vm.inputs.addPod(
    pod('one-user', {
      securityContext: { runAsUser: 1000 },
      containers: [
        { name: 'a', volumeMounts: mounts },
        { name: 'b', securityContext: { runAsUser: 1000 }, volumeMounts: mounts },
      ],
    }),
  );
  // Two users, so no owner; fsGroup alone: 0600 then the group's read.
  vm.inputs.addPod(
    pod('two-users', {
      securityContext: { fsGroup: 3000 },
      containers: [
        { name: 'a', securityContext: { runAsUser: 1000 }, volumeMounts: mounts },
        { name: 'b', securityContext: { runAsUser: 2000 }, volumeMounts: mounts },
      ],
    }),
  );
  // Neither: the projection's default mode, the agent's user.
  vm.inputs.addPod(pod('no-user', { containers: [{ name: 'a', volumeMounts: mounts }] }));
  vm.inputs.markSourcesReady();
  for (const uid of ['uid-one-user', 'uid-two-users', 'uid-no-user'])
    await vm.waitForAttachAndMount(uid, { timeoutMs: 30_000 });

  const at = (name: string) => join(vol(`uid-${name}`, 'kubernetes.io/projected', 'sa'), 'token');
  assert.equal(readFileSync(at('one-user'), 'utf8'), 'token-of-shop/one-user');
  assert.equal(statSync(at('one-user')).uid, 1000);
  assert.equal(statSync(at('one-user')).mode & 0o777, 0o600);
  assert.equal(lstatSync(at('one-user')).uid, 1000, 'the visible link is the user own too');
  assert.equal(statSync(at('two-users')).uid, 0);
  assert.equal(statSync(at('two-users')).gid, 3000);
  assert.equal(statSync(at('two-users')).mode & 0o777, 0o640);
  assert.equal(statSync(at('no-user')).uid, 0);
  assert.equal(statSync(at('no-user')).mode & 0o777, 0o644);

  for (const uid of ['uid-one-user', 'uid-two-users', 'uid-no-user']) {
    vm.inputs.removePod(uid);
    await vm.waitForUnmount(uid);
  }
  await vm.drainAndStop();
});

const refusal = "host: a hostPath into vole's root or log directory is refused at mount time";
test(refusal, { skip }, async () => {
  const logDir = join(base, 'log');
  mkdirSync(logDir, { recursive: true });
  mkdirSync(join(root, 'pods'), { recursive: true });
  const innocent = join(base, 'innocent');
  symlinkSync(join(root, 'pods'), innocent);
  const toLog = join(base, 'to-log');
  symlinkSync(logDir, toLog);
  const { vm } = agent({ forbidden: [logDir] });
  const paths = [
    ['uid-root', innocent],
    ['uid-log', toLog],
    ['uid-parent', base],
  ] as const;
  for (const [uid, path] of paths) {
    vm.inputs.addPod({
      metadata: { name: uid, namespace: 'default', uid },
      spec: { volumes: [{ name: 'h', hostPath: { path, type: 'Directory' } }] },
    });
  }
  vm.inputs.markSourcesReady();
  const keepAlive = setInterval(() => undefined, 1000); // the agent's timers do not hold the loop
  for (const uid of ['uid-root', 'uid-log', 'uid-parent']) {
    await assert.rejects(vm.waitForAttachAndMount(uid, { timeoutMs: 1_000 }), (error: Error) =>
      /resolves to .* vole's own directory/.test(error.message),
    );
    assert.equal(await isMountPoint(vol(uid, 'kubernetes.io/host-path', 'h')), false);
  }
  clearInterval(keepAlive);
  await vm.drainAndStop();
});

const kubeletWords =
  "host: a missing object fails setUp in the kubelet's words, two as [a, b]; the pod's dirs are 0750";
test(kubeletWords, { skip }, async () => {
  const { vm, sink } = agent();
  vm.inputs.addPod({
    metadata: { name: 'lacking', namespace: 'shop', uid: 'uid-lacking' },
    spec: {
      volumes: [
        { name: 'scratch', emptyDir: {} },
        { name: 'x', secret: { secretName: 'x' } },
        {
          name: 'both',
          projected: { sources: [{ configMap: { name: 'a' } }, { secret: { name: 'b' } }] },
        },
      ],
    },
  });
  vm.inputs.markSourcesReady();
  const keepAlive = setInterval(() => undefined, 1000); // the agent's timers do not hold the loop
  const failures = () =>
    new Set(sink.events.flatMap((e) => (e.type === 'CallFailed' ? [e.error.message] : [])));
  await until(() => failures().size >= 2, 'the setUp of both volumes to fail', 10_000);
  clearInterval(keepAlive);
  // secret.go's and projected.go's SetUp errors, which the FailedMount Event quotes after
  // `MountVolume.SetUp failed for volume "…" : ` (src/kube/pod-events.ts).
  assert.deepEqual([...failures()].sort(), [
    'MountVolume.SetUp failed: [configmap "a" not found, secret "b" not found]',
    'MountVolume.SetUp failed: secret "x" not found',
  ]);
  // makePodDataDirs: the pod's directory, volumes/ and plugins/ are 0750; the plugin's is 0755.
  const pod = join(root, 'pods', 'uid-lacking');
  for (const dir of [pod, join(pod, 'volumes'), join(pod, 'plugins')])
    assert.equal(statSync(dir).mode & 0o7777, 0o750, dir);
  assert.equal(statSync(join(pod, 'volumes/kubernetes.io~empty-dir')).mode & 0o7777, 0o755);
  vm.inputs.removePod('uid-lacking');
  await until(() => !existsSync(pod), 'the pod directory, plugins/ with it, to go', 10_000);
  await vm.drainAndStop();
});

const edit = 'host: vole run: an edited ConfigMap manifest reaches the running pod';
test(edit, { skip, timeout: 120_000 }, async () => {
  const manifests = join(base, 'manifests');
  mkdirSync(manifests, { recursive: true });
  const configMap = (version: string) =>
    'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: site, namespace: default}\n' +
    `data: {index.html: "${version}"}\n`;
  writeFileSync(join(manifests, 'site.yaml'), configMap('version 1'));
  writeFileSync(
    join(manifests, 'pod.yaml'),
    'apiVersion: v1\nkind: Pod\nmetadata: {name: site, namespace: default}\nspec:\n' +
      '  containers: [{name: web, image: nginx,\n' +
      '    volumeMounts: [{name: html, mountPath: /usr/share/nginx/html}]}]\n' +
      '  volumes: [{name: html, configMap: {name: site}}]\n',
  );
  const runRoot = join(base, 'run-root');
  const agentProcess = spawn(
    process.execPath,
    [
      ...['--import', 'tsx', join(import.meta.dirname, '../../src/cli/main.ts'), 'run'],
      ...['--manifests', manifests, '--root', runRoot, '--db', join(base, 'run.db')],
    ],
    { stdio: 'ignore' },
  );
  try {
    // The pod has no metadata.uid: the agent gives it a fresh one, its only pod directory.
    const pods = join(runRoot, 'pods');
    await until(() => existsSync(pods) && readdirSync(pods).length === 1, 'the pod directory');
    const volumes = join(pods, readdirSync(pods)[0]!, 'volumes');
    const file = join(volumes, 'kubernetes.io~configmap', 'html', 'index.html');
    const reads = (text: string) => existsSync(file) && readFileSync(file, 'utf8') === text;
    await until(() => reads('version 1'), 'the first content', 60_000);
    writeFileSync(join(manifests, 'site.yaml'), configMap('version 2'));
    await until(() => reads('version 2'), 'the edit to reach the pod', 30_000);
    assert.equal(readlinkSync(file.replace(/index\.html$/, 'index.html')), '..data/index.html');
  } finally {
    agentProcess.kill('SIGTERM');
    await new Promise((resolve) => agentProcess.once('exit', resolve));
  }
});
