/**
 * A log's world for readers, whatever core wrote it: the core comes from the log's
 * EngineStarted.mode (src/engine/cores.ts), and every reader — status, replay, diff,
 * history, the inspector — folds and describes through this one interface.
 */
import { controllerClaimViews, controllerPvViews } from '../controller/provisioning.js';
import {
  attachmentAt,
  allAttachments,
  type ControllerWorld,
  volumesOf,
} from '../controller/types.js';
import type { Core, CoreOperation, CoreWorld } from '../engine/core.js';
import {
  type AnyCore,
  byCore,
  controllerCore,
  coreOfLog,
  coreOfMode,
  kubeletCore,
  type LogCore,
} from '../engine/cores.js';
import type { VoleEvent } from '../events/index.js';
import { NodeName, OpId, UniqueVolumeName } from '../ids.js';
import type { PvWorld } from '../binding/claims-view.js';
import type { World } from '../kubelet/types.js';
import { why, type WhyAnswer } from './why.js';
import { controllerWhy } from './why-controller.js';
import { describeBook, describeWorld, type WorldView } from './replay.js';
import { podEntries } from '../kubelet/by-pod.js';
import { valuesOf } from '../desired/one-or-many.js';

/** One pair's state: an attachment (volume × node) or a mount (volume × pod). */
export interface PairState {
  readonly pair: 'attachment' | 'mount';
  readonly volume: string;
  readonly node: string;
  readonly pod: string | null;
  readonly state: string;
}

/**
 * A NodeExpandVolume call's operation as a kubelet log's world has it while the call runs:
 * the filesystem it grows (volume × node, and the pod when a mount expands) and the sizes,
 * as the planner read them (plan.ts expansionDuringMount and the fsResizeRequired case).
 */
export interface NodeExpansionAt {
  readonly volume: string;
  readonly node: string;
  readonly pod: string | null;
  /** The size the node knows the filesystem has (the claim's when it knows none). */
  readonly fromBytes: number;
  /** The PersistentVolume's size: what the expansion grows the filesystem to. */
  readonly toBytes: number;
}

export interface LogWorld {
  readonly mode: 'kubelet' | 'controller';
  readonly seq: number;
  readonly tsMs: number;
  /** The node a kubelet log is about ('' for the controller's, which is no node). */
  readonly node: string;
  /** What the log is about, for headings: "node n1", or "the attach/detach controller". */
  readonly title: string;
  /** The world the PersistentVolumes' phases are read from (both cores keep them). */
  readonly pvWorld: PvWorld;
  fold(event: VoleEvent): void;
  describe(): WorldView;
  /** `vole why`: what a pod's volumes, a claim or a volume waits on (undefined: not there). */
  why(subject: string): WhyAnswer | undefined;
  /** The volume an event is about, if it names one (operation events through their opId). */
  eventVolume(event: VoleEvent): string | undefined;
  /** Every volume that has a pair. */
  volumes(): Iterable<string>;
  /** The pairs of one volume that are not in their initial state, by pair id. */
  pairs(volume: string): Map<string, PairState>;
  /** The node expansion an operation runs (undefined: none; the controller runs none). */
  nodeExpansion(opId: string): NodeExpansionAt | undefined;
}

function opVolume(world: CoreWorld, event: VoleEvent): string | undefined {
  switch (event.type) {
    case 'OperationStarted':
      return event.volume;
    case 'CallStarted':
    case 'CallSucceeded':
    case 'CallFailed':
    case 'OperationFinished':
      for (const op of world.running.values()) if (op.opId === event.opId) return op.volume;
      return undefined;
    default:
      return undefined;
  }
}

function attachmentState(a: { volume: string; node: string; value: string }): PairState {
  return { pair: 'attachment', volume: a.volume, node: a.node, pod: null, state: a.value };
}

function kubeletLogWorld(world: World): LogWorld {
  return {
    mode: 'kubelet',
    get seq() {
      return world.seq;
    },
    get tsMs() {
      return world.tsMs;
    },
    get node() {
      return world.config.node;
    },
    get title() {
      return `node ${world.config.node || '?'}`;
    },
    pvWorld: world,
    why: (subject) => why(world, subject),
    fold: (event) => void kubeletCore.fold(world, event),
    describe: () => describeWorld(world),
    eventVolume: (event) => opVolume(world, event),
    volumes: () => new Set([...world.attachments.keys(), ...world.mounts.keys()]),
    pairs(volume) {
      const out = new Map<string, PairState>();
      const a = world.attachments.get(UniqueVolumeName(volume));
      if (a !== undefined) {
        const pair = {
          pair: 'attachment',
          volume,
          node: a.node,
          pod: null,
          state: a.value,
        } as const;
        out.set(`attachment|${a.node}`, pair);
      }
      for (const m of podEntries(world.mounts.get(UniqueVolumeName(volume)))) {
        const state = m.value;
        out.set(`mount|${m.pod}`, {
          pair: 'mount',
          volume,
          node: world.config.node,
          pod: m.pod,
          state,
        });
      }
      return out;
    },
    nodeExpansion(opId) {
      const op = world.running.get(OpId(opId));
      if (op === undefined || op.spec === null) return undefined;
      const known = world.attachments.get(op.volume)?.context.sizeBytes ?? 0;
      return {
        volume: op.volume,
        node: world.config.node,
        pod: op.pod,
        fromBytes: known || op.spec.traits.claimSizeBytes,
        toBytes: op.spec.traits.sizeBytes,
      };
    },
  };
}

const controllerTitle = 'the attach/detach controller';

/** A plain, sorted, JSON-ready description of the controller's world. */
export function describeControllerWorld(world: ControllerWorld): WorldView {
  const byKey = <T extends { volume: string; node: string }>(x: T, y: T) =>
    x.volume.localeCompare(y.volume) || x.node.localeCompare(y.node);
  return {
    mode: 'controller',
    seq: world.seq,
    tsMs: world.tsMs,
    title: controllerTitle,
    pods: [...world.pods.values()]
      .sort((a, b) => a.uid.localeCompare(b.uid))
      .map((p) => ({
        uid: p.uid,
        name: p.pod.metadata.name,
        namespace: p.pod.metadata.namespace ?? 'default',
        volumes: volumesOf(p.volumes).map((v) => `${v.outerVolumeSpecName}=${v.volume}`),
        errors: p.node === null ? ['not scheduled to a node'] : [],
      })),
    attachments: [...allAttachments(world)]
      .map((a) => ({
        volume: a.volume,
        node: a.node,
        state: a.value,
        devicePath: a.devicePath,
        deviceMountPath: '',
      }))
      .sort(byKey),
    mounts: [],
    ...describeBook(world),
    pvs: controllerPvViews(world),
    claims: controllerClaimViews(world),
    nodes: [...world.nodes.values()]
      .sort((a, b) => a.name.localeCompare(b.name))
      .map((n) => ({
        node: n.name,
        exists: n.exists,
        ready: n.ready,
        outOfService: n.outOfService,
        volumesInUse: [...n.volumesInUse].sort(),
        volumesAttached: [...(world.reported.get(n.name) ?? [])].sort().map((name) => ({
          name,
          devicePath: attachmentAt(world, `${name}@${n.name}`)?.devicePath ?? '',
        })),
      })),
  };
}

function controllerLogWorld(world: ControllerWorld): LogWorld {
  return {
    mode: 'controller',
    get seq() {
      return world.seq;
    },
    get tsMs() {
      return world.tsMs;
    },
    node: '',
    title: controllerTitle,
    pvWorld: world,
    why: (subject) => controllerWhy(world, subject),
    fold: (event) => void controllerCore.fold(world, event),
    describe: () => describeControllerWorld(world),
    eventVolume: (event) => opVolume(world, event),
    volumes: () => world.nodesByVolume.keys(),
    pairs(volume) {
      const out = new Map<string, PairState>();
      for (const node of valuesOf(world.nodesByVolume.get(UniqueVolumeName(volume)))) {
        const a = attachmentAt(world, `${volume}@${NodeName(node)}`);
        if (a !== undefined) out.set(`attachment|${a.node}`, attachmentState(a));
      }
      return out;
    },
    nodeExpansion: () => undefined,
  };
}

/**
 * The world of a log written by `logCore`, from a snapshot when one decodes (a snapshot
 * of another core, or of another V8, does not: the log is replayed from the start).
 */
export function logWorld(logCore: LogCore, snapshot?: { data: Buffer; format: number }): LogWorld {
  return byCore(logCore, {
    kubelet: (core) => kubeletLogWorld(startOf(core, snapshot)),
    controller: (core) => controllerLogWorld(startOf(core, snapshot)),
  });
}

/** A core's world from a snapshot that decodes, else its initial world. */
function startOf<W extends CoreWorld>(
  core: Pick<Core<W, CoreOperation>, 'snapshot' | 'initialWorld'>,
  snapshot: { data: Buffer; format: number } | undefined,
): W {
  return (snapshot && core.snapshot.decode(snapshot.data, snapshot.format)) ?? core.initialWorld();
}

/** Folds `events` up to the moment into `world` (events it already holds are skipped). */
export function replayInto(
  world: LogWorld,
  events: Iterable<VoleEvent>,
  moment: { atSeq?: number; atTsMs?: number } = {},
): LogWorld {
  for (const event of events) {
    if (moment.atSeq !== undefined && event.seq > moment.atSeq) break;
    if (moment.atTsMs !== undefined && event.tsMs > moment.atTsMs) break;
    if (event.seq <= world.seq) continue;
    world.fold(event);
  }
  return world;
}

/**
 * The core a stream of events names, and the same stream from its start (the events read
 * to find the mode are handed out again first).
 */
export function peekCore(events: Iterable<VoleEvent>): {
  logCore: LogCore;
  events: Iterable<VoleEvent>;
} {
  const iterator = events[Symbol.iterator]();
  const first: VoleEvent[] = [];
  for (let i = 0; i < 16; i++) {
    const step = iterator.next();
    if (step.done === true) break;
    first.push(step.value);
    if (step.value.type === 'EngineStarted') break;
  }
  const logCore = coreOfLog(first);
  function* all(): Generator<VoleEvent> {
    yield* first;
    for (let step = iterator.next(); step.done !== true; step = iterator.next()) yield step.value;
  }
  return { logCore, events: all() };
}

/** What the readers need of a log store (src/log's EventStore has it). */
export interface ReadableLog {
  read(opts?: { fromSeq?: number; toSeq?: number; limit?: number }): Iterable<VoleEvent>;
  latestSnapshot(opts?: { atOrBeforeSeq?: number }): { data: Buffer; format: number } | undefined;
  /** The core that wrote it, when the log knows (the controller log in etcd, compacted or not). */
  readonly mode?: string;
}

/** The core the log's first EngineStarted names (UnknownModeError for an unknown mode). */
export function coreOfStore(store: ReadableLog): LogCore {
  if (store.mode !== undefined) return coreOfMode(store.mode);
  return coreOfLog(store.read({ limit: 16 }));
}

/**
 * The world of the log at `seq`: from the latest usable snapshot at or before it, plus
 * the events after. `wrap` may watch the events read (a progress line).
 */
export function worldOfLogAt(
  store: ReadableLog,
  seq: number,
  wrap: (events: Iterable<VoleEvent>, fromSeq: number) => Iterable<VoleEvent> = (e) => e,
): LogWorld {
  const world = logWorld(coreOfStore(store), store.latestSnapshot({ atOrBeforeSeq: seq }));
  const from = world.seq + 1;
  return replayInto(world, wrap(store.read({ fromSeq: from, toSeq: seq }), from));
}

/**
 * The folded world of either core at `seq` (for readers that fold on from it: metrics),
 * from the latest snapshot of that core at or before it, plus the events after.
 */
export function coreWorldAt(
  core: AnyCore,
  store: ReadableLog,
  seq: number,
  wrap: (events: Iterable<VoleEvent>, fromSeq: number) => Iterable<VoleEvent> = (e) => e,
): CoreWorld {
  const snapshot = store.latestSnapshot({ atOrBeforeSeq: seq });
  let world =
    (snapshot && core.snapshot.decode(snapshot.data, snapshot.format)) ?? core.initialWorld();
  const from = world.seq + 1;
  for (const event of wrap(store.read({ fromSeq: from, toSeq: seq }), from))
    world = core.fold(world, event);
  return world;
}
