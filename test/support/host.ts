/**
 * Host tests run only as root inside a private mount namespace, never on the machine's
 * real mount table: the runner (scripts/run-tests.mjs) passes its own namespace in
 * VOLE_OUTER_MOUNT_NS and runs the tests under `unshare -m`, so the two must differ.
 */
import { mkdtempSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';
import { detachLoopForImage, listLoops } from '../../src/host/loop.js';
import { ensureUnmounted } from '../../src/host/mount.js';
import { mountsUnder, readMountTable } from '../../src/host/mountinfo.js';

export function hostTestSkipReason(): string | false {
  if (process.getuid?.() !== 0) return 'host tests need root';
  const outer = process.env.VOLE_OUTER_MOUNT_NS;
  if (outer === undefined || outer === '')
    return 'host tests run only through scripts/test.sh (a private mount namespace)';
  if (readlinkSync('/proc/self/ns/mnt') === outer)
    return 'not in a private mount namespace (no unshare?)';
  return false;
}

/**
 * A temporary directory for one host test file, removed after it with everything a failed
 * test may have left: mounts below it first, then loop devices over its images.
 */
export function hostSandbox(prefix: string): { base: string; root: string } {
  const base = mkdtempSync(join(tmpdir(), `vole-${prefix}-`));
  after(async () => {
    for (const m of mountsUnder(await readMountTable(), base).reverse()) {
      await ensureUnmounted(m.mountPoint).catch(() => undefined);
    }
    for (const loop of await listLoops()) {
      if (loop.backFile.startsWith(base))
        await detachLoopForImage(loop.backFile).catch(() => undefined);
    }
    rmSync(base, { recursive: true, force: true });
  });
  return { base, root: join(base, 'root') };
}

/** Waits (real time) until `condition` holds, failing after `timeoutMs`. */
export async function until(
  condition: () => boolean,
  what: string,
  timeoutMs = 60_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
