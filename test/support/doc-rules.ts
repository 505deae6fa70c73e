/**
 * Rules on what the repository's text says, shared by the docs test: a clone must be
 * self-sufficient (no reference to a file it does not hold), and a version number stated
 * in prose must be the one the code writes.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, normalize } from 'node:path';

/** Where the checks read: every text file under these, and these files. */
export const checkedRoots = [
  'src',
  'test',
  'scripts',
  'machines',
  'examples',
  'docs',
  'README.md',
] as const;

/** Every text file under the checked roots, by path from the repository's root. */
export function checkedFiles(root: string): string[] {
  const text = /\.(ts|js|mjs|cjs|json|md|sh|yaml|yml|txt)$/;
  return checkedRoots.flatMap((name) =>
    name.includes('.')
      ? [name]
      : readdirSync(join(root, name), { recursive: true, encoding: 'utf8' })
          .filter((f) => text.test(f) && !f.includes('node_modules'))
          .map((f) => `${name}/${f}`)
          .sort(),
  );
}

/**
 * Names of documents that live beside the repository, not in it. A reference to one of them
 * (or to a section of a spec by number) sends a reader of a clone to a file they do not have.
 */
const outsideNames = [
  'DESIGN.md',
  'STYLE.md',
  'CSI.md',
  'SCENARIOS.md',
  'PERF.md',
  'METRICS.md',
  'CLUSTER.md',
  'KUBERNETES.md',
  'USERS-AND-PEERS.md',
];
const outsidePatterns: readonly RegExp[] = [
  new RegExp(`(?<![\\w/.-]|docs/)(?:${outsideNames.map((n) => n.replace('.', '\\.')).join('|')})`),
  /\.\.\/shared\b/,
  /\bshared\/spec\b/,
  /\bspec\/(?:kubelet-volume-manager|attach-detach-controller)\.md/,
  /\bspec §/,
  /\bspec [SL]\d/,
  // A section number cites a document by its numbering; the repository's own rows are named
  // (behaviour K3.3, docs/style.md rule 7). A web page's section (with its address) is fine.
  /^(?!.*https?:\/\/).*?(§\s?\d)/,
];

/**
 * The references in `text` (the file at `path` from the repository's root) to something
 * outside the repository, each as "path:line: what". A markdown link counts when its target,
 * resolved from the page's folder, leaves the repository.
 */
export function outsideReferences(path: string, text: string): string[] {
  const found: string[] = [];
  const dir = path.includes('/') ? path.slice(0, path.lastIndexOf('/')) : '.';
  text.split('\n').forEach((line, i) => {
    for (const pattern of outsidePatterns) {
      const hit = pattern.exec(line);
      if (hit) found.push(`${path}:${i + 1}: ${hit[1] ?? hit[0]}`);
    }
    if (!path.endsWith('.md')) return;
    for (const [, target] of line.matchAll(/\]\(([^)#:\s]+)[^)]*\)/g)) {
      if (normalize(join(dir, target!)).startsWith('..'))
        found.push(`${path}:${i + 1}: link ${target}`);
    }
  });
  return found;
}

/** This module names the patterns it forbids, so it is the one file not checked. */
const checker = 'test/support/doc-rules.ts';

/** The outside references of every checked file. */
export function outsideReferencesOf(root: string): string[] {
  return checkedFiles(root)
    .filter((path) => path !== checker)
    .flatMap((path) => outsideReferences(path, readFileSync(join(root, path), 'utf8')));
}

/** The rows of docs/behaviour.md (`K3.3`, `C5.4`): the first cell of each table row. */
export function behaviourRows(page: string): Set<string> {
  return new Set([...page.matchAll(/^\| ([KC]\d+(?:\.\d+)?) \|/gm)].map((m) => m[1]!));
}

/** Each "behaviour K3.3" cited in `text` whose row is not in `rows`, as "path:line: row". */
export function missingBehaviourRows(
  path: string,
  text: string,
  rows: ReadonlySet<string>,
): string[] {
  return text
    .split('\n')
    .flatMap((line, i) =>
      [...line.matchAll(/\bbehaviour ([KC]\d+(?:\.\d+)?)/g)]
        .filter((m) => !rows.has(m[1]!))
        .map((m) => `${path}:${i + 1}: ${m[1]}`),
    );
}

/**
 * A stated version, in the one form the docs and comments use for each: "kubelet snapshot
 * format N", "controller snapshot format N", "log schema version N".
 */
export interface StatedVersion {
  readonly what: 'kubelet snapshot format' | 'controller snapshot format' | 'log schema version';
  readonly value: number;
  readonly where: string;
}

export function statedVersions(path: string, text: string): StatedVersion[] {
  const form = /\b(kubelet snapshot format|controller snapshot format|log schema version) (\d+)/g;
  return text.split('\n').flatMap((line, i) =>
    [...line.matchAll(form)].map((m) => ({
      what: m[1] as StatedVersion['what'],
      value: Number(m[2]),
      where: `${path}:${i + 1}`,
    })),
  );
}

/** The statements among `stated` that differ from the code's value, as "where: what N (code: M)". */
export function staleVersions(
  stated: readonly StatedVersion[],
  code: Readonly<Record<StatedVersion['what'], number>>,
): string[] {
  return stated
    .filter((s) => s.value !== code[s.what])
    .map((s) => `${s.where}: ${s.what} ${s.value} (the code writes ${code[s.what]})`);
}
