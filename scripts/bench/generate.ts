/**
 * The replay/restart benchmark's log: written by the real engine (fold, planner, executor)
 * on a virtual clock with the instant fake plugins, so every event has the shape and the
 * interleaving production writes (a wave's operations run concurrently).
 *
 * Pods arrive in waves of `wave`; each has a PVC-backed attachable disk of `fake.disk`
 * (attach, waitForAttach, mountDevice, setUp; later unmount, unmountDevice, detach) and an
 * emptyDir (verifyControllerAttached, setUp; later unmount, markDetached). Once more than
 * `population` pods live, the oldest wave is deleted with its PV and PVC, so the log ends
 * with `population` pods mounted and the world has a production-like size.
 *
 * The engine writes to a MemorySink; the events then go to SQLite through EventStore.append
 * in full batches (the engine's own group commit would write the same rows, ten times
 * slower). The file is cached in bench-results/logs/ under a hash of the code that writes
 * it (src/, machines/ and this file): a later run reuses it only while that code is
 * unchanged. 1,000,000 events take about 35 s to write on a 2-core machine. Snapshots are
 * not cached (restart.ts writes them with the code of the run).
 */
import { createHash } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import pino from 'pino';
import { kubeletCore } from '../../src/engine/cores.js';
import { Engine } from '../../src/engine/engine.js';
import { Executor } from '../../src/execute/executor.js';
import type { Operation } from '../../src/kubelet/planner.js';
import type { World } from '../../src/kubelet/types.js';
import { MemorySink } from '../../src/engine/sink.js';
import type { Pod } from '../../src/events/k8s.js';
import { type Clock, VirtualClock } from '../../src/clock.js';
import { type FakeCallRecord, FakePlugin } from '../../src/plugins/fake.js';
import { PluginManager } from '../../src/plugins/manager.js';
import { caps } from '../../src/plugins/types.js';
import { eventCodec, type NewEvent, type VoleEvent } from '../../src/events/index.js';
import { openLog } from '../../src/log/store.js';
import { builtinPluginNames, podCount } from '../../src/kubelet/index.js';
import { progress, repoRoot, resultsDir, turn } from './util.js';

export const diskPlugin = 'fake.disk';

/** The plugins of every benchmark engine: the instant fakes (no faults, no delays). */
export function benchPlugins(clock: Clock, journal: FakeCallRecord[]): PluginManager {
  const manager = new PluginManager();
  manager.register(
    new FakePlugin({
      caps: caps(diskPlugin, { attachable: true, deviceMountable: true }),
      clock,
      journal,
    }),
  );
  manager.register(new FakePlugin({ caps: caps(builtinPluginNames.emptyDir), clock, journal }));
  return manager;
}

/** The UniqueVolumeName of pod `i`'s disk (podEvents), as the engine names it. */
export function diskVolumeName(i: number, prefix = 'p'): string {
  return `${diskPlugin}/disk-${prefix}-${i}`;
}

/** PV + bound PVC of disk `i`, and a pod using it and (unless scratch: false) an emptyDir. */
export function podEvents(
  i: number,
  tsMs: number,
  prefix = 'p',
  opts: { scratch?: boolean } = {},
): { events: NewEvent[]; uid: string } {
  const uid = `${prefix}-${i}`;
  const pod: Pod = {
    metadata: { name: `pod-${prefix}-${i}`, namespace: 'default', uid },
    spec: {
      volumes: [
        { name: 'data', persistentVolumeClaim: { claimName: `claim-${prefix}-${i}` } },
        ...(opts.scratch === false ? [] : [{ name: 'scratch', emptyDir: {} }]),
      ],
    },
  };
  const events: NewEvent[] = [
    {
      type: 'ObjectUpserted',
      tsMs,
      object: {
        apiVersion: 'v1',
        kind: 'PersistentVolume',
        metadata: { name: `pv-${prefix}-${i}` },
        spec: {
          accessModes: ['ReadWriteOnce'],
          csi: { driver: diskPlugin, volumeHandle: `disk-${prefix}-${i}` },
        },
      },
    },
    {
      type: 'ObjectUpserted',
      tsMs,
      object: {
        apiVersion: 'v1',
        kind: 'PersistentVolumeClaim',
        metadata: { name: `claim-${prefix}-${i}`, namespace: 'default' },
        spec: { volumeName: `pv-${prefix}-${i}` },
        // Bound already, as the API server records it: the node binds no claim here.
        status: { phase: 'Bound' },
      },
    },
    { type: 'PodUpserted', tsMs, pod },
  ];
  return { events, uid };
}

export function podRemovedEvents(i: number, tsMs: number, prefix = 'p'): NewEvent[] {
  return [
    { type: 'PodRemoved', tsMs, uid: `${prefix}-${i}` },
    {
      type: 'ObjectRemoved',
      tsMs,
      kind: 'PersistentVolumeClaim',
      name: `claim-${prefix}-${i}`,
      namespace: 'default',
    },
    { type: 'ObjectRemoved', tsMs, kind: 'PersistentVolume', name: `pv-${prefix}-${i}` },
  ];
}

/** Runs the engine until nothing is left to plan and no event came for two turns. */
export async function settle(engine: Engine<World, Operation>): Promise<void> {
  let quiet = 0;
  for (let i = 0; i < 1_000_000; i++) {
    const before = engine.world.seq;
    await turn();
    quiet = engine.idle && engine.world.seq === before ? quiet + 1 : 0;
    if (quiet >= 2) return;
  }
  throw new Error('generate: the engine did not settle');
}

interface LogMeta {
  readonly events: number;
  /** The world at the end of the log. */
  readonly livePods: number;
  readonly attachments: number;
  readonly mounts: number;
  readonly engineSeconds: number;
  readonly writeSeconds: number;
}

export interface GeneratedLog extends LogMeta {
  /** The log: events only, no snapshot (restart.ts adds snapshots to copies of it). */
  readonly withoutSnapshots: string;
  readonly cached: boolean;
}

/**
 * The cache key of a log: a hash of its parameters and of the code that writes it. The
 * bench's parent process computes it once and hands it to every section (BENCH_LOG_KEY),
 * so the sections of one run share one log even while others edit src/.
 */
export function codeHash(...params: number[]): string {
  const hash = createHash('sha256');
  hash.update(JSON.stringify(params));
  const walk = (dir: string) => {
    for (const name of readdirSync(dir).sort()) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (name.endsWith('.ts')) hash.update(path).update(readFileSync(path));
    }
  };
  walk(join(repoRoot, 'src'));
  walk(join(repoRoot, 'machines'));
  hash.update(readFileSync(join(repoRoot, 'scripts', 'bench', 'generate.ts')));
  return hash.digest('hex').slice(0, 16);
}

/** Writes (or reuses) a log of at least `targetEvents` events; see the file comment. */
export async function generateLog(opts: {
  targetEvents: number;
  population: number;
  wave: number;
  fresh: boolean;
}): Promise<GeneratedLog> {
  const dir = join(resultsDir, 'logs');
  mkdirSync(dir, { recursive: true });
  const key = process.env.BENCH_LOG_KEY ?? codeHash(opts.targetEvents, opts.population, opts.wave);
  const base = join(dir, `log-${opts.targetEvents}-${key}`);
  const paths = { withoutSnapshots: `${base}.db` };
  const metaPath = `${base}.json`;
  if (!opts.fresh && existsSync(paths.withoutSnapshots) && existsSync(metaPath)) {
    const meta = JSON.parse(readFileSync(metaPath, 'utf8')) as LogMeta;
    progress(
      `log: reusing ${base}.db (${meta.events.toLocaleString('en-US')} events; the code that wrote it is unchanged)`,
    );
    return { ...meta, ...paths, cached: true };
  }
  // Older logs of the same size are stale: their code has changed.
  for (const old of readdirSync(dir)) {
    if (old.startsWith(`log-${opts.targetEvents}-`)) rmSync(join(dir, old), { force: true });
  }
  const started = performance.now();
  const { events, world } = await runEngine(opts);
  const engineSeconds = (performance.now() - started) / 1000;
  progress(
    `log: ${events.length.toLocaleString('en-US')} events from the engine in ${engineSeconds.toFixed(1)} s; writing the SQLite log`,
  );

  // The events go through vole's own EventStore.append (validated, one transaction per
  // appendBatchEventsMax); durability normal: a benchmark input nobody recovers after a power cut.
  const writeStarted = performance.now();
  const store = openLog<VoleEvent>(paths.withoutSnapshots + '.tmp', {
    codec: eventCodec,
    mode: 'create',
    durability: 'normal',
  });
  const batch = 4096;
  for (let start = 0; start < events.length; start += batch) {
    const chunk = events
      .slice(start, start + batch)
      .map(({ seq: _seq, ...rest }) => rest as Omit<VoleEvent, 'seq'>);
    store.append(chunk, { expectedSeq: start });
  }
  store.close();
  renameSync(paths.withoutSnapshots + '.tmp', paths.withoutSnapshots);
  const writeSeconds = (performance.now() - writeStarted) / 1000;

  const meta: LogMeta = { events: events.length, ...world, engineSeconds, writeSeconds };
  writeFileSync(metaPath, JSON.stringify(meta));
  progress(
    `log: ${meta.events.toLocaleString('en-US')} events (${meta.livePods} pods, ${meta.attachments} attachments, ` +
      `${meta.mounts} mounts at the end); engine ${engineSeconds.toFixed(1)} s, SQLite ${writeSeconds.toFixed(1)} s`,
  );
  return { ...meta, ...paths, cached: false };
}

/** Drives the real engine with the instant fakes until the log has `targetEvents`. */
export async function runEngine(opts: {
  targetEvents: number;
  population: number;
  wave: number;
}): Promise<{
  events: VoleEvent[];
  world: { livePods: number; attachments: number; mounts: number };
}> {
  const sink = new MemorySink();
  const clock = new VirtualClock(1_700_000_000_000);
  const journal: FakeCallRecord[] = [];
  const engine = new Engine({
    core: kubeletCore,
    runner: (host) => new Executor(host),
    config: { node: 'node-1', controllerAttachDetach: false },
    plugins: benchPlugins(clock, journal),
    clock,
    sink,
    logger: pino({ level: 'silent' }),
  });
  engine.start();
  engine.append({ type: 'SourcesReady', tsMs: clock.nowMs() });
  await settle(engine);
  const live: number[] = [];
  let next = 0;
  let lastReport = 0;
  while (engine.world.seq < opts.targetEvents) {
    // Once the population is reached, each wave of new pods replaces the oldest wave.
    if (live.length >= opts.population) {
      clock.moveTo(clock.nowMs() + 1_000);
      for (const i of live.splice(0, opts.wave)) {
        for (const event of podRemovedEvents(i, clock.nowMs())) engine.append(event);
      }
      await settle(engine);
    }
    clock.moveTo(clock.nowMs() + 1_000);
    for (let k = 0; k < opts.wave; k++) {
      for (const event of podEvents(next, clock.nowMs()).events) engine.append(event);
      live.push(next++);
    }
    await settle(engine);
    journal.length = 0;
    if (engine.world.seq - lastReport >= 200_000) {
      lastReport = engine.world.seq;
      progress(`log: ${engine.world.seq.toLocaleString('en-US')} events so far`);
    }
  }
  await engine.drainAndStop();
  const w = engine.world;
  const mounts = [...w.mounts.values()].reduce((n, m) => n + podCount(m), 0);
  return {
    events: sink.events,
    world: { livePods: w.pods.size, attachments: w.attachments.size, mounts },
  };
}
