/**
 * Controller: the attach/detach controller's core at scale.
 *
 * Plan after one event: a controller world of 1,000, 10,000 and 100,000 attachments over
 * 5,000 nodes (each a PVC-backed attachable disk of a pod scheduled to a node, attached),
 * built by folding the events the controller writes for that. Each sample folds PodRemoved
 * of a pod and times the plan of the volumes it dirtied (the detach waits: the node may
 * still use the volume), then PodUpserted of it again (nothing to do: still attached),
 * alternating over 2,000 pods spread across the world. The plan looks a volume up through
 * the world's per-volume and per-node indexes, so its cost must not grow with the world.
 *
 * Restart: a 1,000,000-event controller log (pods coming and going over 100 nodes, 1,000
 * attachments at the end), written by the controller's own fold and planner with every
 * planned attach and detach succeeding at once; the time from opening it to the first
 * plan (open, load the snapshot and the events after it, fold the new EngineStarted, plan
 * what it dirtied), with a snapshot at the head and one snapshotEveryEvents - 1 behind.
 */
import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { openSqliteLog } from '../../src/agent/sqlite-log.js';
import { snapshotEveryEvents } from '../../src/constants.js';
import { managedAnnotation } from '../../src/controller/fold.js';
import type { ControllerWorld } from '../../src/controller/types.js';
import { controllerCore } from '../../src/engine/cores.js';
import { eventCodec, type NewEvent, type VoleEvent } from '../../src/events/index.js';
import type { Node } from '../../src/events/k8s.js';
import { openLog } from '../../src/log/store.js';
import { caps } from '../../src/plugins/types.js';
import { diskPlugin, podEvents, podRemovedEvents } from './generate.js';
import {
  type Figure,
  gc,
  median,
  nowMs,
  progress,
  quantile,
  removeDb,
  scratchDir,
  type SectionResult,
} from './util.js';

const t0 = 1_700_000_000_000;

function nodeObject(name: string): Node {
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name, annotations: { [managedAnnotation]: 'true' } },
    status: { conditions: [{ type: 'Ready', status: 'True' }], volumesInUse: [] },
  };
}

/**
 * The controller's core driven synchronously: every event is folded, and `settle` plans
 * the dirty volumes and appends each planned operation as it runs when every call
 * succeeds at once — the events an engine with instant plugins writes.
 */
class Driver {
  readonly world: ControllerWorld = controllerCore.initialWorld();
  constructor(private readonly out: (event: VoleEvent) => void = () => {}) {}

  append(event: NewEvent): void {
    const full = { ...event, seq: this.world.seq + 1 } as VoleEvent;
    controllerCore.fold(this.world, full);
    this.out(full);
  }

  settle(tsMs: number): void {
    while (this.world.dirty.size > 0) {
      const dirty = this.world.dirty;
      this.world.dirty = new Set();
      const planned = controllerCore.plan(this.world, tsMs, { volumes: dirty });
      for (const event of planned.events ?? []) this.append(event);
      for (const op of planned.operations) {
        const opId = `op-${this.world.seq + 1}`;
        this.append({ type: 'OperationStarted', tsMs, opId, ...controllerCore.decision(op) });
        const call = op.op === 'provision' ? 'createVolume' : op.op;
        this.append({ type: 'CallStarted', tsMs, opId, call });
        const devicePath = op.op === 'attach' ? { devicePath: `/dev/fake/${op.volume}` } : {};
        this.append({ type: 'CallSucceeded', tsMs, opId, call, ...devicePath });
        this.append({ type: 'OperationFinished', tsMs, opId, outcome: 'ok' });
      }
    }
  }

  start(nodes: number): void {
    this.append({
      type: 'EngineStarted',
      tsMs: t0,
      plugins: [caps(diskPlugin, { attachable: true, deviceMountable: true })],
      version: 'bench',
      mode: 'controller',
      controller: { maxWaitForUnmountMs: 360_000, disableForceDetachOnTimeout: false },
    });
    for (let n = 0; n < nodes; n++)
      this.append({ type: 'ObjectUpserted', tsMs: t0, object: nodeObject(`node-${n}`) });
  }

  /** Pod `i` (with its PV and claim) scheduled to node i mod `nodes`. */
  addPod(i: number, nodes: number, tsMs: number): void {
    for (const event of podEvents(i, tsMs, 'p', { scratch: false }).events) {
      if (event.type === 'PodUpserted') {
        const pod = event.pod;
        this.append({
          ...event,
          pod: { ...pod, spec: { ...pod.spec, nodeName: `node-${i % nodes}` } },
        });
      } else this.append(event);
    }
  }

  /** Pod `i` goes; its node reports it no longer in use; the disk is detached and deleted. */
  removePod(i: number, nodes: number, tsMs: number): void {
    const [removed, ...objects] = podRemovedEvents(i, tsMs);
    this.append(removed!);
    this.append({ type: 'ObjectUpserted', tsMs, object: nodeObject(`node-${i % nodes}`) });
    this.settle(tsMs);
    for (const event of objects) this.append(event);
  }
}

/** A world of `attachments` attached disks of pods spread over `nodes` nodes. */
export function buildWorld(attachments: number, nodes: number): ControllerWorld {
  const driver = new Driver();
  driver.start(nodes);
  for (let i = 0; i < attachments; i++) driver.addPod(i, nodes, t0);
  driver.settle(t0);
  const attached = [...driver.world.pairs.values()].filter((a) =>
    a.value.startsWith('attached'),
  ).length;
  if (attached !== attachments || driver.world.running.size !== 0)
    throw new Error(`controller: built ${attached} attachments, wanted ${attachments}`);
  return driver.world;
}

/** Plan costs in µs after PodRemoved and after PodUpserted over 2,000 spread pods. */
function planSamples(world: ControllerWorld, samples: number): number[] {
  const pods = world.pods.size;
  const stride = Math.max(1, Math.floor(pods / Math.min(2_000, pods)));
  const costs: number[] = [];
  const apply = (event: NewEvent) =>
    controllerCore.fold(world, { ...event, seq: world.seq + 1 } as VoleEvent);
  const planDirty = () => {
    const dirty = world.dirty;
    world.dirty = new Set();
    const start = nowMs();
    const result = controllerCore.plan(world, t0, { volumes: dirty });
    costs.push((nowMs() - start) * 1000);
    if (result.operations.length !== 0)
      throw new Error(`controller: planned ${result.operations.map((o) => o.op).join(', ')}`);
  };
  for (let s = 0; s < samples; s++) {
    const i = ((s % 2_000) * stride) % pods;
    const record = world.pods.get(`p-${i}` as never)!;
    apply({ type: 'PodRemoved', tsMs: t0, uid: `p-${i}` });
    planDirty();
    apply({ type: 'PodUpserted', tsMs: t0, pod: record.pod });
    planDirty();
  }
  return costs;
}

async function measurePlans(sizes: readonly number[], runs: number): Promise<Figure[]> {
  const medians = new Map<number, number[]>(sizes.map((s) => [s, []]));
  const p99s = new Map<number, number[]>(sizes.map((s) => [s, []]));
  for (let run = 0; run < runs; run++) {
    for (const size of sizes) {
      gc();
      const world = buildWorld(size, 5_000);
      const costs = planSamples(world, 2_000);
      medians.get(size)!.push(median(costs));
      p99s.get(size)!.push(quantile(costs, 0.99));
      progress(
        `  controller plan run ${run + 1}/${runs}, ${size.toLocaleString('en-US')} attachments: ${median(costs).toFixed(1)} µs`,
      );
    }
  }
  const smallest = sizes[0]!;
  return sizes.flatMap((size): Figure[] => {
    const label = `${size.toLocaleString('en-US')} attachments over 5,000 nodes`;
    const own = medians.get(size)!;
    const figures: Figure[] = [
      {
        section: 'controller',
        name: `plan after one event, ${label}`,
        value: median(own),
        unit: 'µs',
        runs: own,
      },
      {
        section: 'controller',
        name: `plan after one event, p99, ${label}`,
        value: median(p99s.get(size)!),
        unit: 'µs',
        runs: p99s.get(size)!,
      },
    ];
    if (size === smallest) return figures;
    const ratios = own.map((v, i) => v / medians.get(smallest)!.at(i)!);
    figures.push({
      section: 'controller',
      name: `plan cost ${size.toLocaleString('en-US')} ÷ ${smallest.toLocaleString('en-US')} attachments`,
      value: median(ratios),
      unit: '×',
      runs: ratios,
      target: 'flat (≤ 2×)',
      met: median(ratios) <= 2,
    });
    return figures;
  });
}

/** Writes a controller log of about `events` events to `path`; returns its head. */
function writeControllerLog(
  path: string,
  events: number,
  population: number,
  nodes: number,
): number {
  removeDb(path);
  const store = openLog<VoleEvent>(path, {
    codec: eventCodec,
    mode: 'create',
    durability: 'normal',
  });
  let batch: Omit<VoleEvent, 'seq'>[] = [];
  const flush = () => {
    if (batch.length === 0) return;
    store.append(batch, { expectedSeq: store.head().seq });
    batch = [];
  };
  const driver = new Driver(({ seq: _seq, ...rest }) => {
    batch.push(rest);
    if (batch.length >= 20_000) flush();
  });
  driver.start(nodes);
  let next = 0;
  let oldest = 0;
  let tsMs = t0;
  while (driver.world.seq < events) {
    tsMs += 10;
    if (next - oldest >= population) driver.removePod(oldest++, nodes, tsMs);
    driver.addPod(next++, nodes, tsMs);
    driver.settle(tsMs);
  }
  flush();
  const head = store.head().seq;
  store.close();
  return head;
}

/** Copies of the log with one snapshot each: at the head, and snapshotEveryEvents - 1 behind. */
function snapshotLogs(path: string, head: number): { atHead: string; behind: string } {
  const atHead = path.replace(/\.db$/, '-snap-head.db');
  const behind = path.replace(/\.db$/, '-snap-behind.db');
  const behindSeq = Math.max(1, head - (snapshotEveryEvents - 1));
  const save = (copy: string, world: ControllerWorld) => {
    removeDb(copy);
    copyFileSync(path, copy);
    const log = openSqliteLog(copy, controllerCore, { durability: 'normal' });
    log.saveSnapshot(world);
    log.sink.close();
  };
  const store = openLog<VoleEvent>(path, { codec: eventCodec, mode: 'readonly' });
  const world = controllerCore.initialWorld();
  store.forEach({}, (event) => {
    controllerCore.fold(world, event);
    if (world.seq === behindSeq) save(behind, world);
  });
  store.close();
  save(atHead, world);
  return { atHead, behind };
}

/** Open → load (snapshot + tail) → fold a new EngineStarted → plan what it dirtied, in ms. */
function restartOnce(path: string): { totalMs: number; folded: number } {
  const start = nowMs();
  const log = openSqliteLog(path, controllerCore);
  const world = log.loadWorld();
  if (log.restoredFromSeq !== log.lastSnapshotSeq)
    throw new Error(`controller restart: the snapshot at ${log.lastSnapshotSeq} was not used`);
  controllerCore.fold(world, {
    type: 'EngineStarted',
    seq: world.seq + 1,
    tsMs: world.tsMs,
    plugins: [...world.plugins.values()],
    version: 'bench',
    mode: 'controller',
    controller: world.config,
  });
  const dirty = world.dirty;
  world.dirty = new Set();
  const planned = controllerCore.plan(world, world.tsMs, { volumes: dirty });
  const totalMs = nowMs() - start;
  log.store.close();
  if (planned.operations.length !== 0)
    throw new Error(
      `controller restart: the settled world planned ${planned.operations.length} operations`,
    );
  return { totalMs, folded: world.seq - 1 - log.restoredFromSeq };
}

async function measureRestart(events: number, runs: number): Promise<Figure[]> {
  const dir = scratchDir('controller');
  const path = join(dir, 'controller.db');
  progress(`controller: writing a ${events.toLocaleString('en-US')}-event controller log`);
  const head = writeControllerLog(path, events, 1_000, 100);
  progress('controller: writing the snapshots');
  const { atHead, behind } = snapshotLogs(path, head);
  restartOnce(atHead); // warm-up: JIT and page cache
  const label = `${head.toLocaleString('en-US')}-event controller log`;
  const variants = [
    { path: atHead, name: `restart, open ${label} → first plan, snapshot at the head` },
    {
      path: behind,
      name: `restart, open ${label} → first plan, snapshot ${(snapshotEveryEvents - 1).toLocaleString('en-US')} events behind`,
    },
  ];
  return variants.map((v): Figure => {
    const totals: number[] = [];
    for (let run = 0; run < runs; run++) {
      gc();
      const r = restartOnce(v.path);
      totals.push(r.totalMs);
      progress(
        `  ${v.name}: ${r.totalMs.toFixed(0)} ms (${r.folded.toLocaleString('en-US')} events folded)`,
      );
    }
    return {
      section: 'controller',
      name: v.name,
      value: median(totals),
      unit: 'ms',
      runs: totals,
      target: '< 200 ms',
      met: median(totals) < 200,
    };
  });
}

export interface ControllerBenchOptions {
  readonly sizes: readonly number[];
  readonly logEvents: number;
  readonly runs: number;
}

export async function runController(opts: ControllerBenchOptions): Promise<SectionResult> {
  const figures = [
    ...(await measurePlans(opts.sizes, opts.runs)),
    ...(await measureRestart(opts.logEvents, opts.runs)),
  ];
  return {
    section: 'controller',
    figures,
    details: { nodes: 5_000, samplesPerRun: 4_000, restartLog: { population: 1_000, nodes: 100 } },
  };
}
