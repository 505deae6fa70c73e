/**
 * The kubelet's AtomicWriter (pkg/volume/util/atomic_writer.go), rebuilt: a volume's files
 * live in a timestamped directory `..<time>` reached through the `..data` symlink, and
 * each top-level name the user sees is a symlink through `..data`. An update writes a new
 * timestamped directory, then swaps `..data` with one rename(2) — atomic — so a reader sees
 * the old set of files or the new one, never half of each. The old directory and the
 * names no longer in the payload are removed after the swap.
 */
import { randomBytes } from 'node:crypto';
import {
  chmod,
  lstat,
  mkdir,
  lchown,
  readdir,
  readFile,
  readlink,
  rename,
  rm,
  stat,
  symlink,
  unlink,
  writeFile,
} from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { HostError } from './errors.js';
import { setVolumeOwnership } from './ownership.js';

/** One file of the payload: its bytes and mode (defaultMode or the item's mode). */
export interface PayloadFile {
  readonly data: Buffer;
  readonly mode: number;
  /** The file's owner (the pod's one runAsUser, for a token), else the writer's. */
  readonly fsUser?: number;
}

/** Relative path (`key`, `dir/key`) → file. */
export type Payload = ReadonlyMap<string, PayloadFile>;

const dataDirName = '..data';
const newDataDirName = '..data_tmp';
/** Files one payload may hold at most (a limit on everything). */
const payloadFilesMax = 10_000;

/** validatePath: relative, no `..` segment, no leading `..`, not empty, ≤ 4096 bytes. */
function payloadPathProblem(path: string): string | undefined {
  if (path === '') return 'is empty';
  if (Buffer.byteLength(path) > 4096) return 'is longer than 4096 bytes';
  if (path.startsWith('/')) return 'is absolute';
  if (path.startsWith('..')) return "starts with '..'";
  if (path.split('/').some((s) => s === '..' || s === '' || s === '.'))
    return "has an empty, '.' or '..' segment";
  return undefined;
}

/**
 * `..2006_01_02_15_04_05.NNN` in UTC, as the kubelet's os.MkdirTemp names it: the second,
 * then a random decimal number.
 */
function timestampedName(nowMs: number): string {
  const stamp = new Date(nowMs).toISOString().slice(0, 19).replace(/[-:T]/g, '_');
  return `..${stamp}.${randomBytes(4).readUInt32BE(0)}`;
}

/** Does the directory hold exactly this payload already (same files, bytes and modes)? */
async function sameContent(dir: string, payload: Payload, fsGroup: number | null) {
  for (const [path, file] of payload) {
    const full = join(dir, path);
    const st = await stat(full).catch(() => undefined);
    const mode = fsGroup === null ? file.mode : file.mode | 0o440;
    if (st === undefined || !st.isFile() || (st.mode & 0o777) !== mode) return false;
    if (fsGroup !== null && st.gid !== fsGroup) return false;
    if (file.fsUser !== undefined && st.uid !== file.fsUser) return false;
    if (!(await readFile(full)).equals(file.data)) return false;
  }
  return (await listFiles(dir)).length === payload.size;
}

async function listFiles(dir: string, prefix = ''): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(join(dir, prefix), { withFileTypes: true })) {
    const rel = prefix === '' ? entry.name : `${prefix}/${entry.name}`;
    if (entry.isDirectory()) out.push(...(await listFiles(dir, rel)));
    else out.push(rel);
  }
  return out;
}

async function writePayload(dir: string, payload: Payload) {
  for (const [path, file] of payload) {
    const full = join(dir, path);
    await mkdir(dirname(full), { recursive: true, mode: 0o755 });
    await writeFile(full, file.data, { mode: file.mode, flag: 'wx' });
    await chmod(full, file.mode); // the umask must not narrow the mode asked for
    if (file.fsUser !== undefined) await lchown(full, file.fsUser, -1);
  }
}

/** The first segment of each payload path: the names users see in the volume directory. */
function visibleNames(payload: Payload): Set<string> {
  return new Set([...payload.keys()].map((p) => p.split('/')[0]!));
}

/**
 * Writes `payload` into `dir` atomically. Returns false when the volume already held
 * exactly that payload (nothing was written), true after a swap.
 */
export async function writeAtomically(
  dir: string,
  payload: Payload,
  opts: { nowMs: number; fsGroup: number | null },
): Promise<boolean> {
  if (payload.size > payloadFilesMax)
    throw new HostError('final', `${payload.size} files in one volume; at most ${payloadFilesMax}`);
  for (const path of payload.keys()) {
    const problem = payloadPathProblem(path);
    if (problem !== undefined)
      throw new HostError('final', `file path ${JSON.stringify(path)} ${problem}`);
  }
  const oldTarget = await readlink(join(dir, dataDirName)).catch(() => undefined);
  const oldDir = oldTarget === undefined ? undefined : join(dir, oldTarget);
  const oldNames = oldDir === undefined ? new Set<string>() : await currentNames(oldDir);
  if (oldDir !== undefined && (await sameContent(oldDir, payload, opts.fsGroup))) return false;
  const tsName = timestampedName(opts.nowMs);
  const tsDir = join(dir, tsName);
  await mkdir(tsDir, { mode: 0o755 });
  try {
    await writePayload(tsDir, payload);
    await chmod(tsDir, 0o755);
    // The kubelet's setPerms, before the swap: the whole volume, read-only masks; the
    // setgid bit it leaves on the volume's directory gives the links made next the group.
    if (opts.fsGroup !== null) await setVolumeOwnership(dir, opts.fsGroup, { readOnly: true });
    const tmpLink = join(dir, newDataDirName);
    await rm(tmpLink, { force: true });
    await symlink(tsName, tmpLink);
    await rename(tmpLink, join(dir, dataDirName)); // the atomic swap
  } catch (error) {
    await rm(tsDir, { recursive: true, force: true });
    throw error;
  }
  const names = visibleNames(payload);
  for (const name of names) await ensureUserLink(dir, name, ownerOf(payload, name));
  if (oldDir !== undefined && oldTarget !== tsName)
    await rm(oldDir, { recursive: true, force: true });
  for (const name of oldNames)
    if (!names.has(name)) await unlink(join(dir, name)).catch(() => undefined);
  return true;
}

async function currentNames(oldDir: string): Promise<Set<string>> {
  const entries = await readdir(oldDir).catch(() => [] as string[]);
  return new Set(entries);
}

/** `name → ..data/name`, made once; a non-symlink in its place is an error, not replaced. */
/** The user a visible link gets: that of the payload file it leads to (createUserVisibleFiles). */
function ownerOf(payload: Payload, name: string): number | undefined {
  for (const [path, file] of payload)
    if (path.split('/')[0] === name && file.fsUser !== undefined) return file.fsUser;
  return undefined;
}

async function ensureUserLink(dir: string, name: string, fsUser?: number): Promise<void> {
  const path = join(dir, name);
  const st = await lstat(path).catch(() => undefined);
  if (st !== undefined) {
    if (st.isSymbolicLink() && (await readlink(path)) === join(dataDirName, name)) return;
    if (!st.isSymbolicLink())
      throw new HostError(
        'final',
        `${path} exists and is not the volume's symlink; not replacing it`,
      );
    await unlink(path);
  }
  await symlink(join(dataDirName, name), path);
  if (fsUser !== undefined) await lchown(path, fsUser, -1);
}

/**
 * Replaces the file at `path` with `data` whole or not at all: written beside it and renamed
 * over it, so a process killed in the middle leaves the old file or the new one, never a
 * truncated one.
 */
export async function replaceFile(path: string, data: string): Promise<void> {
  await writeFile(`${path}.tmp`, data);
  await rename(`${path}.tmp`, path);
}
