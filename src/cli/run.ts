/**
 * `vole run`: the node agent. Pods, PersistentVolumes and claims come from a manifest
 * directory (watched); real plugins act on the host under --root; every fact goes to the
 * SQLite log at --db, which a restarted agent resumes from.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { PodProgress, settled } from '../agent/progress.js';
import { VolumeManager } from '../agent/volume-manager.js';
import { defaultRoot } from '../host/paths.js';
import { builtinPlugins } from '../plugins/builtin/index.js';
import type { ManifestChanges } from '../sources/manifests.js';
import { ManifestWatcher } from '../sources/watch.js';
import { UsageError } from './postmortem.js';

export interface RunOptions {
  readonly manifests: string;
  readonly root?: string;
  readonly db?: string;
  readonly node?: string;
  readonly controllerAttachDetach?: boolean;
  /** Exit 0 once settled (every pod mounted, nothing else attached), 1 at the timeout. */
  readonly once?: boolean;
  readonly timeout?: string;
}

function apply(vm: VolumeManager, changes: ManifestChanges): void {
  for (const object of changes.upsertObjects) vm.upsertObject(object);
  for (const pod of changes.upsertPods) vm.addPod(pod);
  for (const uid of changes.removePods) vm.removePod(uid);
  for (const ref of changes.removeObjects) vm.removeObject(ref);
}

export async function runCommand(opts: RunOptions, logger: Logger): Promise<number> {
  const root = opts.root ?? defaultRoot;
  const db = opts.db ?? join(root, 'vole.db');
  mkdirSync(root, { recursive: true });
  const started = Date.now();
  const say = (line: string) => process.stdout.write(`[+${((Date.now() - started) / 1000).toFixed(2)}s] ${line}\n`);
  const vm = VolumeManager.open({
    db, node: opts.node ?? 'node-1', plugins: builtinPlugins({ root }),
    controllerAttachDetach: opts.controllerAttachDetach ?? false, logger,
  });
  const progress = new PodProgress(say);
  vm.subscribe((event, world) => progress.onEvent(event, world));
  vm.start({ hostObserved: await vm.checkHost() });
  say(`vole agent on ${vm.world.config.node}: manifests ${opts.manifests}, root ${root}, log ${db} (seq ${vm.world.seq})`);
  const known = { pods: new Map([...vm.world.pods].map(([uid, r]) => [uid as string, r.pod])), objects: new Map(vm.world.objects), problems: [] };
  const watcher = new ManifestWatcher({
    dir: opts.manifests,
    known,
    onChanges: (changes) => apply(vm, changes),
    onProblems: (problems) => { for (const p of problems) say(`manifest ${p.file}: ${p.message}`); },
  });
  try {
    watcher.sync();
  } catch (error) {
    vm.stop();
    throw new UsageError(`cannot read the manifest directory ${opts.manifests}: ${(error as Error).message}`);
  }
  vm.markSourcesReady();
  if (opts.once !== true) watcher.start();
  return new Promise<number>((resolve) => {
    let stopping = false;
    const stop = async (code: number, why: string) => {
      if (stopping) return;
      stopping = true;
      say(why);
      watcher.stop();
      clearInterval(check);
      await Promise.race([vm.drainAndStop(), new Promise((r) => setTimeout(r, 10_000))]);
      vm.stop();
      resolve(code);
    };
    process.once('SIGINT', () => void stop(130, 'SIGINT: finishing running operations, then stopping'));
    process.once('SIGTERM', () => void stop(143, 'SIGTERM: finishing running operations, then stopping'));
    const timeoutMs = opts.timeout === undefined ? Number.POSITIVE_INFINITY : Number.parseFloat(opts.timeout) * 1000;
    const check = setInterval(() => {
      if (opts.once === true && settled(vm.world)) void stop(0, `settled: ${vm.world.pods.size} pod(s) mounted, log at seq ${vm.world.seq}`);
      else if (Date.now() - started > timeoutMs) void stop(1, `timed out after ${opts.timeout} s without settling`);
    }, 50);
  });
}
