/**
 * Loop devices over image files (losetup), idempotent. Loop devices are global to the
 * machine, not to a mount namespace: a device attached here is visible, and detachable,
 * from everywhere.
 */
import { stat } from 'node:fs/promises';
import { resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { HostError } from './errors.js';
import { failed, run, runOk } from './exec.js';
import { loopDetachPollMs, loopDetachWaitMs } from './limits.js';
import { blockDeviceNumber, readMountTable } from './mountinfo.js';

export interface LoopDevice {
  /** `/dev/loopN`. */
  readonly name: string;
  /** The backing file's path; a deleted file's path without the kernel's ` (deleted)`. */
  readonly backFile: string;
  /** The kernel detaches the device by itself when its last user closes it. */
  readonly autoClear: boolean;
  readonly readOnly: boolean;
}

interface LosetupJson {
  readonly loopdevices?: readonly {
    readonly name: string;
    readonly 'back-file'?: string | null;
    readonly autoclear?: boolean | string | number;
    readonly ro?: boolean | string | number;
  }[];
}

/** losetup prints flags as JSON booleans in new versions and as "0"/"1" in old ones. */
const flag = (value: boolean | string | number | undefined): boolean =>
  value === true || value === '1' || value === 1;

const loopDevicePattern = /^\/dev\/loop\d+$/;

function requireLoopDevice(device: string): void {
  if (!loopDevicePattern.test(device)) {
    throw new HostError(
      'final',
      `"${device}" is not a loop device path (/dev/loopN); pass the device attachLoop returned`,
    );
  }
}

/** Every attached loop device of the machine (`losetup --list --json`). */
export async function listLoops(): Promise<LoopDevice[]> {
  const stdout = await runOk(
    'losetup',
    ['--list', '--json', '--output', 'NAME,BACK-FILE,AUTOCLEAR,RO'],
    {
      kind: 'transient',
      fix: 'check that /dev/loop-control exists (modprobe loop)',
    },
  );
  if (stdout.trim() === '') return []; // older losetup prints nothing when no device is attached
  const parsed = JSON.parse(stdout) as LosetupJson;
  return (parsed.loopdevices ?? []).map((d) => ({
    name: d.name,
    backFile: (d['back-file'] ?? '').replace(/ \(deleted\)$/, ''),
    autoClear: flag(d.autoclear),
    readOnly: flag(d.ro),
  }));
}

/**
 * The loop device the image is attached to, or undefined. Matches by the file's device and
 * inode (`losetup -j`), so another path to the same file finds it too; a deleted image is
 * found by its former path. With several devices on one image, the first one listed.
 */
export async function findLoopForImage(imagePath: string): Promise<string | undefined> {
  const path = resolve(imagePath);
  const exists = await stat(path).then(
    () => true,
    () => false,
  );
  if (!exists) return (await listLoops()).find((d) => d.backFile === path)?.name;
  const stdout = await runOk('losetup', ['--associated', path], { kind: 'transient' });
  const first = stdout.split('\n').find((line) => line.startsWith('/dev/'));
  return first?.slice(0, first.indexOf(':'));
}

/**
 * Attaches the image to a free loop device, or returns the device it is already attached to
 * (idempotent: the call to repeat after a crash). The engine never runs two operations on
 * one volume at once, which is what keeps two concurrent calls from attaching twice.
 */
export async function attachLoop(imagePath: string): Promise<{ readonly device: string }> {
  const path = resolve(imagePath);
  const file = await stat(path).catch(() => undefined);
  if (file === undefined || !file.isFile()) {
    throw new HostError(
      'final',
      `disk image ${path} is missing or not a regular file; create it first (ensureImage)`,
    );
  }
  const existing = await findLoopForImage(path);
  if (existing !== undefined) return { device: existing };
  const stdout = await runOk('losetup', ['--find', '--show', '--', path], {
    kind: 'uncertain',
    fix: 'vole will look for the image among the loop devices before retrying',
  });
  const device = stdout.trim();
  if (!loopDevicePattern.test(device)) {
    throw new HostError(
      'uncertain',
      `losetup --find --show ${path} printed "${device}" instead of /dev/loopN; ` +
        `check losetup -j ${path}`,
    );
  }
  return { device };
}

/**
 * Detaches a loop device; a no-op (`alreadyDetached`) when it is not attached. Refuses a
 * device still mounted in this mount namespace (`transient`: unmount it first). When the
 * kernel only marks a busy device for automatic detach (it is open elsewhere, e.g. mounted
 * in another namespace) and it stays busy for loopDetachWaitMs, that is reported as a
 * `transient` error rather than success.
 */
export async function detachLoop(
  device: string,
): Promise<{ readonly kind: 'detached' | 'alreadyDetached' }> {
  requireLoopDevice(device);
  const before = (await listLoops()).find((d) => d.name === device);
  if (before === undefined) return { kind: 'alreadyDetached' };
  const mounted = await mountsOfDevice(device);
  if (mounted.length > 0) {
    throw new HostError(
      'transient',
      `${device} (${before.backFile}) is still mounted at ${mounted.join(', ')}; ` +
        'unmount it before detaching',
    );
  }
  const args = ['--detach', device];
  const result = await run('losetup', args);
  if (result.code !== 0) {
    // Detached by someone else between our look and our losetup: what we wanted.
    if (/No such device/.test(result.stderr)) return { kind: 'alreadyDetached' };
    throw failed('losetup', args, result, {
      kind: 'uncertain',
      fix: `check losetup --list ${device}`,
    });
  }
  if (!(await detachedWithin(device, before.backFile, loopDetachWaitMs))) {
    throw new HostError(
      'transient',
      `${device} (${before.backFile}) is still open elsewhere (mounted in another mount ` +
        'namespace, or held by a process); the kernel will detach it when it is released — ' +
        'find the user with lsof or findmnt',
    );
  }
  return { kind: 'detached' };
}

/** Detaches every loop device over the image; a no-op when there is none. */
export async function detachLoopForImage(imagePath: string): Promise<void> {
  const path = resolve(imagePath);
  const devices = (await listLoops()).filter((d) => d.backFile === path).map((d) => d.name);
  const viaInode = await findLoopForImage(path);
  if (viaInode !== undefined && !devices.includes(viaInode)) devices.push(viaInode);
  for (const device of devices) await detachLoop(device);
}

/** Tells the kernel that the backing file changed size (after ensureImage grew it): losetup -c. */
export async function resizeLoop(device: string): Promise<void> {
  requireLoopDevice(device);
  await runOk('losetup', ['--set-capacity', device], {
    kind: 'transient',
    fix: `check that ${device} is still attached (losetup --list)`,
  });
}

/** Whether `device` stops being attached to `backFile` within `waitMs` (polling losetup). */
async function detachedWithin(device: string, backFile: string, waitMs: number): Promise<boolean> {
  for (let waitedMs = 0; ; waitedMs += loopDetachPollMs) {
    const loops = await listLoops();
    if (!loops.some((d) => d.name === device && d.backFile === backFile)) return true;
    if (waitedMs >= waitMs) return false;
    await sleep(loopDetachPollMs);
  }
}

/** Mount points in this namespace whose filesystem lives on `device`. */
async function mountsOfDevice(device: string): Promise<string[]> {
  const number = await blockDeviceNumber(device);
  const table = await readMountTable();
  return table
    .filter((e) => e.source === device || e.majorMinor === number)
    .map((e) => e.mountPoint);
}
