/**
 * The host layer against the real kernel: tmpfs, bind mounts, loop devices, ext4 and xfs.
 * Runs only as root inside a private mount namespace, never on the machine's own mount
 * table:
 *
 *   unshare -m --propagation private node --import tsx --test test/host/host.host.test.ts
 *
 * Loop devices are global to the machine even so, which is why every test detaches what it
 * attached and the last test checks that no loop device still uses our images.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import {
  attachLoop,
  bindMount,
  defaultHost,
  detachLoop,
  ensureImage,
  ensureMounted,
  ensureUnmounted,
  findLoopForImage,
  formatAndMount,
  fsSizeBytes,
  HostError,
  isBlank,
  isMountPoint,
  listLoops,
  mkfs,
  mount,
  mountRefs,
  mountsUnder,
  probeDevice,
  readMountTable,
  resizeFs,
  resizeLoop,
  tmpfs,
  umount,
} from '../../src/host/index.js';

// The namespace check: the first thing this file does.
function readNamespace(pid: number | 'self'): string | undefined {
  try {
    return readlinkSync(`/proc/${pid}/ns/mnt`);
  } catch {
    return undefined; // another user's process, or a sandbox that hides pid 1
  }
}

function parentPid(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return undefined;
  }
}

/**
 * Why this file must not touch the host, or false when it may. The rule is pid 1's mount
 * namespace against ours; where pid 1's is hidden (a sandboxed init), the namespace of an
 * ancestor process (the shell that ran `unshare`) or of the test runner (VOLE_OUTER_MOUNT_NS)
 * stands in for it.
 */
const fixHint = 'run it under unshare -m --propagation private';

function hostSkipReason(): string | false {
  const own = readNamespace('self');
  if (own === undefined)
    return 'cannot read /proc/self/ns/mnt, so cannot prove a private mount namespace';
  const init = readNamespace(1);
  if (init === own) return "runs in the host's mount namespace (same as pid 1); " + fixHint;
  if (init === undefined) {
    const outer = [process.env.VOLE_OUTER_MOUNT_NS];
    for (let pid = parentPid(process.pid); pid !== undefined && pid > 1; pid = parentPid(pid))
      outer.push(readNamespace(pid));
    if (!outer.some((ns) => ns !== undefined && ns !== '' && ns !== own)) {
      return (
        "pid 1's mount namespace is hidden and no ancestor is in another one: " +
        `not provably private; ${fixHint}`
      );
    }
  }
  if (process.getuid?.() !== 0) return 'host tests need root';
  return false;
}
const skip = hostSkipReason();

const commandExists = (cmd: string) => {
  try {
    execFileSync('sh', ['-c', 'command -v "$1"', 'sh', cmd], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
};
const xfsSkip =
  skip ||
  (commandExists('mkfs.xfs') ? false : 'mkfs.xfs is not installed (apt-get install xfsprogs)');
/** CAP_SYS_RESOURCE (bit 24 of CapEff) decides whether a mounted ext4 can grow. */
const hasSysResource = (() => {
  const line = readFileSync('/proc/self/status', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('CapEff:'));
  return line !== undefined && (BigInt(`0x${line.split(/\s+/)[1]}`) & (1n << 24n)) !== 0n;
})();

const MiB = 1024 * 1024;
const base = mkdtempSync(join(tmpdir(), 'vole-hostlayer-'));

/** Unmounts everything under `dir` (deepest first) and detaches the loop devices of its images. */
async function cleanUp(dir: string): Promise<void> {
  for (const m of (await mountsUnder(dir)).reverse())
    await ensureUnmounted(m.mountPoint, { lazy: true });
  for (const loop of await listLoops())
    if (loop.backFile.startsWith(`${dir}/`)) await detachLoop(loop.name);
}

function scratch(name: string): string {
  const dir = join(base, name);
  mkdirSync(dir, { recursive: true });
  return dir;
}

const df = (mountPath: string) =>
  Number(
    execFileSync('df', ['-B1', '--output=size', mountPath], { encoding: 'utf8' })
      .trim()
      .split('\n')[1],
  );

after(async () => {
  if (skip) return rmSync(base, { recursive: true, force: true });
  await cleanUp(base);
  rmSync(base, { recursive: true, force: true });
});

test(
  'host: tmpfs: mount with a size, ensureMounted is a no-op, umount, ensureUnmounted is a no-op',
  { skip },
  async () => {
    const dir = scratch('tmpfs');
    const target = join(dir, 'mnt');
    mkdirSync(target);
    try {
      await tmpfs(target, { sizeBytes: 16 * MiB });
      assert.equal(await isMountPoint(target), true);
      const entry = (await readMountTable()).find((e) => e.mountPoint === target);
      assert.equal(entry?.fsType, 'tmpfs');
      assert.ok(
        entry?.superOptions.includes('size=16384k'),
        `size limit in ${entry?.superOptions.join(',')}`,
      );
      assert.deepEqual(await ensureMounted({ source: 'tmpfs', target, fsType: 'tmpfs' }), {
        kind: 'alreadyMounted',
      });

      await umount(target);
      assert.equal(await isMountPoint(target), false);
      assert.deepEqual(await ensureUnmounted(target), { unmountCount: 0 });
      await assert.rejects(umount(target), (error: unknown) => {
        assert.ok(error instanceof HostError);
        assert.equal(error.kind, 'final');
        assert.match(error.stderr, /not mounted/);
        assert.match(error.message, /use ensureUnmounted/);
        return true;
      });
    } finally {
      await cleanUp(dir);
    }
  },
);

test(
  'host: bind mounts: mountRefs sees both binds; a read-only bind refuses writes; no stacking',
  { skip },
  async () => {
    const dir = scratch('bind');
    const [global, podA, podB, other] = ['global', 'pod-a', 'pod-b', 'other'].map((name) =>
      join(dir, name),
    ) as [string, string, string, string];
    for (const d of [global, podA, podB, other]) mkdirSync(d);
    try {
      await tmpfs(global, { sizeBytes: 4 * MiB });
      await bindMount(global, podA);
      await bindMount(global, podB, { readOnly: true });
      assert.deepEqual((await mountRefs(global)).sort(), [podA, podB]);
      assert.deepEqual(
        await defaultHost.mountRefs(podA),
        [global, podB],
        'refs from a bind include the global mount',
      );

      writeFileSync(join(podA, 'hello.txt'), 'through the bind');
      assert.equal(readFileSync(join(global, 'hello.txt'), 'utf8'), 'through the bind');
      assert.throws(() => writeFileSync(join(podB, 'nope.txt'), 'x'), /EROFS/);

      assert.deepEqual(await ensureMounted({ source: global, target: podA, bind: true }), {
        kind: 'alreadyMounted',
      });
      await assert.rejects(
        ensureMounted({ source: other, target: podA, bind: true }),
        /already a mount point of tmpfs/,
      );
      assert.deepEqual(await ensureUnmounted(podB), { unmountCount: 1 });
      assert.deepEqual(await mountRefs(global), [podA]);
    } finally {
      await cleanUp(dir);
    }
  },
);

test(
  'host: disk: sparse image, idempotent attach, format once, data survives a remount, detach',
  { skip },
  async () => {
    const dir = scratch('disk');
    const image = join(dir, 'disks', 'data.img');
    const target = join(dir, 'mounts', 'data');
    try {
      assert.deepEqual(await ensureImage(image, 64 * MiB), { created: true, grown: false });
      assert.equal(statSync(image).size, 64 * MiB);
      assert.ok(statSync(image).blocks * 512 < MiB, 'the image is sparse');
      assert.deepEqual(await ensureImage(image, 64 * MiB), { created: false, grown: false });
      await assert.rejects(ensureImage(image, 32 * MiB), /volumes never shrink/);

      const { device } = await attachLoop(image);
      assert.match(device, /^\/dev\/loop\d+$/);
      assert.deepEqual(
        await attachLoop(image),
        { device },
        'attaching again returns the same device',
      );
      assert.equal(await findLoopForImage(image), device);
      assert.equal(await isBlank(device), true);

      assert.deepEqual(await formatAndMount({ device, target, fsType: 'ext4' }), {
        formatted: true,
      });
      assert.equal(await isBlank(device), false);
      assert.deepEqual(await probeDevice(device), { kind: 'filesystem', fsType: 'ext4' });
      writeFileSync(join(target, 'keep.txt'), 'persisted');
      await assert.rejects(detachLoop(device), /still mounted at .*; unmount it before detaching/);

      await umount(target);
      assert.deepEqual(await formatAndMount({ device, target, fsType: 'ext4' }), {
        formatted: false,
      });
      assert.equal(readFileSync(join(target, 'keep.txt'), 'utf8'), 'persisted', 'not reformatted');
      assert.deepEqual(
        await formatAndMount({ device, target, fsType: 'ext4' }),
        { formatted: false },
        'a repeat is a no-op',
      );
      assert.equal((await mountsUnder(target)).length, 1, 'and stacks nothing');
      await assert.rejects(
        formatAndMount({ device, target, fsType: 'xfs' }),
        /holds a ext4 filesystem, not xfs/,
      );
      await assert.rejects(
        mkfs(device, 'ext4'),
        /refusing to format .*: it holds a ext4 filesystem/,
      );

      await ensureUnmounted(target);
      assert.deepEqual(await detachLoop(device), { kind: 'detached' });
      assert.deepEqual(await detachLoop(device), { kind: 'alreadyDetached' });
      assert.equal(await findLoopForImage(image), undefined);
    } finally {
      await cleanUp(dir);
    }
  },
);

test('host: loop: a device held open elsewhere is not reported detached', { skip }, async () => {
  const dir = scratch('loop-busy');
  const image = join(dir, 'busy.img');
  try {
    await ensureImage(image, 8 * MiB);
    const { device } = await attachLoop(image);
    // An open file descriptor stands in for a mount in another namespace: the kernel
    // only marks the device for automatic detach and losetup -d exits 0 all the same.
    const holder = await open(device, 'r');
    try {
      await assert.rejects(detachLoop(device), (error: unknown) => {
        assert.ok(error instanceof HostError);
        assert.equal(error.kind, 'transient');
        assert.match(error.message, /still open elsewhere .* the kernel will detach it/);
        return true;
      });
      assert.equal((await listLoops()).find((d) => d.name === device)?.autoClear, true);
    } finally {
      await holder.close();
    }
    // The last close lets the kernel finish the detach it deferred; detachLoop waits for it.
    assert.match((await detachLoop(device)).kind, /^(detached|alreadyDetached)$/);
    assert.equal(await findLoopForImage(image), undefined);
  } finally {
    await cleanUp(dir);
  }
});

test(
  'host: ext4: online growth needs CAP_SYS_RESOURCE; offline growth works',
  { skip },
  async () => {
    const dir = scratch('ext4-grow');
    const image = join(dir, 'grow.img');
    const target = join(dir, 'mnt');
    try {
      await ensureImage(image, 64 * MiB);
      const { device } = await attachLoop(image);
      await formatAndMount({ device, target, fsType: 'ext4' });
      const before = await fsSizeBytes(target);

      assert.deepEqual(await ensureImage(image, 128 * MiB), { created: false, grown: true });
      await resizeLoop(device);
      const online = resizeFs({ device, mountPath: target, fsType: 'ext4' });
      if (hasSysResource) {
        await online;
      } else {
        await assert.rejects(online, (error: unknown) => {
          assert.ok(error instanceof HostError);
          assert.equal(error.kind, 'final');
          assert.match(error.message, /online needs CAP_SYS_RESOURCE.*use fsType xfs.*offline/);
          return true;
        });
        assert.equal(await fsSizeBytes(target), before, 'nothing grew');
        await umount(target);
        await resizeFs({ device, fsType: 'ext4' });
        await formatAndMount({ device, target, fsType: 'ext4' });
      }
      const grown = await fsSizeBytes(target);
      assert.ok(grown > before * 1.8, `ext4 grew from ${before} to ${grown} bytes`);
      assert.equal(df(target), grown, 'df agrees');
    } finally {
      await cleanUp(dir);
    }
  },
);

test('host: xfs: grows online (xfs_growfs) and df shows it', { skip: xfsSkip }, async () => {
  const dir = scratch('xfs-grow');
  const image = join(dir, 'grow.img');
  const target = join(dir, 'mnt');
  try {
    await ensureImage(image, 320 * MiB); // mkfs.xfs refuses filesystems under 300 MB
    const { device } = await attachLoop(image);
    assert.deepEqual(await formatAndMount({ device, target, fsType: 'xfs' }), { formatted: true });
    const before = df(target);

    await ensureImage(image, 640 * MiB);
    await resizeLoop(device);
    await resizeFs({ device, mountPath: target, fsType: 'xfs' });
    const after = df(target);
    assert.ok(after > before * 1.8, `xfs grew from ${before} to ${after} bytes`);
    assert.equal(await fsSizeBytes(target), after);
    await assert.rejects(resizeFs({ device, fsType: 'xfs' }), /grows only while mounted/);
  } finally {
    await cleanUp(dir);
  }
});

test(
  'host: xfs: a device too small for xfs is a final error that says so',
  { skip: xfsSkip },
  async () => {
    const dir = scratch('xfs-small');
    const image = join(dir, 'small.img');
    try {
      await ensureImage(image, 64 * MiB);
      const { device } = await attachLoop(image);
      await assert.rejects(mkfs(device, 'xfs'), (error: unknown) => {
        assert.ok(error instanceof HostError);
        assert.equal(error.kind, 'final');
        assert.match(error.message, /make the volume bigger \(xfs needs 300 MiB\)/);
        return true;
      });
    } finally {
      await cleanUp(dir);
    }
  },
);

test('host: mount failures carry the kind and the fix', { skip }, async () => {
  const dir = scratch('failures');
  const target = join(dir, 'mnt');
  mkdirSync(target);
  await assert.rejects(
    mount({ source: join(dir, 'no-such-device'), target, fsType: 'ext4' }),
    (error: unknown) => {
      assert.ok(error instanceof HostError);
      assert.equal(error.kind, 'final');
      assert.match(error.command, /^mount -t ext4 -- /);
      assert.match(error.message, /does not exist; create the source/);
      return true;
    },
  );
  await assert.rejects(
    mount({ source: 'tmpfs', target: 'relative/path', fsType: 'tmpfs' }),
    /not an absolute path/,
  );
  await assert.rejects(detachLoop('/etc/passwd'), /not a loop device path/);
  // blkid -p exits 2 ("nothing found") for a missing path too; that must not read as blank.
  await assert.rejects(isBlank(join(dir, 'no-such-device')), /attach the volume before probing/);
});

test(
  'host: nothing left: no mount under the scratch dir, no loop device on its images',
  { skip },
  async () => {
    assert.deepEqual(
      (await mountsUnder(base)).map((m) => m.mountPoint),
      [],
    );
    const ours = (await listLoops()).filter((loop) => loop.backFile.startsWith(`${base}/`));
    assert.deepEqual(ours, [], 'every loop device over a test image was detached');
    assert.ok(existsSync(base));
  },
);
