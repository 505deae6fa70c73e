/** The mount table, parsed from /proc/self/mountinfo (proc(5)). */
import { readFile } from 'node:fs/promises';

export interface MountEntry {
  readonly mountId: number;
  readonly parentId: number;
  /** `major:minor` of the device. */
  readonly majorMinor: string;
  /** The root of the mount within its filesystem (a bind mount of a subdirectory shows it). */
  readonly root: string;
  readonly mountPoint: string;
  readonly mountOptions: string;
  readonly fsType: string;
  readonly source: string;
  readonly superOptions: string;
}

/** mountinfo escapes space, tab, newline and backslash as octal (`\040`). */
export function unescapeOctal(text: string): string {
  return text.replace(/\\([0-7]{3})/g, (_m, oct: string) => String.fromCharCode(Number.parseInt(oct, 8)));
}

export function escapeOctal(text: string): string {
  return text.replace(/[ \t\n\\]/g, (c) => `\\${c.charCodeAt(0).toString(8).padStart(3, '0')}`);
}

/** Parses mountinfo text; malformed lines are skipped. */
export function parseMountInfo(text: string): MountEntry[] {
  const entries: MountEntry[] = [];
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    const fields = line.split(' ');
    const dash = fields.indexOf('-');
    if (dash < 6 || fields.length < dash + 3) continue;
    entries.push({
      mountId: Number(fields[0]),
      parentId: Number(fields[1]),
      majorMinor: fields[2]!,
      root: unescapeOctal(fields[3]!),
      mountPoint: unescapeOctal(fields[4]!),
      mountOptions: fields[5]!,
      fsType: fields[dash + 1]!,
      source: unescapeOctal(fields[dash + 2]!),
      superOptions: fields[dash + 3] ?? '',
    });
  }
  return entries;
}

export async function readMountTable(): Promise<MountEntry[]> {
  return parseMountInfo(await readFile('/proc/self/mountinfo', 'utf8'));
}

/** The topmost mount at exactly this path, if any. */
export function mountAt(table: readonly MountEntry[], path: string): MountEntry | undefined {
  let found: MountEntry | undefined;
  for (const e of table) if (e.mountPoint === path) found = e;
  return found;
}

/** Mount points at or below `dir`. */
export function mountsUnder(table: readonly MountEntry[], dir: string): MountEntry[] {
  const prefix = dir.endsWith('/') ? dir : `${dir}/`;
  return table.filter((e) => e.mountPoint === dir || e.mountPoint.startsWith(prefix));
}

/**
 * Other mounts of the same device and root as the mount at `path` (the pods' bind mounts
 * of a global mount: DeviceMountableVolumePlugin.GetDeviceMountRefs).
 */
export function mountRefs(table: readonly MountEntry[], path: string): string[] {
  const at = mountAt(table, path);
  if (at === undefined) return [];
  return table
    .filter((e) => e.mountPoint !== path && e.majorMinor === at.majorMinor && e.root === at.root)
    .map((e) => e.mountPoint);
}
