/**
 * The mount table, parsed from /proc/self/mountinfo (proc(5)), and the questions the
 * plugins ask of it. The parsing and the questions are pure functions of the table; the
 * async forms read the table of this process's mount namespace first.
 */
import { readFile, realpath, stat } from 'node:fs/promises';
import { join, relative, resolve } from 'node:path';
import { assert } from '../assert.js';

export interface MountEntry {
  readonly mountId: number;
  readonly parentId: number;
  /** `major:minor` of the filesystem's device (st_dev); bind mounts share it. */
  readonly majorMinor: string;
  /** The directory of the filesystem this mount shows (a bind of a subdirectory shows it). */
  readonly root: string;
  readonly mountPoint: string;
  /** Per-mount options (`rw`, `relatime`, …). */
  readonly mountOptions: readonly string[];
  /** Propagation tags such as `shared:1` or `master:2`; often none. */
  readonly optionalFields: readonly string[];
  readonly fsType: string;
  /** The mount source: a device path, `tmpfs`, `none`… */
  readonly source: string;
  /** Per-superblock options. */
  readonly superOptions: readonly string[];
}

export class MountInfoParseError extends Error {
  override name = 'MountInfoParseError';
  constructor(
    readonly lineNumber: number,
    readonly line: string,
    rule: string,
  ) {
    super(
      `mountinfo line ${lineNumber} ${rule}: ${JSON.stringify(line)}; ` +
        "vole does not understand this kernel's mountinfo format, please report it",
    );
  }
}

/** The kernel escapes space, tab, newline and backslash in mountinfo as octal (`\040`). */
export function unescapeOctal(text: string): string {
  return text.replace(/\\([0-7]{3})/g, (_m, oct: string) =>
    String.fromCharCode(Number.parseInt(oct, 8)),
  );
}

/** The kernel's escaping (seq_escape with " \t\n\\"); the inverse of unescapeOctal. */
export function escapeOctal(text: string): string {
  return text.replace(/[ \t\n\\]/g, (c) => `\\${c.charCodeAt(0).toString(8).padStart(3, '0')}`);
}

const splitOptions = (field: string): string[] =>
  field === '' ? [] : field.split(',').map(unescapeOctal);

/** Parses one non-empty line; throws MountInfoParseError when it does not have the format. */
function parseLine(line: string, lineNumber: number): MountEntry {
  const fields = line.split(' ');
  const dash = fields.indexOf('-', 6);
  if (dash < 0 || fields.length !== dash + 4) {
    throw new MountInfoParseError(
      lineNumber,
      line,
      'lacks the "-" separator or the three fields after it',
    );
  }
  const [id, parent, majorMinor, root, mountPoint, options] = fields as [
    string,
    string,
    string,
    string,
    string,
    string,
  ];
  if (!/^\d+$/.test(id) || !/^\d+$/.test(parent))
    throw new MountInfoParseError(lineNumber, line, 'has non-numeric ids');
  if (!/^\d+:\d+$/.test(majorMinor))
    throw new MountInfoParseError(lineNumber, line, 'has no major:minor');
  return {
    mountId: Number(id),
    parentId: Number(parent),
    majorMinor,
    root: unescapeOctal(root),
    mountPoint: unescapeOctal(mountPoint),
    mountOptions: splitOptions(options),
    optionalFields: fields.slice(6, dash),
    fsType: unescapeOctal(fields[dash + 1]!),
    source: unescapeOctal(fields[dash + 2]!),
    superOptions: splitOptions(fields[dash + 3]!),
  };
}

/**
 * Parses mountinfo text into entries in the kernel's order (a mount appears after the
 * mount it sits on). Empty lines are ignored; a malformed line throws MountInfoParseError,
 * because guessing at the mount table is how data gets deleted.
 */
export function parseMountInfo(text: string): MountEntry[] {
  const entries: MountEntry[] = [];
  text.split('\n').forEach((line, index) => {
    if (line !== '') entries.push(parseLine(line, index + 1));
  });
  return entries;
}

/** One mountinfo line for an entry: the inverse of parseMountInfo (fakes and tests use it). */
export function formatMountInfoLine(e: MountEntry): string {
  const options = (list: readonly string[]) => list.map(escapeOctal).join(',');
  return [
    e.mountId,
    e.parentId,
    e.majorMinor,
    escapeOctal(e.root),
    escapeOctal(e.mountPoint),
    options(e.mountOptions),
    ...e.optionalFields,
    '-',
    escapeOctal(e.fsType),
    escapeOctal(e.source),
    options(e.superOptions),
  ].join(' ');
}

/** The mount table of this process's mount namespace. */
export async function readMountTable(): Promise<MountEntry[]> {
  return parseMountInfo(await readFile('/proc/self/mountinfo', 'utf8'));
}

/** The topmost mount at exactly `path` (normalised, not resolved), if any (pure). */
export function findMountAt(table: readonly MountEntry[], path: string): MountEntry | undefined {
  const wanted = resolve(path);
  let topmost: MountEntry | undefined;
  for (const e of table) if (e.mountPoint === wanted) topmost = e;
  return topmost;
}

/**
 * Mount points at or below `dir`, in table order (parents before children): unmount them
 * in reverse (pure).
 */
export function findMountsUnder(table: readonly MountEntry[], dir: string): MountEntry[] {
  const top = resolve(dir);
  const prefix = top === '/' ? '/' : `${top}/`;
  return table.filter((e) => e.mountPoint === top || e.mountPoint.startsWith(prefix));
}

/**
 * The other mount points that show the same directory of the same filesystem as the mount
 * at `path` — the pods' bind mounts of a global device mount (the kubelet's
 * GetDeviceMountRefs). Empty when nothing is mounted at `path` (pure).
 */
export function findMountRefs(table: readonly MountEntry[], path: string): string[] {
  const at = findMountAt(table, path);
  if (at === undefined) return [];
  return table
    .filter(
      (e) => e.mountPoint !== at.mountPoint && e.majorMinor === at.majorMinor && e.root === at.root,
    )
    .map((e) => e.mountPoint);
}

/**
 * What a bind mount of `path` would show: the device and the directory within that device's
 * filesystem, found through the deepest mount containing `path` (pure; `path` resolved).
 */
export function bindSourceOf(
  table: readonly MountEntry[],
  path: string,
): { readonly majorMinor: string; readonly root: string } | undefined {
  const wanted = resolve(path);
  const containing = table
    .filter(
      (e) =>
        e.mountPoint === wanted || e.mountPoint === '/' || wanted.startsWith(`${e.mountPoint}/`),
    )
    .reduce<MountEntry | undefined>(
      (best, e) => (best === undefined || e.mountPoint.length >= best.mountPoint.length ? e : best),
      undefined,
    );
  if (containing === undefined) return undefined;
  return {
    majorMinor: containing.majorMinor,
    root: join(containing.root, relative(containing.mountPoint, wanted)),
  };
}

/** `path` with symlinks resolved when it exists, else only normalised. */
export async function resolvedPath(path: string): Promise<string> {
  return realpath(path).catch(() => resolve(path));
}

/** Whether something is mounted exactly at `path` (symlinks resolved); false when it is missing. */
export async function isMountPoint(path: string): Promise<boolean> {
  return findMountAt(await readMountTable(), await resolvedPath(path)) !== undefined;
}

/** Reads the table and returns findMountRefs for `path`; the table form is pure. */
export function mountRefs(path: string): Promise<string[]>;
export function mountRefs(table: readonly MountEntry[], path: string): string[];
export function mountRefs(
  a: string | readonly MountEntry[],
  b?: string,
): Promise<string[]> | string[] {
  if (typeof a !== 'string') {
    assert(b !== undefined, 'mountRefs(table, path) needs a path');
    return findMountRefs(a, b);
  }
  return (async () => findMountRefs(await readMountTable(), await resolvedPath(a)))();
}

/** Reads the table and returns findMountsUnder for `dir`; the table form is pure. */
export function mountsUnder(dir: string): Promise<MountEntry[]>;
export function mountsUnder(table: readonly MountEntry[], dir: string): MountEntry[];
export function mountsUnder(
  a: string | readonly MountEntry[],
  b?: string,
): Promise<MountEntry[]> | MountEntry[] {
  if (typeof a !== 'string') {
    assert(b !== undefined, 'mountsUnder(table, dir) needs a dir');
    return findMountsUnder(a, b);
  }
  return (async () => findMountsUnder(await readMountTable(), await resolvedPath(a)))();
}

/** `major:minor` of a block device node (as mountinfo shows it); undefined for anything else. */
export async function blockDeviceNumber(path: string): Promise<string | undefined> {
  const s = await stat(path, { bigint: true }).catch(() => undefined);
  if (s === undefined || !s.isBlockDevice()) return undefined;
  // Linux's dev_t encoding (glibc gnu_dev_major / gnu_dev_minor).
  const major = ((s.rdev >> 8n) & 0xfffn) | ((s.rdev >> 32n) & ~0xfffn);
  const minor = (s.rdev & 0xffn) | ((s.rdev >> 12n) & ~0xffn);
  return `${major}:${minor}`;
}
