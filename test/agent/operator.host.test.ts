/**
 * Operator actions, black-box through the CLI against a running agent: `vole detach`,
 * `vole release` and `vole retry` go over the agent's root-only socket, are recorded in
 * its log with their reason, and are decided by its planner — refused while a pod mount
 * may exist unless forced, and carried out through the machines.
 */
import assert from 'node:assert/strict';
import { cpSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { hostSandbox, hostTestSkipReason } from '../support/host.js';
import { repo, startVole, vole } from '../support/agent-process.js';
import type { VoleEvent } from '../../src/events/index.js';

const skip = hostTestSkipReason();
const { base, root } = skip === false ? hostSandbox('operator') : { base: '', root: '' };

function events(db: string): VoleEvent[] {
  const out = vole('export', '--db', db);
  assert.equal(out.status, 0, out.stderr);
  return out.stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as VoleEvent);
}

async function eventually(what: string, check: () => boolean, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

const stuckPod = (dir: string) => `apiVersion: v1
kind: Pod
metadata: {name: stuck, namespace: default, uid: 9a1b-stuck}
spec:
  containers: [{name: c, volumeMounts: [{name: config, mountPath: /config}]}]
  volumes: [{name: config, hostPath: {path: ${dir}, type: Directory}}]
`;

test('no agent: a clear error and exit 2', () => {
  const out = vole(
    'retry',
    'x',
    '--reason',
    'r',
    '--root',
    join(base || '/nonexistent', 'nowhere'),
  );
  assert.equal(out.status, 2);
  assert.match(
    out.stderr,
    /^vole: no vole agent listens on .*nowhere\/vole\.sock \(no socket there\): is `vole run --root .*` running\?/,
  );
});

test(
  'host: operator requests through the running agent, its planner and its log',
  { skip, timeout: 180_000 },
  async (t) => {
    const manifests = join(base, 'manifests');
    const db = join(base, 'vole.db');
    // Outside the agent's own directories (a hostPath there is refused).
    const outside = mkdtempSync(join(tmpdir(), 'vole-operator-host-'));
    t.after(() => rmSync(outside, { recursive: true, force: true }));
    const missing = join(outside, 'config-dir');
    mkdirSync(manifests, { recursive: true });
    cpSync(join(repo, 'examples/manifests'), manifests, { recursive: true });
    writeFileSync(join(manifests, 'stuck.yaml'), stuckPod(missing));
    const agent = startVole(['run', '--manifests', manifests, '--root', root, '--db', db]);
    t.after(() => agent.stop());
    const socket = (await agent.line(/operator requests .* on (\S+)$/))[1]!;
    await agent.line(/pod default\/web: mounted/);
    await agent.line(/pod default\/batch: mounted/);
    const mode = statSync(socket);
    assert.ok(mode.isSocket());
    assert.equal(mode.mode & 0o777, 0o600, 'the socket is root-only');
    assert.equal(mode.uid, 0);
    const req = (...args: string[]) => vole(...args, '--root', root);
    const disk = 'disk.vole.dev/web-data';
    const why = JSON.parse(vole('why', 'default/web', '--db', db, '--json').stdout) as {
      volumes: { outerVolumeSpecName: string; volume: string }[];
    };
    assert.equal(why.volumes.find((v) => v.outerVolumeSpecName === 'data')?.volume, disk);

    await t.test('vole why and vole retry on a volume that keeps failing', async () => {
      const failures = () =>
        events(db).filter((e) => e.type === 'CallFailed' && e.call === 'setUp').length;
      await eventually('three failed setUps', () => failures() >= 3);
      const stuck = vole('why', 'stuck', '--db', db);
      assert.match(stuck.stdout, /config \(kubernetes\.io\/host-path\/.*\): waits on setUp/);
      assert.match(stuck.stdout, /last error at seq \d+ .*config-dir/);
      // Retry inside a backoff long enough to tell a retry from the backoff's own.
      let answer: { volumes: { volume: string; nextRetryAtMs: number | null }[] };
      for (;;) {
        answer = JSON.parse(vole('why', 'stuck', '--db', db, '--json').stdout);
        // 5 s: room for two CLI runs on a loaded machine before the backoff would retry anyway.
        if ((answer.volumes[0]!.nextRetryAtMs ?? 0) - Date.now() > 5_000) break;
        const seen = failures();
        await eventually('one more failed setUp', () => failures() > seen);
      }
      const { volume, nextRetryAtMs } = answer.volumes[0]!;
      assert.ok(nextRetryAtMs !== null);
      mkdirSync(missing);
      const retry = req(
        'retry',
        'config',
        '--pod',
        'stuck',
        '--reason',
        'created the config directory',
      );
      assert.equal(retry.status, 0, retry.stdout + retry.stderr);
      assert.match(
        retry.stdout,
        /^accepted \(request seq \d+, decided at seq \d+\): backoff of mount on .* cleared/,
      );
      await agent.line(/pod default\/stuck: mounted/, 10_000);
      const log = events(db);
      const mounted = log.find(
        (e) =>
          e.type === 'CallSucceeded' &&
          e.call === 'setUp' &&
          log.some(
            (s) => s.type === 'OperationStarted' && s.volume === volume && s.opId === e.opId,
          ),
      )!;
      assert.ok(mounted.tsMs < nextRetryAtMs, 'mounted before the backoff would have let it retry');
      const again = req('retry', volume, '--reason', 'again');
      assert.equal(again.status, 1);
      assert.match(again.stdout, /^refused .*nothing of .* is in backoff/);
    });

    await t.test('refused while a pod mount may exist; a wrong node or volume is named', () => {
      const detach = req('detach', disk, '--node', 'node-1', '--reason', 'maintenance');
      assert.equal(detach.status, 1, detach.stdout + detach.stderr);
      assert.match(
        detach.stdout,
        /^refused .*a pod mount may exist: pod 5f0c1a2e-web \(mounted\).*--force/,
      );
      const release = req('release', 'default/web', 'data', '--reason', 'stuck?');
      assert.equal(release.status, 1);
      assert.match(
        release.stdout,
        /^refused .*pod 5f0c1a2e-web still uses disk\.vole\.dev\/web-data.*--force/,
      );
      const node = req('detach', disk, '--node', 'node-9', '--reason', 'r');
      assert.equal(node.status, 1);
      assert.match(node.stdout, /this agent runs node node-1, not node-9/);
      const unknown = req('detach', 'nope', '--node', 'node-1', '--reason', 'r');
      assert.equal(unknown.status, 2);
      assert.match(unknown.stderr, /no volume nope on node node-1/);
      const noReason = req('detach', disk, '--node', 'node-1');
      assert.equal(noReason.status, 2, 'a usage error exits 2');
      assert.match(noReason.stderr, /--reason/);
    });

    await t.test(
      'a forced detach unmounts, detaches, records the override, and the pod mounts again',
      async () => {
        const forced = req(
          'detach',
          disk,
          '--node',
          'node-1',
          '--reason',
          'swap the disk',
          '--force',
          '--wait',
        );
        assert.equal(forced.status, 0, forced.stdout + forced.stderr);
        assert.match(
          forced.stdout,
          /^accepted .*forced: unmounting every pod, then detaching disk\.vole\.dev\/web-data/m,
        );
        assert.match(forced.stdout, /^done \(seq \d+\): disk\.vole\.dev\/web-data detached$/m);
        await agent.line(/pod default\/web: waiting/, 10_000);
        const log = events(db);
        const request = log.find(
          (e) => e.type === 'OperatorRequested' && e.action === 'detach' && e.force,
        )!;
        assert.ok(request.type === 'OperatorRequested' && request.reason === 'swap the disk');
        const after = log.filter((e) => e.seq > request.seq);
        const ops = after
          .filter((e) => e.type === 'OperationStarted' && e.volume === disk)
          .map((e) => e.type === 'OperationStarted' && e.op);
        assert.deepEqual(ops.slice(0, 3), ['unmount', 'unmountDevice', 'detach']);
        assert.ok(
          after.some(
            (e) =>
              e.type === 'OperatorRequestDecided' &&
              e.requestSeq === request.seq &&
              e.verdict === 'done',
          ),
        );
        await eventually('web mounted again', () =>
          /data \(disk\.vole\.dev\/web-data\): mounted/.test(vole('why', 'web', '--db', db).stdout),
        );
      },
    );

    await t.test('a forced release of a pod volume, waited for', () => {
      const release = req(
        'unmount',
        'batch',
        'scratch',
        '--reason',
        'reset scratch',
        '--force',
        '--wait',
      );
      assert.equal(release.status, 0, release.stdout + release.stderr);
      assert.match(release.stdout, /^accepted .*forced: unmounting .* under pod 7d3e9b40-batch/m);
      assert.match(release.stdout, /^done .*unmounted from pod 7d3e9b40-batch$/m);
    });

    assert.equal(await agent.stop(), 143);
    // The log re-verifies: no invariant broken, every decision (the operator's included in
    // the turns it took) the one this version makes.
    const verify = vole('verify', '--db', db);
    assert.equal(verify.status, 0, verify.stdout + verify.stderr);
  },
);

test(
  'host: the controller serves metrics and decides an operator detach of an attached disk',
  { skip, timeout: 120_000 },
  async (t) => {
    const controllerRoot = join(base, 'controller-root');
    const manifests = join(base, 'controller-manifests');
    const db = join(base, 'controller.db');
    mkdirSync(manifests, { recursive: true });
    cpSync(join(repo, 'examples/controller/cluster.yaml'), join(manifests, 'cluster.yaml'));
    const controller = startVole([
      'controller',
      '--manifests',
      manifests,
      '--root',
      controllerRoot,
      '--db',
      db,
      '--metrics-address',
      '127.0.0.1:0',
    ]);
    t.after(() => controller.stop());
    const url = (await controller.line(/metrics on (http:\/\/[0-9.:]+)\/metrics/))[1]!;
    await controller.line(/node node-1: volumesAttached \[disk\.vole\.dev\/shared-data\]/);
    const text = await (await fetch(`${url}/metrics`)).text();
    assert.match(
      text,
      /attachdetach_controller_total_volumes\{plugin_name="kubernetes\.io\/csi:disk\.vole\.dev",state="actual_state_of_world"\} 1/,
    );
    assert.match(
      text,
      /storage_count_attachable_volumes_in_use\{node="node-1",volume_plugin="kubernetes\.io\/csi:disk\.vole\.dev"\} 1/,
    );
    assert.match(
      text,
      /# TYPE attach_detach_controller_attachdetach_controller_forced_detaches counter/,
    );
    assert.equal((await fetch(`${url}/readyz`)).status, 200);

    const req = (...args: string[]) => vole(...args, '--controller', '--root', controllerRoot);
    const volume = 'disk.vole.dev/shared-data';
    const refused = req('detach', volume, '--node', 'node-1', '--reason', 'maintenance');
    assert.equal(refused.status, 1, refused.stdout + refused.stderr);
    assert.match(
      refused.stdout,
      /^refused .*pods scheduled there want it: default\/api; use --force/,
    );
    const elsewhere = req('detach', volume, '--node', 'node-2', '--reason', 'r');
    assert.equal(elsewhere.status, 1);
    assert.match(elsewhere.stdout, /is not attached to node node-2/);
    const release = req('release', 'api', 'data', '--reason', 'r');
    assert.equal(release.status, 2, 'the controller knows no pod volumes by name');
    const forced = req(
      'detach',
      volume,
      '--node',
      'node-1',
      '--reason',
      'move the disk',
      '--force',
      '--wait',
    );
    assert.equal(forced.status, 0, forced.stdout + forced.stderr);
    assert.match(forced.stdout, /^accepted .*forced, without the in-use check: detaching/m);
    assert.match(forced.stdout, /^done .*detached from node-1$/m);
    // The pod still wants it: attached again once the operator's detach is done.
    await controller.line(/node node-1: volumesAttached \[\]/);
    const again = controller.lines.length;
    await controller.line(/node node-1: volumesAttached \[disk\.vole\.dev\/shared-data\]/);
    assert.ok(controller.lines.length >= again);
    const log = events(db);
    const request = log.find((e) => e.type === 'OperatorRequested' && e.force);
    assert.ok(
      request?.type === 'OperatorRequested' &&
        request.reason === 'move the disk' &&
        request.node === 'node-1',
    );
    const detach = log.find(
      (e) => e.type === 'OperationStarted' && e.op === 'detach' && e.seq > request.seq,
    );
    assert.ok(
      detach?.type === 'OperationStarted' && detach.verifySafeToDetach === false,
      'forced past the in-use check',
    );
    assert.equal(await controller.stop(), 143);
    const verify = vole('verify', '--db', db);
    assert.equal(verify.status, 0, verify.stdout + verify.stderr);
  },
);
