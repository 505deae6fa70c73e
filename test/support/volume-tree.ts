/**
 * What a node wrote for one pod's volume, as a comparable list of entries: every path under
 * the volume's directory with its type, mode, owner, group, size and content (files) or
 * target (symlinks). The timestamped directory of an atomic writer (`..2026_12_07_18_00_00.
 * 123456789`) is named `..<timestamp>` so two nodes' trees compare.
 */
import { lstatSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';

export interface TreeEntry {
  readonly path: string;
  readonly type: 'dir' | 'file' | 'symlink';
  readonly mode: string;
  readonly uid: number;
  readonly gid: number;
  readonly content?: string;
  readonly target?: string;
}

const stamp = /\.\.\d{4}_\d{2}_\d{2}_\d{2}_\d{2}_\d{2}\.\d+/g;
const plain = (name: string) => name.replace(stamp, '..<timestamp>');

/** The entries under `dir` (itself as '.'), sorted by path. */
export function volumeTree(dir: string): TreeEntry[] {
  const out: TreeEntry[] = [];
  const walk = (abs: string, rel: string) => {
    const st = lstatSync(abs);
    const mode = (st.mode & 0o7777).toString(8).padStart(4, '0');
    const base = { path: plain(rel), mode, uid: st.uid, gid: st.gid };
    if (st.isSymbolicLink()) {
      out.push({ ...base, type: 'symlink', target: plain(readlinkSync(abs)) });
    } else if (st.isDirectory()) {
      out.push({ ...base, type: 'dir' });
      for (const name of readdirSync(abs).sort()) walk(join(abs, name), join(rel, name));
    } else {
      out.push({ ...base, type: 'file', content: readFileSync(abs, 'utf8') });
    }
  };
  walk(dir, '.');
  return out.sort((a, b) => a.path.localeCompare(b.path));
}

/**
 * A pod's own directories: the pod's, its `volumes/` and `plugins/`, and the plugin
 * directories under `volumes/`, without what is below them (the volumes, compared one by
 * one, and the plugins' own markers) or beside them (a runtime's `containers/`, `etc-hosts`).
 */
export function podSkeleton(podDir: string): TreeEntry[] {
  const dirs = ['.', 'plugins', 'volumes'];
  for (const plugin of readdirSync(join(podDir, 'volumes')).sort())
    dirs.push(join('volumes', plugin));
  return dirs.map((rel) => {
    const st = lstatSync(join(podDir, rel));
    const mode = (st.mode & 0o7777).toString(8).padStart(4, '0');
    return { path: rel, type: 'dir' as const, mode, uid: st.uid, gid: st.gid };
  });
}

/** One line per entry, for a diff a reader can follow. */
export function treeLines(entries: readonly TreeEntry[]): string[] {
  return entries.map((e) => {
    const what =
      e.type === 'symlink' ? `-> ${e.target}` : e.type === 'file' ? JSON.stringify(e.content) : '';
    return `${e.type} ${e.path} ${e.mode} ${e.uid}:${e.gid} ${what}`.trimEnd();
  });
}

/** The lines only one side has: [only in a, only in b]. */
export function treeDiff(a: readonly string[], b: readonly string[]): [string[], string[]] {
  const inB = new Set(b);
  const inA = new Set(a);
  return [a.filter((l) => !inB.has(l)), b.filter((l) => !inA.has(l))];
}
