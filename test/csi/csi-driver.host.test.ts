/**
 * The agent (`vole run`) drives `vole csi-driver`, a separate process, for real: a
 * Filesystem PV mounted, written, grown online (XFS) and torn down with the writes on the
 * disk image; a Block PV mapped into a pod and unmapped; ext4 online growth refused with a
 * clear error. Nothing is left: no mounts, no loop devices, no device nodes.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import {
  closeSync,
  mkdtempSync,
  openSync,
  readFileSync,
  readSync,
  rmSync,
  statfsSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { hostSandbox, hostTestSkipReason, until } from '../support/host.js';
import {
  agentArgs,
  assertNothingLeft,
  disk,
  events,
  pod,
  runOnce,
  sandboxIn,
  startDriver,
  stop,
  targetPath,
  write,
} from './support.js';

const skip = hostTestSkipReason();
const { base } = skip === false ? hostSandbox('csi') : { base: '' };

/** Mounts the image read-only elsewhere and reads one file from it. */
function readFromImage(image: string, file: string, fsType: string): string {
  const dir = mkdtempSync(join(base, 'image-'));
  const loop = spawnSync('losetup', ['--find', '--show', '--read-only', image], {
    encoding: 'utf8',
  }).stdout.trim();
  try {
    const options = fsType === 'xfs' ? 'ro,norecovery,nouuid' : 'ro';
    assert.equal(spawnSync('mount', ['-t', fsType, '-o', options, loop, dir]).status, 0);
    try {
      return readFileSync(join(dir, file), 'utf8');
    } finally {
      spawnSync('umount', [dir]);
    }
  } finally {
    spawnSync('losetup', ['-d', loop]);
    rmSync(dir, { recursive: true, force: true });
  }
}

test(
  'host: a Filesystem PV through vole csi-driver: mounted, written, grown online (XFS), torn down',
  { skip, timeout: 180_000 },
  async () => {
    const s = sandboxIn(base, 'fs');
    const driver = await startDriver(s);
    try {
      write(s, 'disk.yaml', disk({ name: 'fs-1', fsType: 'xfs', size: '300Mi' }));
      write(s, 'pod.yaml', pod({ uid: 'uid-fs', claim: 'fs-1' }));
      const up = runOnce(s);
      assert.equal(up.status, 0, up.stdout + up.stderr);
      writeFileSync(join(targetPath(s, 'uid-fs'), 'hello.txt'), 'written through CSI\n');
      const before = statfsSync(targetPath(s, 'uid-fs'));
      write(
        s,
        'disk.yaml',
        disk({ name: 'fs-1', fsType: 'xfs', size: '400Mi', claimSize: '300Mi' }),
      );
      const grown = runOnce(s);
      assert.equal(grown.status, 0, grown.stdout + grown.stderr);
      const after = statfsSync(targetPath(s, 'uid-fs'));
      assert.ok(
        after.blocks * after.bsize > before.blocks * before.bsize + 90 * 2 ** 20,
        'the filesystem grew by ~100 MiB',
      );
      rmSync(join(s.manifests, 'pod.yaml'));
      const down = runOnce(s);
      assert.equal(down.status, 0, down.stdout + down.stderr);
      await assertNothingLeft(s);
      assert.equal(
        readFromImage(join(s.state, 'images', 'fs-1.img'), 'hello.txt', 'xfs'),
        'written through CSI\n',
      );
      const rpcs = events(s).flatMap((e) =>
        e.rpc === undefined ? [] : [(e.rpc as { method: string }).method],
      );
      for (const method of [
        'ControllerPublishVolume',
        'NodeStageVolume',
        'NodePublishVolume',
        'NodeExpandVolume',
        'NodeUnpublishVolume',
        'NodeUnstageVolume',
        'ControllerUnpublishVolume',
      ])
        assert.ok(
          rpcs.some((m) => m.endsWith(`/${method}`)),
          `${method} in the log`,
        );
    } finally {
      await stop(driver);
    }
  },
);

test(
  'host: a Block PV through vole csi-driver: the pod reads and writes the raw device; unmapped, nothing left',
  { skip, timeout: 180_000 },
  async () => {
    const s = sandboxIn(base, 'block');
    const driver = await startDriver(s);
    const devicePath = join(
      s.root,
      'pods',
      'uid-blk',
      'volumeDevices',
      'kubernetes.io~csi',
      'pv-blk-1',
    );
    try {
      write(s, 'disk.yaml', disk({ name: 'blk-1', size: '32Mi', block: true }));
      write(s, 'pod.yaml', pod({ uid: 'uid-blk', claim: 'blk-1', block: true }));
      const up = runOnce(s);
      assert.equal(up.status, 0, up.stdout + up.stderr);
      const fd = openSync(devicePath, 'r+');
      const bytes = Buffer.from('raw bytes through CSI');
      writeSync(fd, bytes, 0, bytes.length, 4096);
      const back = Buffer.alloc(bytes.length);
      readSync(fd, back, 0, back.length, 4096);
      closeSync(fd);
      assert.equal(back.toString(), bytes.toString());
      rmSync(join(s.manifests, 'pod.yaml'));
      const down = runOnce(s);
      assert.equal(down.status, 0, down.stdout + down.stderr);
      await assertNothingLeft(s, [devicePath]);
      const image = readFileSync(join(s.state, 'images', 'blk-1.img'));
      assert.equal(image.subarray(4096, 4096 + bytes.length).toString(), bytes.toString());
    } finally {
      await stop(driver);
    }
  },
);

test(
  'host: ext4 cannot grow online here (no CAP_SYS_RESOURCE): the CSI error says so, the pod stays mounted',
  { skip, timeout: 180_000 },
  async () => {
    const s = sandboxIn(base, 'ext4');
    const driver = await startDriver(s);
    try {
      write(s, 'disk.yaml', disk({ name: 'e4', fsType: 'ext4', size: '64Mi' }));
      write(s, 'pod.yaml', pod({ uid: 'uid-e4', claim: 'e4' }));
      assert.equal(runOnce(s).status, 0);
      write(s, 'disk.yaml', disk({ name: 'e4', fsType: 'ext4', size: '96Mi', claimSize: '64Mi' }));
      const flag = `disk.csi.vole.dev=unix://${s.socket}`;
      const agent = spawn(process.execPath, agentArgs(s, ['--csi', flag]), { stdio: 'ignore' });
      const nodeExpandFailures = () =>
        events(s).filter((e) => e.type === 'CallFailed' && e.call === 'nodeExpand');
      try {
        await until(() => nodeExpandFailures().length > 0, 'NodeExpandVolume to fail');
      } finally {
        await stop(agent);
      }
      const failed = nodeExpandFailures();
      const error = failed[0]!.error as { kind: string; message: string };
      assert.match(
        error.message,
        /NodeExpandVolume[\s\S]*INTERNAL[\s\S]*CAP_SYS_RESOURCE[\s\S]*use fsType xfs/,
      );
      assert.equal(error.kind, 'final');
      assert.equal((failed[0]!.rpc as { code: string }).code, 'INTERNAL');
      assert.ok(statfsSync(targetPath(s, 'uid-e4')).blocks > 0, 'still mounted');
      rmSync(join(s.manifests, 'pod.yaml'));
      assert.equal(runOnce(s).status, 0);
      await assertNothingLeft(s);
    } finally {
      await stop(driver);
    }
  },
);
