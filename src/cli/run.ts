/**
 * `vole run`: the node agent. Pods, PersistentVolumes and claims come from a manifest
 * directory (watched); real plugins act on the host under --root; every fact goes to the
 * SQLite log at --db, which a restarted agent resumes from.
 */
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Logger } from 'pino';
import { PodProgress, settled } from '../agent/progress.js';
import { VolumeManager } from '../agent/volume-manager.js';
import { defaultRoot } from '../host/paths.js';
import { CsiDriverRegistry } from '../csi/registry.js';
import { RegistrationWatcher } from '../csi/watcher.js';
import { builtinPlugins } from '../plugins/builtin/index.js';
import { PluginManager } from '../plugins/manager.js';
import { ObjectContents } from '../sources/contents.js';
import type { ManifestChanges } from '../sources/manifests.js';
import { ManifestWatcher } from '../sources/watch.js';
import { progressPrinter, runUntilStopped } from './lifecycle.js';
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
  /** CSI drivers by name and endpoint (`disk.csi.vole.dev=unix:///run/disk.sock`). */
  readonly csi?: readonly string[];
}

/** `NAME=unix:///path.sock` → its parts; a usage error says the form otherwise. */
export function parseCsiFlag(value: string): { name: string; endpoint: string } {
  const at = value.indexOf('=');
  const name = value.slice(0, at);
  const endpoint = value.slice(at + 1);
  if (at <= 0 || !endpoint.startsWith('unix:///'))
    throw new UsageError(`--csi ${value}: give NAME=unix:///absolute/path.sock (the driver's name and socket)`);
  return { name, endpoint };
}

/**
 * The CSI drivers: the `--csi` ones (asked again every second until they answer) and
 * those registering through `<root>/plugins_registry/`.
 */
async function startCsi(
  opts: RunOptions,
  ctx: { root: string; plugins: PluginManager; logger: Logger; say: (line: string) => void },
): Promise<{ registry: CsiDriverRegistry; stop: () => void }> {
  const registry = new CsiDriverRegistry(ctx);
  const flags = (opts.csi ?? []).map(parseCsiFlag);
  const timers = new Set<ReturnType<typeof setTimeout>>();
  const attempt = async (flag: { name: string; endpoint: string }, first: boolean): Promise<void> => {
    try {
      await registry.add(flag.endpoint, 'flag', flag.name);
      ctx.say(`CSI driver ${flag.name} at ${flag.endpoint} registered`);
    } catch (error) {
      if (first) ctx.say(`${(error as Error).message}; vole asks again every second`);
      const timer = setTimeout(() => {
        timers.delete(timer);
        void attempt(flag, false);
      }, 1000);
      timers.add(timer);
    }
  };
  await Promise.all(flags.map((flag) => attempt(flag, true)));
  const watcher = new RegistrationWatcher({ dir: join(ctx.root, 'plugins_registry'), registry, ...ctx });
  await watcher.start();
  return {
    registry,
    stop: () => {
      for (const timer of timers) clearTimeout(timer);
      watcher.stop();
      registry.close();
    },
  };
}

function apply(vm: VolumeManager, contents: ObjectContents, changes: ManifestChanges): void {
  // Every ConfigMap's and Secret's data, first: the plugins read it at setUp time.
  for (const object of changes.contents) contents.set(object);
  for (const object of changes.upsertObjects) vm.upsertObject(object);
  for (const pod of changes.upsertPods) vm.addPod(pod);
  for (const uid of changes.removePods) vm.removePod(uid);
  for (const ref of changes.removeObjects) vm.removeObject(ref);
}

export async function runCommand(opts: RunOptions, logger: Logger): Promise<number> {
  const root = opts.root ?? defaultRoot;
  const db = opts.db ?? join(root, 'vole.db');
  mkdirSync(root, { recursive: true });
  const say = progressPrinter();
  const contents = new ObjectContents();
  const plugins = new PluginManager(
    builtinPlugins({ root, contents, forbiddenHostPaths: [dirname(db)] }),
  );
  const csi = await startCsi(opts, { root, plugins, logger, say });
  const vm = VolumeManager.open({
    db,
    node: opts.node ?? 'node-1',
    plugins,
    contents,
    controllerAttachDetach: opts.controllerAttachDetach ?? false,
    logger,
  });
  const progress = new PodProgress(say);
  vm.subscribe((event, world) => progress.onEvent(event, world));
  vm.start({ hostObserved: await vm.checkHost() });
  csi.registry.setRecorder((event) => vm.recordCsiDriver(event));
  say(
    `vole agent on ${vm.world.config.node}: manifests ${opts.manifests}, root ${root}, log ${db} (seq ${vm.world.seq})`,
  );
  const known = {
    pods: new Map([...vm.world.pods].map(([uid, r]) => [uid as string, r.pod])),
    objects: new Map(vm.world.objects),
    problems: [],
  };
  const watcher = new ManifestWatcher({
    dir: opts.manifests,
    known,
    onChanges: (changes) => apply(vm, contents, changes),
    onProblems: (problems) => {
      for (const p of problems) say(`manifest ${p.file}: ${p.message}`);
    },
  });
  try {
    watcher.sync();
  } catch (error) {
    csi.stop();
    vm.stop();
    throw new UsageError(
      `cannot read the manifest directory ${opts.manifests}: ${(error as Error).message}`,
    );
  }
  vm.markSourcesReady();
  if (opts.once !== true) watcher.start();
  return runUntilStopped({
    say,
    once: opts.once === true,
    timeout: opts.timeout,
    settled: () => settled(vm.world),
    settledMessage: () =>
      `settled: ${vm.world.pods.size} pod(s) mounted, log at seq ${vm.world.seq}`,
    shutdown: async () => {
      watcher.stop();
      await vm.drainAndStop();
      vm.stop();
      csi.stop();
    },
  });
}
