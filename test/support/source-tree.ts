/**
 * What the tidy ratchet measures in the source tree: every function's length, read from
 * the TypeScript compiler's own syntax tree (so strings, regexes and templates that look
 * like comments are never mistaken for them), and the graph of relative imports.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { API } from 'typescript/unstable/sync';
import {
  type ClassDeclaration,
  type ClassExpression,
  getLeadingCommentRanges,
  ModifierFlags,
  type Node,
  type SourceFile,
  SyntaxKind,
} from 'typescript/unstable/ast';
import {
  isAsExpression,
  isClassDeclaration,
  isClassExpression,
  isGetAccessorDeclaration,
  isMethodDeclaration,
  isSetAccessorDeclaration,
  isTypeAssertion,
} from 'typescript/unstable/ast/is';

/** Every `.ts` file under `dir` (relative to `root`), as paths relative to `root`. */
export function tsFiles(root: string, dir: string): string[] {
  return readdirSync(join(root, dir)).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(join(root, path)).isDirectory()) return tsFiles(root, path);
    return path.endsWith('.ts') ? [path] : [];
  });
}

export interface FunctionLength {
  /** `path:line name`, the path relative to the project root, the line 1-based. */
  readonly where: string;
  readonly name: string;
  /** Lines holding code: blank lines and lines of nothing but comments do not count. */
  readonly lines: number;
}

const functionKinds = new Set<SyntaxKind>([
  SyntaxKind.FunctionDeclaration,
  SyntaxKind.FunctionExpression,
  SyntaxKind.ArrowFunction,
  SyntaxKind.MethodDeclaration,
  SyntaxKind.Constructor,
  SyntaxKind.GetAccessor,
  SyntaxKind.SetAccessor,
]);

/**
 * The length of every function (declarations, expressions, arrows, methods, constructors,
 * accessors) in the files of the TypeScript project at `projectDir` whose path relative to
 * it passes `include`. A function's lines include those of the functions nested in it.
 */
export function functionLengths(
  projectDir: string,
  include: (path: string) => boolean,
): FunctionLength[] {
  return eachSourceFile(projectDir, include, measureFile);
}

/**
 * `measure` over each file of the TypeScript project at `projectDir` whose path relative
 * to it passes `include`, read by the compiler (one program for all of them).
 */
function eachSourceFile<T>(
  projectDir: string,
  include: (path: string) => boolean,
  measure: (file: SourceFile, path: string) => T[],
): T[] {
  const api = new API({ cwd: projectDir });
  try {
    const snapshot = api.updateSnapshot({ openProject: join(projectDir, 'tsconfig.json') });
    const program = snapshot.getProjects()[0]?.program;
    if (program === undefined) throw new Error(`no TypeScript project at ${projectDir}`);
    return program.getSourceFileNames().flatMap((fileName) => {
      const path = relative(projectDir, fileName);
      if (path.startsWith('..') || !include(path)) return [];
      const file = program.getSourceFile(fileName);
      return file === undefined ? [] : measure(file, path);
    });
  } finally {
    api.close();
  }
}

function measureFile(file: SourceFile, path: string): FunctionLength[] {
  const text = file.text;
  const inComment = new Uint8Array(text.length);
  const markComments = (pos: number): void => {
    for (const range of getLeadingCommentRanges(text, pos) ?? [])
      inComment.fill(1, range.pos, range.end);
  };
  const functions: Node[] = [];
  const visit = (node: Node): void => {
    // Comments sit in the trivia before a node or after one (before a closing brace).
    markComments(node.pos);
    markComments(node.end);
    if (functionKinds.has(node.kind)) functions.push(node);
    node.forEachChild(visit);
  };
  visit(file);
  const lineStarts = file.getLineStarts();
  return functions.map((fn) => {
    const start = fn.getStart(file);
    const first = lineOf(lineStarts, start);
    const last = lineOf(lineStarts, fn.end - 1);
    let lines = 0;
    for (let line = first; line <= last; line++) {
      const from = Math.max(lineStarts[line]!, start);
      const to = Math.min(lineStarts[line + 1] ?? text.length, fn.end);
      for (let i = from; i < to; i++) {
        if (inComment[i] === 0 && !/\s/.test(text[i]!)) {
          lines++;
          break;
        }
      }
    }
    const name = nameOf(fn);
    return { where: `${path}:${first + 1} ${name}`, name, lines };
  });
}

function lineOf(lineStarts: readonly number[], pos: number): number {
  let lo = 0;
  let hi = lineStarts.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (lineStarts[mid]! <= pos) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/** The function's own name, else the name it is bound to (a variable, a property). */
function nameOf(fn: Node): string {
  for (const node of [fn, fn.parent]) {
    const name = (node as { name?: Node }).name;
    if (name?.kind === SyntaxKind.Identifier) return (name as unknown as { text: string }).text;
    if (name !== undefined) return name.getText();
  }
  return '(anonymous)';
}

export interface ClassSurface {
  /** `path:line Name`, the path relative to the project root, the line 1-based. */
  readonly where: string;
  /** The names of its public methods and accessors (a getter and its setter are one). */
  readonly publicMembers: readonly string[];
}

/** Every class (declarations and expressions) and its public methods and accessors. */
export function classSurfaces(
  projectDir: string,
  include: (path: string) => boolean,
): ClassSurface[] {
  return eachSourceFile(projectDir, include, (file, path) => {
    const classes: ClassSurface[] = [];
    const visit = (node: Node): void => {
      if (isClassDeclaration(node) || isClassExpression(node)) {
        const line = lineOf(file.getLineStarts(), node.getStart(file)) + 1;
        const name = node.name?.text ?? '(anonymous class)';
        classes.push({ where: `${path}:${line} ${name}`, publicMembers: publicMembers(node) });
      }
      node.forEachChild(visit);
    };
    visit(file);
    return classes;
  });
}

function publicMembers(cls: ClassDeclaration | ClassExpression): string[] {
  const hidden = ModifierFlags.Private | ModifierFlags.Protected;
  const names = new Set<string>();
  for (const member of cls.members) {
    const isMember =
      isMethodDeclaration(member) ||
      isGetAccessorDeclaration(member) ||
      isSetAccessorDeclaration(member);
    if (!isMember || (member.modifierFlags & hidden) !== 0) continue;
    if (member.name.kind === SyntaxKind.PrivateIdentifier) continue;
    names.add(member.name.getText());
  }
  return [...names];
}

/** Where a value is cast to `never` (`x as never`, `<never>x`): a lie the compiler believes. */
export function neverCasts(projectDir: string, include: (path: string) => boolean): string[] {
  return eachSourceFile(projectDir, include, (file, path) => {
    const found: string[] = [];
    const visit = (node: Node): void => {
      const isCast = isAsExpression(node) || isTypeAssertion(node);
      if (isCast && node.type.kind === SyntaxKind.NeverKeyword) {
        const line = lineOf(file.getLineStarts(), node.getStart(file)) + 1;
        found.push(`${path}:${line} ${node.getText(file)}`);
      }
      node.forEachChild(visit);
    };
    visit(file);
    return found;
  });
}

/**
 * The relative imports of each file (type-only ones too: a cycle of types still ties the
 * modules together), as paths relative to `root` with `.ts` endings.
 */
export function importGraph(root: string, files: readonly string[]): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  const pattern = /^\s*(?:import|export)\s[^;]*?\sfrom\s+'(\.[^']+)'|import\('(\.[^']+)'\)/gm;
  for (const file of files) {
    const code = readFileSync(join(root, file), 'utf8');
    const targets = [...code.matchAll(pattern)].map((match) =>
      relative(root, join(root, dirname(file), (match[1] ?? match[2])!)).replace(/\.js$/, '.ts'),
    );
    graph.set(file, [...new Set(targets)]);
  }
  return graph;
}

/** The folder a file is in: `src/<dir>`, `machines`, or a file directly under src/ itself. */
export function folderOf(path: string): string {
  const parts = path.split('/');
  if (parts[0] === 'src' && parts.length > 2) return `src/${parts[1]}`;
  if (parts.length > 1 && parts[0] !== 'src') return parts[0]!;
  return path;
}

/**
 * The import graph between folders (folderOf): a folder imports another when one of its
 * files imports one of the other's. Every folder of `graph` is a key, with or without edges.
 */
export function folderGraph(graph: ReadonlyMap<string, readonly string[]>): Map<string, string[]> {
  const folders = new Map<string, Set<string>>();
  for (const [file, targets] of graph) {
    const from = folderOf(file);
    const edges = folders.get(from) ?? new Set<string>();
    folders.set(from, edges);
    for (const target of targets) if (folderOf(target) !== from) edges.add(folderOf(target));
  }
  return new Map([...folders].map(([folder, edges]) => [folder, [...edges].sort()]));
}

/** Every cycle of the graph, as one strongly connected component each (Tarjan). */
export function importCycles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  const connect = (v: string): void => {
    index.set(v, counter);
    low.set(v, counter++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!index.has(w)) {
        connect(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1 || graph.get(v)!.includes(v)) cycles.push(component.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) connect(v);
  return cycles;
}

/** The package names a file imports (bare specifiers, `node:` builtins left out). */
export function packageImports(code: string): string[] {
  const names: string[] = [];
  const pattern = /(?:\sfrom\s+|import\s*\(\s*|^\s*import\s+)'([^'.][^']*)'/gm;
  for (const match of code.matchAll(pattern)) {
    const spec = match[1]!;
    if (spec.startsWith('node:')) continue;
    const parts = spec.split('/');
    names.push(spec.startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]!);
  }
  return names;
}
