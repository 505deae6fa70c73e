/** Loop devices over image files (losetup), idempotent. */
import { resolve } from 'node:path';
import { HostError, run, runOk } from './exec.js';

export interface LoopDevice {
  readonly name: string;
  readonly backFile: string;
}

export async function listLoops(): Promise<LoopDevice[]> {
  const r = await run('losetup', ['--list', '--json', '--output', 'NAME,BACK-FILE']);
  if (r.code !== 0 || r.stdout.trim() === '') return [];
  const parsed = JSON.parse(r.stdout) as { loopdevices?: { name: string; 'back-file': string | null }[] };
  return (parsed.loopdevices ?? []).map((d) => ({ name: d.name, backFile: (d['back-file'] ?? '').replace(/ \(deleted\)$/, '') }));
}

export async function findLoopForImage(image: string): Promise<string | undefined> {
  const path = resolve(image);
  return (await listLoops()).find((d) => d.backFile === path)?.name;
}

/** Attaches the image to a loop device, or returns the one it is already attached to. */
export async function attachLoop(image: string): Promise<string> {
  const existing = await findLoopForImage(image);
  if (existing !== undefined) return existing;
  const device = (await runOk('losetup', ['--find', '--show', resolve(image)], { kind: 'uncertain' })).trim();
  if (!device.startsWith('/dev/')) throw new HostError('uncertain', `losetup printed "${device}" instead of a device`);
  return device;
}

/** Detaches every loop device over the image; a no-op when there is none. */
export async function detachLoopForImage(image: string): Promise<void> {
  for (let i = 0; i < 8; i++) {
    const device = await findLoopForImage(image);
    if (device === undefined) return;
    await runOk('losetup', ['--detach', device], { kind: 'uncertain' });
  }
}

/** Tells the kernel the backing file changed size (after growing the image). */
export async function resizeLoop(device: string): Promise<void> {
  await runOk('losetup', ['--set-capacity', device], { kind: 'transient' });
}
