/**
 * Host tests run only as root inside a private mount namespace, never on the machine's
 * real mount table: the runner (scripts/run-tests.mjs) passes its own namespace in
 * VOLE_OUTER_MOUNT_NS and runs the tests under `unshare -m`, so the two must differ.
 */
import { readlinkSync } from 'node:fs';

export function hostTestSkipReason(): string | false {
  if (process.getuid?.() !== 0) return 'host tests need root';
  const outer = process.env.VOLE_OUTER_MOUNT_NS;
  if (outer === undefined || outer === '')
    return 'host tests run only through scripts/test.sh (a private mount namespace)';
  if (readlinkSync('/proc/self/ns/mnt') === outer)
    return 'not in a private mount namespace (no unshare?)';
  return false;
}
