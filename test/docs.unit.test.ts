/**
 * Docs that compile (docs/style.md rule 15): README.md and every page of docs/. Every code block in them
 * is checked here: the library examples are the tested examples' regions and run; an output
 * block is what the commands before it print; every `vole` command line, in a block or in the
 * text, names a subcommand and flags the CLI has; the pictures name what the code has.
 */
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import {
  accessSync,
  constants,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { after, test } from 'node:test';
import { promisify } from 'node:util';
import { attachmentMachine, mountMachine } from '../machines/index.js';
import { logBlockedReporter } from '../src/cli/lifecycle.js';
import { ClusterKeys } from '../src/cluster/keys.js';
import { logSchemaVersion, snapshotEveryEvents } from '../src/constants.js';
import { controllerCore, kubeletCore } from '../src/engine/cores.js';
import { inUseMessage } from '../src/log/writer-lock.js';
import type { CliCommand } from './support/cli-commands.js';
import {
  behaviourRows,
  checkedFiles,
  missingBehaviourRows,
  outsideReferences,
  outsideReferencesOf,
  staleVersions,
  statedVersions,
} from './support/doc-rules.js';
import { layers, shownName } from './support/layers.js';

const root = join(import.meta.dirname, '..');
const execFileAsync = promisify(execFile);
const scratch = mkdtempSync(join(tmpdir(), 'vole-docs-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

/** README.md and docs/*.md, by path from the root. */
const pages: ReadonlyMap<string, string> = new Map(
  [
    'README.md',
    ...readdirSync(join(root, 'docs'))
      .filter((f) => f.endsWith('.md'))
      .sort()
      .map((f) => `docs/${f}`),
  ].map((path) => [path, readFileSync(join(root, path), 'utf8')]),
);

interface Block {
  readonly page: string;
  readonly line: number;
  readonly lang: string;
  readonly text: string;
  /** The markdown between the previous block (or the page's start) and this one. */
  readonly before: string;
}

function blocksOf(path: string, text: string): Block[] {
  const blocks: Block[] = [];
  const fence = /^```([a-z]*)\n([\s\S]*?)^```$/gm;
  let end = 0;
  for (const match of text.matchAll(fence)) {
    blocks.push({
      page: path,
      line: text.slice(0, match.index).split('\n').length,
      lang: match[1]!,
      text: match[2]!,
      before: text.slice(end, match.index),
    });
    end = match.index + match[0].length;
  }
  return blocks;
}

const blocks: readonly Block[] = [...pages].flatMap(([path, text]) => blocksOf(path, text));
const where = (b: Block) => `${b.page}:${b.line}`;

function page(path: string): string {
  const text = pages.get(path);
  assert.ok(text !== undefined, `${path} exists`);
  return text;
}

function region(text: string, name: string): string {
  const match = new RegExp(`// #region ${name}\\n([\\s\\S]*?)// #endregion`).exec(text);
  assert.ok(match, `region ${name} in the example`);
  return match[1]!.trim();
}

/** The block between `<!-- #region NAME … -->` and `<!-- #endregion NAME -->`, if it is one. */
function regionName(b: Block): string | undefined {
  const open = /<!-- #region ([\w-]+)[^>]*-->\n$/.exec(b.before);
  if (open === null) return undefined;
  const after = page(b.page)
    .split('\n')
    .slice(b.line + b.text.split('\n').length);
  assert.equal(after[0], `<!-- #endregion ${open[1]} -->`, `${where(b)}: the region closes`);
  return open[1];
}

/** The CLI's subcommands and their flags, read from the commander program. */
const cli: readonly CliCommand[] = JSON.parse(
  execFileSync(process.execPath, ['--import', 'tsx', 'test/support/cli-commands.ts'], {
    cwd: root,
    encoding: 'utf8',
  }),
);

function cliCommand(name: string): CliCommand | undefined {
  return cli.find((c) => c.name === name || c.aliases.includes(name));
}

/** A placeholder in a command: DIR, URLS, POD|VOLUME, …, [optional parts]. */
const isPlaceholder = (word: string) => /^[A-Z][A-Z|_-]*$|^…$/.test(word);

/** The subcommands (`vole a / b / c …` names three) and the flags of a `vole …` command. */
function parseVoleCommand(text: string): { names: string[]; flags: string[] } {
  const words = text
    .replace(/\\\|/g, '|')
    .split(/\s+/)
    .filter((w) => w !== '');
  assert.equal(words[0], 'vole', text);
  const names = [words[1]!];
  for (let i = 2; words[i] === '/' && /^[a-z][a-z-]*$/.test(words[i + 1] ?? ''); i += 2) {
    names.push(words[i + 1]!);
  }
  const flags = [...text.matchAll(/(?<![\w-])(--?[a-zA-Z][\w-]*)/g)].map((m) => m[1]!);
  return { names, flags };
}

/** Checks one `vole …` command of the docs: each subcommand exists and has every flag named. */
function checkVoleCommand(text: string, at: string): void {
  const { names, flags } = parseVoleCommand(text);
  for (const name of names) {
    const command = cliCommand(name);
    assert.ok(command, `${at}: \`${text}\`: vole has no subcommand ${name}`);
    for (const flag of flags) {
      assert.ok(
        command.options.includes(flag),
        `${at}: \`${text}\`: vole ${name} has no flag ${flag} (it has ${command.options})`,
      );
    }
  }
}

/** A shell line: `vole …`, `npm run --silent vole -- …`, `scripts/X.sh ARGS`, `npx tsx F`. */
function checkShellLine(line: string, at: string): void {
  const npmVole = /^npm run --silent vole -- (.*)$/.exec(line);
  if (npmVole) {
    const rest = npmVole[1]!;
    if (!isPlaceholder(rest.split(' ')[0]!)) checkVoleCommand(`vole ${rest}`, at);
    return;
  }
  if (line.startsWith('vole ')) return checkVoleCommand(line, at);
  // kubectl against the API server of scripts/kube-up.sh: a peer this test does not run.
  if (/^kubectl --kubeconfig \S+ \S/.test(line)) return;
  const tsx = /^npx tsx (\S+)$/.exec(line);
  if (tsx) return accessSync(join(root, tsx[1]!));
  const script = /^(scripts\/\S+\.sh)(?: .*)?$/.exec(line);
  if (script) return accessSync(join(root, script[1]!), constants.X_OK);
  assert.fail(`${at}: a command the docs test does not know how to check: ${line}`);
}

/** The commands of a shell block: comments dropped, `\` continuations joined. */
function shellLines(b: Block): string[] {
  return b.text
    .replace(/\\\n\s*/g, ' ')
    .split('\n')
    .map((l) => l.replace(/(^|\s)#.*$/, '').trim())
    .filter((l) => l !== '');
}

/** A plain block right after a shell block is that block's output. */
function outputOf(b: Block): Block | undefined {
  const next = blocks[blocks.indexOf(b) + 1];
  return next?.page === b.page && next.lang === '' && next.before.trim() === '' ? next : undefined;
}

/** Runs a shell block's commands (its SQLite files in scratch); the last one's stdout. */
async function runShell(b: Block): Promise<string> {
  const commands = shellLines(b).map((line) => {
    const words = line.replace(/^npm run --silent vole -- /, 'vole ').split(' ');
    assert.equal(words[0], 'vole', `${where(b)}: runs only vole commands`);
    const own = (w: string) => join(scratch, `${blocks.indexOf(b)}-${basename(w)}`);
    return words.slice(1).map((w) => (w.endsWith('.db') ? own(w) : w));
  });
  for (const db of commands.flat().filter((a) => a.startsWith(scratch))) {
    for (const suffix of ['', '-wal', '-shm', '-lock']) rmSync(db + suffix, { force: true });
  }
  let out = '';
  for (const args of commands) {
    const argv = ['--import', 'tsx', 'src/cli/main.ts', ...args];
    out = (await execFileAsync(process.execPath, argv, { cwd: root, encoding: 'utf8' })).stdout;
  }
  return out;
}

const runnable = (b: Block) =>
  shellLines(b).every((l) => !/[[\]…]|\b[A-Z]{2,}\b/.test(l) && !/\binspect\b/.test(l));

interface StateNodeLike {
  readonly id: string;
  readonly states: Readonly<Record<string, StateNodeLike>>;
}

/** Every state of a machine, nested ones included. */
function statesOf(node: StateNodeLike): string[] {
  return Object.entries(node.states).flatMap(([name, child]) => [name, ...statesOf(child)]);
}

const wordsIn = (text: string) => new Set(text.match(/[A-Za-z][\w-]*/g) ?? []);

/** The pictures and samples that are not commands: each checked against the code it shows. */
const pictures: ReadonlyArray<{ startsWith: string; check: (b: Block) => void }> = [
  {
    startsWith: ' pod sources ──► events',
    check: (b) => {
      const planSource = readFileSync(join(root, 'src/kubelet/plan.ts'), 'utf8');
      assert.match(
        planSource,
        /export function plan\(\s*world[^,]*,\s*nowMs/,
        'plan(world, nowMs)',
      );
      for (const name of ['OperationStarted', 'EngineStarted']) {
        if (b.text.includes(name)) {
          const events = readFileSync(join(root, 'src/events/types.ts'), 'utf8');
          assert.ok(events.includes(`'${name}'`), `${where(b)}: the event ${name} exists`);
        }
      }
    },
  },
  {
    startsWith: 'attachment: detached →',
    check: (b) => {
      const [attachmentLines, mountLine] = b.text.split(/^mount:/m);
      assert.ok(mountLine, `${where(b)}: the picture has both machines`);
      const machines: ReadonlyArray<[StateNodeLike, string]> = [
        [attachmentMachine.root, attachmentLines!],
        [mountMachine.root, mountLine],
      ];
      for (const [machine, text] of machines) {
        const shown = [...wordsIn(text)].filter((w) => w !== 'attachment');
        assert.deepEqual(
          shown.sort(),
          statesOf(machine).sort(),
          `${where(b)}: the picture shows exactly the states of ${machine.id}`,
        );
      }
    },
  },
  {
    startsWith: '                     vole apply / vole delete',
    check: (b) => {
      const keys = new ClusterKeys('/vole/');
      const real = [
        keys.object('PersistentVolume', 'pv-1'),
        keys.object('PersistentVolumeClaim', 'data', 'default'),
        keys.pod('node-1', 'default', 'web'),
        keys.pod(undefined, 'default', 'web'),
        keys.volumesInUse('node-1'),
        keys.csiNodeIds('node-1'),
        keys.heartbeat('node-1'),
        keys.volumesAttached('node-1'),
        keys.leader,
        keys.log.segment(1),
        keys.log.head,
        keys.log.snapshot,
      ].map((k) => ClusterKeys.rest(k, '/vole/'));
      // The box's lines: ` │ key   what   ◄── writer`; `s/<seq>, head` is two keys.
      const shown = [...b.text.matchAll(/^ │ ([a-z]+\/\S*)( head)?/gm)].flatMap((m) =>
        m[2] ? [m[1]!.replace(/,$/, ''), m[1]!.replace(/[^/]*\/[^/]*,$/, 'head')] : [m[1]!],
      );
      const pattern = (template: string) =>
        new RegExp(`^${template.replace(/<[^>]*>/g, '[^/]+').replace(/…$/, '.*')}$`);
      for (const template of shown) {
        assert.ok(
          real.some((k) => pattern(template).test(k)),
          `${where(b)}: ${template} is a key of src/cluster/keys.ts (${real.join(' ')})`,
        );
      }
      for (const key of real) {
        assert.ok(
          shown.some((s) => pattern(s).test(key)),
          `${where(b)}: the picture shows ${key} (${shown.join(' ')})`,
        );
      }
    },
  },
  {
    startsWith: 'machines/        ',
    check: (b) => {
      const listed = [...b.text.matchAll(/^(\S+)/gm)].map((m) => m[1]!);
      for (const path of listed) accessSync(join(root, path));
      const folders = readdirSync(join(root, 'src'), { withFileTypes: true })
        .filter((d) => d.isDirectory())
        .map((d) => `src/${d.name}/`);
      for (const folder of folders) {
        assert.ok(listed.includes(folder), `${where(b)}: the layout lists ${folder}`);
      }
      const tiers = new Set(
        readdirSync(join(root, 'test'), { recursive: true, encoding: 'utf8' }).flatMap((f) => {
          const tier = /\.([a-z]+)\.test\.ts$/.exec(f);
          return tier ? [tier[1]!] : [];
        }),
      );
      const testLine = b.text.split('\n').find((l) => l.startsWith('test/'))!;
      for (const tier of tiers) {
        assert.ok(testLine.includes(`*.${tier}`), `${where(b)}: the layout names *.${tier} tests`);
      }
    },
  },
  {
    startsWith: '11  cli/',
    check: (b) => {
      const rows = [...b.text.matchAll(/^\s*(\d+)\s+(.*)$/gm)];
      const top = Math.max(...layers.map(([, layer]) => layer));
      assert.equal(rows.length, top + 1, `${where(b)}: the picture has a row per layer`);
      for (const [, number, text] of rows) {
        const shown = new Set(text!.match(/\b[a-z][\w-]*(?:\/|\.ts\b)/g) ?? []);
        const table = layers.filter(([, layer]) => layer === Number(number));
        assert.deepEqual(
          [...shown].sort(),
          [...new Set(table.map(([prefix]) => shownName(prefix)))].sort(),
          `${where(b)}: row ${number} shows the folders of its layer in test/support/layers.ts`,
        );
      }
    },
  },
  {
    startsWith: 'vole: /var/lib/vole/vole.db is being written',
    check: (b) => {
      const message = inUseMessage('/var/lib/vole/vole.db', {
        pid: 4242,
        host: 'node-1',
        sinceMs: Date.parse('2026-11-25T09:45:22.306Z'),
        command: 'vole run --manifests /etc/vole/pods',
      });
      assert.equal(b.text.replaceAll('\n', ' ').trim(), `vole: ${message}`);
    },
  },
  {
    startsWith: 'log /var/lib/vole/vole.db cannot be written',
    check: (b) => {
      const said: string[] = [];
      const reporter = logBlockedReporter((line) => said.push(line));
      reporter.onBlocked!({
        path: '/var/lib/vole/vole.db',
        code: 'SQLITE_FULL',
        message: 'database or disk is full',
        freeBytes: 0,
        pendingCount: 2,
        attempts: 1,
        sinceMs: 0,
        retryInMs: 100,
      });
      reporter.onResumed!({ path: '/var/lib/vole/vole.db', blockedMs: 1500, written: 600 });
      const shown = b.text
        .trim()
        .split(/\n(?=log )/)
        .map((m) => m.replaceAll('\n', ' '));
      assert.deepEqual(shown, said);
    },
  },
];

test('docs: the README is a front door of at most 250 lines that links every page of docs/', () => {
  const readme = page('README.md');
  const lineCount = readme.split('\n').length - 1;
  assert.ok(lineCount <= 250, `README.md has ${lineCount} lines, at most 250`);
  for (const path of pages.keys()) {
    if (path === 'README.md') continue;
    assert.ok(readme.includes(`](${path})`), `README.md links ${path}`);
  }
});

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens. */
function anchorsOf(text: string): Set<string> {
  const prose = text.replace(/^```[a-z]*\n[\s\S]*?^```$/gm, '');
  return new Set(
    [...prose.matchAll(/^#+ (.*)$/gm)].map((m) =>
      m[1]!
        .toLowerCase()
        .replace(/[^\p{L}\p{N} _-]/gu, '')
        .replaceAll(' ', '-'),
    ),
  );
}

test('docs: every relative link between the pages names a file and heading that exist', () => {
  for (const [path, text] of pages) {
    const dir = path.includes('/') ? path.slice(0, path.lastIndexOf('/')) : '.';
    for (const [, target, anchor] of text.matchAll(/\]\(([^)#:]*)(?:#([^)]*))?\)/g)) {
      const file = target === '' ? path : join(dir, target!);
      accessSync(join(root, file));
      if (anchor === undefined) continue;
      const linked = target === '' ? text : pages.get(file);
      assert.ok(linked, `${path}: ${file} is a page`);
      assert.ok(anchorsOf(linked).has(anchor), `${path}: ${file} has a heading #${anchor}`);
    }
  }
});

test('docs: every file or folder of the repository the text names exists', () => {
  const missing: string[] = [];
  for (const [path, text] of pages) {
    const prose = text.replace(/^```[a-z]*\n[\s\S]*?^```$/gm, '');
    for (const [, span] of prose.matchAll(/`([^`]+)`/g)) {
      const named = span!.matchAll(
        /(?:^|[\s(])((?:src|test|scripts|machines|examples|docs)\/[\w./*-]*)/g,
      );
      for (const [, raw] of named) {
        const name = raw!.replace(/[.,;:]+$/, '');
        if (/[<>{]/.test(name)) continue;
        if (!name.includes('*')) {
          if (!existsSync(join(root, name))) missing.push(`${path}: ${name}`);
          continue;
        }
        const dir = name.slice(0, name.lastIndexOf('/', name.indexOf('*')));
        const pattern = new RegExp(`^${name.replaceAll('.', '\\.').replaceAll('*', '[^/]*')}$`);
        const files = readdirSync(join(root, dir), { recursive: true, encoding: 'utf8' });
        if (!files.some((f) => pattern.test(`${dir}/${f}`))) missing.push(`${path}: ${name}`);
      }
    }
  }
  assert.deepEqual(missing, [], 'files and folders the docs name that do not exist');
});

test('docs: every code block is checked by this test', () => {
  const unchecked = blocks.filter(
    (b) =>
      regionName(b) === undefined &&
      b.lang !== 'sh' &&
      !blocks.some((s) => s.lang === 'sh' && outputOf(s) === b) &&
      !b.text.startsWith('vole ') &&
      !pictures.some((p) => b.text.startsWith(p.startsWith)),
  );
  assert.deepEqual(unchecked.map(where), [], 'blocks no check of docs.unit.test.ts covers');
});

test('docs: the library example is the region of its example file and runs', () => {
  const block = blocks.find((b) => regionName(b) === 'library');
  assert.ok(block, 'the library region in the docs');
  assert.equal(
    block.text.trim(),
    region(readFileSync(join(root, 'examples/library.ts'), 'utf8'), 'library'),
  );
  const out = execFileSync(process.execPath, ['--import', 'tsx', 'examples/library.ts'], {
    cwd: root,
    encoding: 'utf8',
  });
  assert.match(out, /mounted: \[ 'cache' \]/);
  assert.match(out, /still mounted: \[\]/);
});

test('docs: the controller example is the region of its example file and runs', () => {
  const block = blocks.find((b) => regionName(b) === 'controller-library');
  assert.ok(block, 'the controller-library region in the docs');
  const example = readFileSync(join(root, 'examples/controller-library.ts'), 'utf8');
  assert.equal(block.text.trim(), region(example, 'controller-library'));
  const out = execFileSync(
    process.execPath,
    ['--import', 'tsx', 'examples/controller-library.ts'],
    {
      cwd: root,
      encoding: 'utf8',
    },
  );
  assert.match(out, /name: 'example\.com\/disk\/disk-1'/);
  assert.match(out, /attached: \[\]/);
});

test('docs: the CSI example is the region of its example file and runs on the scripted driver', () => {
  const block = blocks.find((b) => regionName(b) === 'csi-library');
  assert.ok(block, 'the csi-library region in the docs');
  const example = readFileSync(join(root, 'examples/csi-agent.ts'), 'utf8');
  assert.equal(block.text.trim(), region(example, 'csi-library'));
  const out = execFileSync(
    process.execPath,
    ['--import', 'tsx', 'examples/csi-agent.ts', 'fake', join(scratch, 'csi-root')],
    { cwd: root, encoding: 'utf8' },
  );
  assert.match(out, /mounted: \[ 'data' \]/);
  assert.match(out, /in use: \[\]/);
});

test('docs: every region is an example that exists', () => {
  for (const b of blocks) {
    const name = regionName(b);
    if (name === undefined) continue;
    assert.ok(
      ['library', 'controller-library', 'csi-library'].includes(name),
      `${where(b)}: region ${name} is tested`,
    );
  }
});

test('docs: every output block is what its commands print', async () => {
  const pairs = blocks.filter((b) => b.lang === 'sh' && outputOf(b) !== undefined);
  assert.ok(pairs.length >= 5, `commands with their output: ${pairs.map(where).join(' ')}`);
  await Promise.all(
    pairs.map(async (b) => {
      assert.ok(runnable(b), `${where(b)}: a block with its output runs as written`);
      assert.equal(await runShell(b), outputOf(b)!.text, `${where(b)}: the output shown`);
    }),
  );
});

test('docs: every command line names a vole subcommand and flags it has', () => {
  for (const b of blocks) {
    if (b.lang === 'sh') for (const line of shellLines(b)) checkShellLine(line, where(b));
    else if (b.text.startsWith('vole ')) {
      for (const line of b.text.trim().split('\n')) checkVoleCommand(line, where(b));
    }
  }
  for (const [path, text] of pages) {
    const prose = text.replace(/^```[a-z]*\n[\s\S]*?^```$/gm, '');
    for (const [, span] of prose.matchAll(/`([^`]+)`/g)) {
      const line = span!.replaceAll('\n', ' ');
      if (line.startsWith('vole ') || line.startsWith('npm run --silent vole -- ')) {
        checkShellLine(line, path);
      }
    }
  }
});

test('docs: docs/cli.md names every subcommand with every flag it takes', () => {
  const documented = new Map<string, Set<string>>();
  for (const [, span] of page('docs/cli.md').matchAll(/`(vole [^`]+)`/g)) {
    const { names, flags } = parseVoleCommand(span!);
    for (const name of names) {
      const primary = cliCommand(name)?.name ?? name;
      const known = documented.get(primary) ?? new Set();
      for (const flag of flags) known.add(flag);
      documented.set(primary, known);
    }
  }
  const global = new Set(['--version', '-V', '--log-level', '--help', '-h']);
  const missing = cli.flatMap((command) => {
    const known = documented.get(command.name);
    if (known === undefined) return [`vole ${command.name}`];
    return command.options
      .filter((flag) => !global.has(flag) && !known.has(flag))
      .map((flag) => `vole ${command.name} ${flag}`);
  });
  assert.deepEqual(missing, [], 'subcommands and flags docs/cli.md does not name');
});

test('docs: the pictures and messages show what the code has', () => {
  for (const picture of pictures) {
    const shown = blocks.filter((b) => b.text.startsWith(picture.startsWith));
    assert.equal(shown.length, 1, `one block starts with ${JSON.stringify(picture.startsWith)}`);
    picture.check(shown[0]!);
  }
});

test('docs: the snapshot interval is stated once, and it is the one the agent uses', () => {
  const all = [...pages.values()].join('\n');
  const stated = [...all.matchAll(/([0-9][0-9,]*) events\s+\(`snapshotEveryEvents`\)/g)];
  assert.equal(stated.length, 1, 'the docs name snapshotEveryEvents with its value once');
  assert.equal(Number(stated[0]![1]!.replaceAll(',', '')), snapshotEveryEvents);
  const others = [...all.matchAll(/snapshots?[^.|]*?every [0-9][0-9,]* events/gi)];
  assert.deepEqual(
    others.map((m) => m[0]),
    [],
    'no other sentence gives snapshots an interval',
  );
});

/** The versions the code writes, as the docs and comments state them. */
const codeVersions = {
  'kubelet snapshot format': kubeletCore.snapshot.format,
  'controller snapshot format': controllerCore.snapshot.format,
  'log schema version': logSchemaVersion,
} as const;

test('docs: every stated snapshot format and log schema version is the one the code writes', () => {
  const stated = checkedFiles(root).flatMap((path) =>
    statedVersions(path, readFileSync(join(root, path), 'utf8')),
  );
  assert.deepEqual(staleVersions(stated, codeVersions), [], 'stale version statements');
  const model = statedVersions('docs/model.md', page('docs/model.md'));
  for (const what of Object.keys(codeVersions))
    assert.ok(
      model.some((s) => s.what === what),
      `docs/model.md states the ${what} in the form "${what} N"`,
    );
});

test('docs: the version check reports a planted stale statement and passes a true one', () => {
  const kubelet = codeVersions['kubelet snapshot format'];
  const text = [
    `snapshots are per core (kubelet snapshot format ${kubelet},`,
    `controller snapshot format ${codeVersions['controller snapshot format'] + 2})`,
  ].join('\n');
  assert.deepEqual(staleVersions(statedVersions('docs/x.md', text), codeVersions), [
    `docs/x.md:2: controller snapshot format ${codeVersions['controller snapshot format'] + 2} ` +
      `(the code writes ${codeVersions['controller snapshot format']})`,
  ]);
});

/**
 * References left in code lines of src/ (a trailing comment, an assertion's message), each
 * file with its count of lines: they go with the next change to those lines, and the count may only
 * go down (the test fails when a file has fewer, so the list is lowered with the fix).
 */
const outsideReferencesAllowed: ReadonlyMap<string, number> = new Map([
  ['src/operations/compiled-machine.ts', 1],
  ['src/execute/verify-attachments.ts', 1],
  ['src/operations/calls.ts', 1],
  ['src/controller/fold-pairs.ts', 1],
]);

test('docs: no comment, doc or test points to a file outside the repository', () => {
  const found = outsideReferencesOf(root);
  const byFile = new Map<string, number>();
  const lines = new Set(found.map((ref) => ref.split(':').slice(0, 2).join(':')));
  for (const line of lines) {
    const path = line.slice(0, line.indexOf(':'));
    byFile.set(path, (byFile.get(path) ?? 0) + 1);
  }
  const unexpected = found.filter(
    (ref) => !outsideReferencesAllowed.has(ref.slice(0, ref.indexOf(':'))),
  );
  assert.deepEqual(
    unexpected,
    [],
    'name a page of docs/ (docs/behaviour.md rows, docs/style.md rules, docs/design.md) or the ' +
      'Kubernetes source file and function instead',
  );
  for (const [path, count] of outsideReferencesAllowed)
    assert.equal(byFile.get(path) ?? 0, count, `${path}: lower its allowance to what is left`);
});

test('docs: the outside-reference check reports each kind of planted reference', () => {
  const name = (base: string) => `${base}.md`;
  const up = ['..', '..', 'shared'].join('/');
  const planted = [
    `// see ${name('DESIGN')} rule 3`,
    ` * (${name('STYLE')}) and ${name('SCENARIOS')}`,
    `# spec ${'§'}4.8 markVolumeErrorState`,
    `/** spec/${name('kubelet-volume-manager')} ${'§'}2.5 */`,
    `the format is in \`${up}/${name('SCENARIOS')}\``,
    `an invariant (spec S${4})`,
    `a bare section ${'§'}3.3`,
  ].join('\n');
  const reported = outsideReferences('src/x.ts', planted);
  assert.deepEqual(
    [...new Set(reported.map((r) => Number(r.split(':')[1])))],
    [1, 2, 3, 4, 5, 6, 7],
    `every planted line is reported:\n${reported.join('\n')}`,
  );
  // A page of docs/ may not link out of the repository, and a web section is no file.
  assert.deepEqual(outsideReferences('docs/x.md', `[the rules](${up}/x)`), [
    `docs/x.md:1: ${up.slice(3)}`,
    `docs/x.md:1: link ${up}/x`,
  ]);
  assert.deepEqual(
    outsideReferences('docs/x.md', '[up](../README.md)'),
    [],
    'a link inside passes',
  );
  assert.deepEqual(
    outsideReferences('src/x.ts', '// https://www.sqlite.org/fileformat2.html ' + '§' + '1.3'),
    [],
  );
  assert.deepEqual(
    outsideReferences('src/x.ts', '// docs/style.md rule 7, behaviour K3.3, docs/csi.md'),
    [],
  );
});

test('docs: every behaviour row the code cites is a row of docs/behaviour.md', () => {
  const rows = behaviourRows(page('docs/behaviour.md'));
  assert.ok(rows.size > 60, `the rows were found (${rows.size})`);
  const missing = checkedFiles(root).flatMap((path) =>
    missingBehaviourRows(path, readFileSync(join(root, path), 'utf8'), rows),
  );
  assert.deepEqual(missing, [], 'add the row to docs/behaviour.md or cite one that exists');
  const planted = `// behaviour ${'K'}9.9 and behaviour K3.3`;
  assert.deepEqual(missingBehaviourRows('src/x.ts', planted, rows), [`src/x.ts:1: ${'K'}9.9`]);
});
