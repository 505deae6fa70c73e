/**
 * Dynamic provisioning for real: `vole run` with `vole csi-driver` (a separate process)
 * and only a StorageClass (WaitForFirstConsumer, xfs, expansion allowed), a claim without
 * a PV and a pod in its manifest directory. The loop disk is created (CreateVolume
 * pvc-<claim uid>) once the pod uses the claim, mounted, grown while mounted after the
 * claim's request is raised (ControllerExpandVolume, NodeExpandVolume), and deleted
 * (DeleteVolume) after claim and pod are removed; `vole history` tells each step and
 * nothing is left on the host.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, rmSync, statfsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { hostSandbox, hostTestSkipReason, until } from '../support/host.js';
import {
  agentArgs,
  assertNothingLeft,
  events,
  pod,
  sandboxIn,
  startDriver,
  stop,
  targetPath,
  write,
} from './support.js';

const skip = hostTestSkipReason();
const { base } = skip === false ? hostSandbox('provision') : { base: '' };
const main = join(import.meta.dirname, '../../src/cli/main.ts');

const storageClass = `apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: disks}
provisioner: disk.csi.vole.dev
parameters: {csi.storage.k8s.io/fstype: xfs}
volumeBindingMode: WaitForFirstConsumer
allowVolumeExpansion: true
`;

const claim = (storage: string) => `apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: default, uid: c-1}
spec: {storageClassName: disks, accessModes: [ReadWriteOnce], resources: {requests: {storage: ${storage}}}}
`;

/** The disk driver's image of the provisioned volume (its --state-dir layout). */
const image = (s: { state: string }) => join(s.state, 'images', 'pvc-c-1.img');

const calls = (s: Parameters<typeof events>[0], call: string) =>
  events(s).filter((e) => e.type === 'CallSucceeded' && e.call === call);

test(
  'host: a StorageClass claim provisioned through vole csi-driver, mounted, grown and deleted',
  { skip, timeout: 240_000 },
  async () => {
    const s = sandboxIn(base, 'wffc');
    const driver = await startDriver(s);
    const flag = `disk.csi.vole.dev=unix://${s.socket}`;
    const agent = spawn(process.execPath, agentArgs(s, ['--csi', flag]), { stdio: 'ignore' });
    try {
      write(s, 'class.yaml', storageClass);
      write(s, 'claim.yaml', claim('300Mi'));
      await until(() => existsSync(s.db), 'the agent to start its log');
      await until(
        () =>
          events(s).some(
            (e) =>
              e.type === 'ObjectUpserted' && (e.object as { kind: string }).kind === 'StorageClass',
          ),
        'the agent to read the class',
      );
      await new Promise((resolve) => setTimeout(resolve, 500));
      assert.equal(
        calls(s, 'createVolume').length,
        0,
        'WaitForFirstConsumer: nothing before a pod',
      );
      write(s, 'pod.yaml', pod({ uid: 'uid-p', claim: 'data' }));
      await until(() => calls(s, 'setUp').length > 0, 'the provisioned volume mounted', 60_000);
      assert.equal(calls(s, 'createVolume').length, 1);
      writeFileSync(join(targetPath(s, 'uid-p'), 'hello.txt'), 'on a provisioned disk\n');
      assert.ok(existsSync(image(s)), 'the driver made the disk image');
      // The volume was placed on the pod's node (NodeGetInfo's topology as the requisite) and
      // the PV's node affinity says so.
      const bound = spawnSync(
        process.execPath,
        ['--import', 'tsx', main, 'get', 'pvs', '--db', s.db, '--json'],
        { encoding: 'utf8' },
      );
      const [pv] = JSON.parse(bound.stdout) as { name: string; status: string; zone: string }[];
      assert.deepEqual(pv, { ...pv!, name: 'pvc-c-1', status: 'Bound', zone: 'node-1' });
      const before = statfsSync(targetPath(s, 'uid-p'));
      write(s, 'claim.yaml', claim('400Mi'));
      await until(() => calls(s, 'nodeExpand').length > 0, 'the volume grown on the node', 60_000);
      assert.equal(calls(s, 'controllerExpand').length, 1);
      const after = statfsSync(targetPath(s, 'uid-p'));
      assert.ok(
        after.blocks * after.bsize > before.blocks * before.bsize,
        'the mounted filesystem grew',
      );
      rmSync(join(s.manifests, 'pod.yaml'));
      rmSync(join(s.manifests, 'claim.yaml'));
      await until(() => calls(s, 'deleteVolume').length > 0, 'DeleteVolume', 60_000);
    } finally {
      await stop(agent);
      await stop(driver);
    }
    const pvs = spawnSync(process.execPath, ['--import', 'tsx', main, 'get', 'pvs', '--db', s.db], {
      encoding: 'utf8',
    });
    assert.equal(pvs.stdout.trim(), 'no pvs');
    const history = spawnSync(
      process.execPath,
      ['--import', 'tsx', main, 'history', '--db', s.db],
      {
        encoding: 'utf8',
      },
    ).stdout;
    assert.match(
      history,
      /PersistentVolume pvc-c-1 {2}none → Bound 314572800 bytes {2}createVolume succeeded/,
    );
    assert.match(
      history,
      /Bound 314572800 bytes → Bound 419430400 bytes {2}controllerExpand succeeded/,
    );
    assert.match(history, /→ Released/);
    assert.match(history, /Released 419430400 bytes → none {2}deleteVolume succeeded/);
    assert.ok(!existsSync(image(s)), 'the disk image is gone');
    await assertNothingLeft(s);
  },
);
