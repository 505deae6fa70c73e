/**
 * The host layer's limits and timeouts, each with the reason for its value (docs/style.md rule 5,
 * rule 7). They live here rather than in src/constants.ts because only the host layer reads
 * them; the relation to the executor's call timeout is checked when this module loads.
 */
import { assert } from '../assert.js';
import { callTimeoutMsDefault } from '../constants.js';

/**
 * mount, umount, losetup and blkid answer in milliseconds; one that has not answered in a
 * minute is stuck on a hung device, and its effect is uncertain.
 */
export const commandTimeoutMsDefault = 60_000;
/**
 * mkfs, e2fsck, resize2fs and xfs_growfs touch the whole device and may take longer; they
 * still finish before the executor's own call timeout, so the host's classification of the
 * failure (not a generic timeout) reaches the log.
 */
export const fsCommandTimeoutMs = 100_000;
/**
 * Command helpers (src/host/command-helper.ts) running commands at once. mount and umount
 * take the kernel's mount lock, so more in parallel mostly wait there; four keep one slow
 * command (an mkfs, a umount of a hung device) from holding back every other pod.
 */
export const commandHelpersMax = 4;
/** Output a command may print at most; more is a sign of a wrong command. */
export const commandOutputBytesMax = 16 * 1024 * 1024;
/**
 * Mounts stacked at one path that ensureUnmounted removes at most. Anything stacked deeper
 * is a runaway loop mounting over and over, and deserves a human.
 */
export const stackedMountsMax = 16;
/**
 * How long detachLoop waits for the kernel to finish a detach it deferred because a
 * short-lived user (udev's probe after a change event) still had the device open.
 * Such users close it within milliseconds; a real user (a mount elsewhere) does not.
 */
export const loopDetachWaitMs = 1_000;
/** Poll period while waiting for a deferred loop detach. */
export const loopDetachPollMs = 50;
/** Kubernetes object names are at most 253 characters; a path component at most 255 bytes. */
export const nameBytesMax = 253;
/** How much of a hostile value an error message quotes; the rest is elided. */
export const messageValueCharsMax = 80;

assert(
  commandTimeoutMsDefault < callTimeoutMsDefault,
  'host commands must time out before the call',
);
assert(
  fsCommandTimeoutMs < callTimeoutMsDefault,
  'filesystem commands must time out before the call',
);
assert(
  commandTimeoutMsDefault <= fsCommandTimeoutMs,
  'filesystem commands get at least the default',
);
assert(commandHelpersMax >= 2, 'one slow command must not hold back every other');
assert(loopDetachPollMs < loopDetachWaitMs, 'the detach wait polls more than once');
assert(nameBytesMax <= 255, 'a path component is at most 255 bytes (NAME_MAX)');
