/**
 * Planner: the cost of plan(world, nowMs, { volumes: dirty }) after one event, in worlds
 * of 1,000, 10,000 and 100,000 pairs, and the heap the world takes per pair.
 *
 * A pair is one machine instance, as in the README: an attachment (volume × node) or a
 * mount (volume × pod). A world of N pairs holds N/2 pods, each with one PVC-backed
 * attachable disk that is attached, device-mounted and set up: N/2 attachments, N/2 mounts,
 * their pods, PVs, PVCs and desired-state entries. It is built by folding the events the
 * executor writes for that (the shapes of a log written by the engine, see generate.ts).
 *
 * Each sample folds one event and times one plan of the volumes it dirtied: PodRemoved of
 * a pod (the plan is one unmount) and PodUpserted of it again (the plan is empty: the
 * volume is still mounted), alternating over 2,000 pods spread across the world; then the
 * same over only 10 pods, whose records stay in the CPU caches, to tell the algorithm's
 * cost from the memory hierarchy's.
 */
import type { NewEvent, VoleEvent } from '../../src/events/index.js';
import { eventCodec } from '../../src/events/index.js';
import { plan } from '../../src/kubelet/planner.js';
import { fold, initialWorld, podCount, takeDirty } from '../../src/kubelet/index.js';
import type { World } from '../../src/kubelet/types.js';
import { setAttachment, setMounts } from '../../src/kubelet/volumes.js';
import { diskPlugin, podEvents } from './generate.js';
import { caps } from '../../src/plugins/types.js';
import { builtinPluginNames } from '../../src/kubelet/index.js';
import { kubeletHeapBytesPerPairMax } from '../../src/kubelet/memory.js';
import {
  type Figure,
  heapUsedAfterGc,
  median,
  nowMs,
  progress,
  quantile,
  type SectionResult,
} from './util.js';

export interface PlannerOptions {
  readonly sizes: readonly number[];
  readonly runs: number;
}

const node = 'node-1';
const t0 = 1_700_000_000_000;

/** The events of one pod whose disk gets attached, device-mounted and set up. */
function mountedPodEvents(i: number, firstSeq: number): NewEvent[] {
  const events = podEvents(i, t0, 'p', { scratch: false }).events;
  const volume = `${diskPlugin}/disk-p-${i}`;
  const pod = `p-${i}`;
  const key = { volume, pod: '', node: '' };
  const devicePath = `/dev/fake/disk-p-${i}`;
  const deviceMountPath = `/var/lib/vole/plugins/${diskPlugin}/mounts/disk-p-${i}`;
  const podSeq = firstSeq + 2;
  const attachId = `op-${firstSeq + 3}`;
  const mountId = `op-${firstSeq + 7}`;
  events.push(
    {
      type: 'OperationStarted',
      tsMs: t0,
      opId: attachId,
      op: 'attach',
      key,
      volume,
      node,
      cause: podSeq,
    },
    { type: 'CallStarted', tsMs: t0, opId: attachId, call: 'attach' },
    { type: 'CallSucceeded', tsMs: t0, opId: attachId, call: 'attach', devicePath },
    { type: 'OperationFinished', tsMs: t0, opId: attachId, outcome: 'ok' },
    {
      type: 'OperationStarted',
      tsMs: t0,
      opId: mountId,
      op: 'mount',
      key,
      volume,
      pod,
      remount: false,
      cause: firstSeq + 6,
    },
    { type: 'CallStarted', tsMs: t0, opId: mountId, call: 'waitForAttach' },
    { type: 'CallSucceeded', tsMs: t0, opId: mountId, call: 'waitForAttach', devicePath },
    { type: 'CallStarted', tsMs: t0, opId: mountId, call: 'mountDevice', deviceMountPath },
    {
      type: 'CallSucceeded',
      tsMs: t0,
      opId: mountId,
      call: 'mountDevice',
      deviceMountPath,
      devicePath,
    },
    { type: 'CallStarted', tsMs: t0, opId: mountId, call: 'setUp' },
    { type: 'CallSucceeded', tsMs: t0, opId: mountId, call: 'setUp' },
    { type: 'OperationFinished', tsMs: t0, opId: mountId, outcome: 'ok' },
  );
  return events;
}

function apply(world: World, event: NewEvent, validate = false): void {
  const full = { ...event, seq: world.seq + 1 } as VoleEvent;
  fold(world, validate ? eventCodec.parse(full) : full);
}

/** A world of `pairs` pairs (pairs / 2 pods with one mounted disk each). */
export function buildWorld(pairs: number): World {
  const world = initialWorld();
  apply(
    world,
    {
      type: 'EngineStarted',
      tsMs: t0,
      node,
      controllerAttachDetach: false,
      version: 'bench',
      plugins: [
        caps(diskPlugin, { attachable: true, deviceMountable: true }),
        caps(builtinPluginNames.emptyDir),
      ],
    },
    true,
  );
  apply(world, { type: 'SourcesReady', tsMs: t0 }, true);
  for (let i = 0; i < pairs / 2; i++) {
    // The first pod's events go through zod: the shapes are the log's.
    for (const event of mountedPodEvents(i, world.seq + 1)) apply(world, event, i === 0);
  }
  takeDirty(world);
  const mounts = [...world.mounts.values()].reduce((n, m) => n + podCount(m), 0);
  if (world.attachments.size + mounts !== pairs || world.running.size !== 0) {
    throw new Error(
      `planner: built ${world.attachments.size} attachments and ${mounts} mounts, wanted ${pairs} pairs`,
    );
  }
  return world;
}

/**
 * Plan costs in µs after PodRemoved and after PodUpserted, `samples` of each, over
 * `spread` pods spread evenly across the world (each pod's records cold in the CPU caches
 * when it comes round again), or over 10 pods (hot: what is left is the algorithm).
 */
function planSamples(
  world: World,
  samples: number,
  spread: number,
): { removed: number[]; upserted: number[] } {
  const pods = world.pods.size;
  const removed: number[] = [];
  const upserted: number[] = [];
  const cycle = Math.min(spread, pods);
  const stride = Math.max(1, Math.floor(pods / cycle));
  for (let s = 0; s < samples; s++) {
    const i = ((s % cycle) * stride) % pods;
    const pod = world.pods.get(`p-${i}` as never)!.pod;
    apply(world, { type: 'PodRemoved', tsMs: t0, uid: `p-${i}` });
    let dirty = takeDirty(world);
    let start = nowMs();
    const after = plan(world, t0, { volumes: dirty });
    removed.push((nowMs() - start) * 1000);
    if (after.operations.length !== 1 || after.operations[0]!.op !== 'unmount') {
      throw new Error(
        `planner: after PodRemoved expected one unmount, got ${after.operations.map((o) => o.op).join(', ')}`,
      );
    }
    apply(world, { type: 'PodUpserted', tsMs: t0, pod });
    dirty = takeDirty(world);
    start = nowMs();
    const again = plan(world, t0, { volumes: dirty });
    upserted.push((nowMs() - start) * 1000);
    if (again.operations.length !== 0)
      throw new Error(
        `planner: a mounted pod re-added must need nothing, got ${JSON.stringify(again.operations)}`,
      );
  }
  return { removed, upserted };
}

/** One world: its heap per pair, then 2,000 plan samples. The world dies with the call. */
function measureOnce(size: number) {
  const before = heapUsedAfterGc();
  const world = buildWorld(size);
  const after = heapUsedAfterGc();
  const samples = planSamples(world, 2_000, 2_000);
  const hot = planSamples(world, 2_000, 10);
  // What the pair records alone take: the heap they free when dropped.
  for (const volume of [...world.volumes.keys()]) {
    setAttachment(world, volume, undefined);
    setMounts(world, volume, undefined);
  }
  const withoutPairs = heapUsedAfterGc();
  // The rest of the world stays alive through that measurement.
  if (world.pods.size !== size / 2) throw new Error('planner: the world lost pods');
  return {
    removed: median(samples.removed),
    upserted: median(samples.upserted),
    hot: median([...hot.removed, ...hot.upserted]),
    p99: quantile([...samples.removed, ...samples.upserted], 0.99),
    bytes: (after - before) / size,
    pairBytes: (after - withoutPairs) / size,
  };
}

export async function runPlanner(opts: PlannerOptions): Promise<SectionResult> {
  const perSize = new Map<
    number,
    {
      removed: number[];
      upserted: number[];
      hot: number[];
      p99: number[];
      bytes: number[];
      pairBytes: number[];
    }
  >();
  for (const size of opts.sizes)
    perSize.set(size, { removed: [], upserted: [], hot: [], p99: [], bytes: [], pairBytes: [] });
  for (let run = 0; run < opts.runs; run++) {
    // Sizes side by side in every run.
    for (const size of opts.sizes) {
      const m = measureOnce(size);
      const r = perSize.get(size)!;
      r.removed.push(m.removed);
      r.upserted.push(m.upserted);
      r.hot.push(m.hot);
      r.p99.push(m.p99);
      r.bytes.push(m.bytes);
      r.pairBytes.push(m.pairBytes);
      progress(
        `  planner run ${run + 1}/${opts.runs}, ${size.toLocaleString('en-US')} pairs: plan after PodRemoved ` +
          `${m.removed.toFixed(1)} µs, after PodUpserted ${m.upserted.toFixed(1)} µs, same 10 pods ${m.hot.toFixed(1)} µs; ${Math.round(m.bytes)} B/pair ` +
          `(pair records ${Math.round(m.pairBytes)} B)`,
      );
    }
  }
  const figures: Figure[] = [];
  const smallest = opts.sizes[0]!;
  for (const size of opts.sizes) {
    const r = perSize.get(size)!;
    const label = `${size.toLocaleString('en-US')} pairs`;
    figures.push(
      {
        section: 'planner',
        name: `plan after PodRemoved (1 volume), ${label}`,
        value: median(r.removed),
        unit: 'µs',
        runs: r.removed,
      },
      {
        section: 'planner',
        name: `plan after PodUpserted (1 volume), ${label}`,
        value: median(r.upserted),
        unit: 'µs',
        runs: r.upserted,
      },
      {
        section: 'planner',
        name: `plan after one event, p99, ${label}`,
        value: median(r.p99),
        unit: 'µs',
        runs: r.p99,
      },
      {
        section: 'planner',
        name: `plan after one event, the same 10 pods over and over, ${label}`,
        value: median(r.hot),
        unit: 'µs',
        runs: r.hot,
      },
    );
    if (size !== smallest) {
      const ratios = r.removed.map((v, i) => v / perSize.get(smallest)!.removed[i]!);
      figures.push({
        section: 'planner',
        name: `plan cost ${label} ÷ ${smallest.toLocaleString('en-US')} pairs`,
        value: median(ratios),
        unit: '×',
        runs: ratios,
        target: 'flat (≤ 2×)',
        met: median(ratios) <= 2,
      });
      const hotRatios = r.hot.map((v, i) => v / perSize.get(smallest)!.hot[i]!);
      figures.push({
        section: 'planner',
        name: `plan cost ${label} ÷ ${smallest.toLocaleString('en-US')} pairs, the same 10 pods (cache-hot)`,
        value: median(hotRatios),
        unit: '×',
        runs: hotRatios,
      });
    }
  }
  for (const size of opts.sizes) {
    const r = perSize.get(size)!;
    const label = `${size.toLocaleString('en-US')} pairs`;
    figures.push({
      section: 'planner',
      name: `heap per pair, whole world, ${label}`,
      value: median(r.bytes),
      unit: 'B',
      runs: r.bytes,
      target: `< ${kubeletHeapBytesPerPairMax} B`,
      met: median(r.bytes) < kubeletHeapBytesPerPairMax,
    });
  }
  const largest = opts.sizes[opts.sizes.length - 1]!;
  const rl = perSize.get(largest)!;
  figures.push({
    section: 'planner',
    name: `heap per pair, the pair records alone, ${largest.toLocaleString('en-US')} pairs`,
    value: median(rl.pairBytes),
    unit: 'B',
    runs: rl.pairBytes,
    note: 'attachment and mount records with their machine states; pods, objects and desired state excluded',
  });
  return {
    section: 'planner',
    figures,
    details: {
      samplesPerRun: 2_000,
      pairDefinition:
        'an attachment or a mount record; N pairs = N/2 pods with one mounted disk each',
    },
  };
}
