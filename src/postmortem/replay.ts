/**
 * Replay: the world at any moment of a log, as a plain description (what `vole replay`
 * prints), and the difference between two moments (`vole diff`).
 */
import type { VoleEvent } from '../events/index.js';
import { fold, getVolumesInUse, initialWorld } from '../kubelet/index.js';
import type { World } from '../kubelet/types.js';
import type { OperationBook } from '../operations/types.js';
import { podEntries } from '../kubelet/by-pod.js';

export interface Moment {
  /** Replay up to and including this seq. */
  readonly atSeq?: number;
  /** Replay every event with a timestamp at or before this. */
  readonly atTsMs?: number;
}

/** Folds the events up to the moment (the whole log when no moment is given). */
export function replayTo(
  events: Iterable<VoleEvent>,
  moment: Moment = {},
  world: World = initialWorld(),
): World {
  for (const event of events) {
    if (moment.atSeq !== undefined && event.seq > moment.atSeq) break;
    if (moment.atTsMs !== undefined && event.tsMs > moment.atTsMs) break;
    if (event.seq <= world.seq) continue; // already in the snapshot the world came from
    fold(world, event);
  }
  return world;
}

/** What a node's status says, as the controller's world holds it (controller logs). */
import { type ClaimView, persistentVolumes, type PvView } from '../binding/claims-view.js';
import { claimViews } from '../kubelet/provisioning.js';

export interface NodeView {
  readonly node: string;
  readonly exists: boolean;
  readonly ready: boolean;
  readonly outOfService: boolean;
  /** node.status.volumesInUse as the node reported it. */
  readonly volumesInUse: string[];
  /** node.status.volumesAttached as the controller publishes it. */
  readonly volumesAttached: { name: string; devicePath: string }[];
}

export type { ClaimView, PvView };

export interface WorldView {
  /** The core that wrote the log: a kubelet's world, or the controller's. */
  readonly mode: 'kubelet' | 'controller';
  readonly seq: number;
  readonly tsMs: number;
  /** What the world is of, for headings: "node n1, controllerAttachDetach=…", or the controller. */
  readonly title: string;
  /** A kubelet's: its node, whether a controller attaches, whether its sources are ready. */
  readonly node?: string;
  readonly controllerAttachDetach?: boolean;
  readonly sourcesReady?: boolean;
  readonly pods: {
    uid: string;
    name: string;
    namespace: string;
    volumes: string[];
    errors: string[];
  }[];
  readonly attachments: {
    volume: string;
    node: string;
    state: string;
    devicePath: string;
    deviceMountPath: string;
  }[];
  readonly mounts: {
    volume: string;
    pod: string;
    outerVolumeSpecName: string;
    state: string;
    remountRequired: boolean;
  }[];
  readonly operations: {
    opId: string;
    op: string;
    volume: string;
    pod: string | null;
    /** The node it acts on (attach and detach; null for a pod's mount). */
    node: string | null;
    call: string | null;
    startedSeq: number;
  }[];
  readonly backoffs: {
    volume: string;
    op: string;
    pod: string;
    node: string;
    retryAtMs: number;
    durationMs: number;
    lastError: string | null;
  }[];
  /** node.status.volumesInUse the node reports (absent: a world of no one node, the controller's). */
  readonly volumesInUse?: string[];
  /** Each node's status (absent: a world of one node, a kubelet's). */
  readonly nodes?: NodeView[];
  /** PersistentVolumes with their phase (kubelet logs: the agent binds and provisions). */
  readonly pvs: PvView[];
  /** Claims: bound, or where binding and provisioning stand. */
  readonly claims: ClaimView[];
}

const byVolume = <T extends { volume: string }>(a: T, b: T) => a.volume.localeCompare(b.volume);

/** The operations in flight and the backoffs of an operation book. */
export function describeBook(world: OperationBook): Pick<WorldView, 'operations' | 'backoffs'> {
  return {
    operations: [...world.running.values()]
      .map((o) => ({
        opId: o.opId,
        op: o.op,
        volume: o.volume,
        pod: o.pod,
        node: o.node,
        call: o.call,
        startedSeq: o.startedSeq,
      }))
      .sort((a, b) => a.startedSeq - b.startedSeq),
    backoffs: [...world.ops.values()]
      .flat()
      .filter((r) => !r.pending)
      .map((r) => ({
        volume: r.key.volume,
        op: r.opName,
        pod: r.key.pod,
        node: r.key.node,
        retryAtMs: r.lastErrorTsMs + r.durationMsBeforeRetry,
        durationMs: r.durationMsBeforeRetry,
        lastError: r.lastError?.message ?? null,
      }))
      .sort(byVolume),
  };
}

/** A plain, sorted, JSON-ready description of a kubelet's world. */
export function describeWorld(world: World): WorldView {
  return {
    mode: 'kubelet',
    seq: world.seq,
    tsMs: world.tsMs,
    title: `node ${world.config.node}, controllerAttachDetach=${world.config.controllerAttachDetach}, sourcesReady=${world.sourcesReady}`,
    node: world.config.node,
    controllerAttachDetach: world.config.controllerAttachDetach,
    sourcesReady: world.sourcesReady,
    pods: [...world.pods.values()]
      .sort((a, b) => a.uid.localeCompare(b.uid))
      .map((p) => ({
        uid: p.uid,
        name: p.name,
        namespace: p.namespace,
        volumes: p.volumes.map((v) => `${v.outerVolumeSpecName}=${v.volume}`),
        errors: [...p.errors.values()],
      })),
    attachments: [...world.attachments.values()]
      .map((a) => ({
        volume: a.volume,
        node: a.node,
        state: a.value,
        devicePath: a.context.devicePath,
        deviceMountPath: a.context.deviceMountPath,
      }))
      .sort(byVolume),
    mounts: [...world.mounts.values()]
      .flatMap((m) => [...podEntries(m)])
      .map((m) => ({
        volume: m.volume,
        pod: m.pod,
        outerVolumeSpecName: m.context.outerVolumeSpecName,
        state: m.value,
        remountRequired: m.context.remountRequired,
      }))
      .sort((a, b) => byVolume(a, b) || a.pod.localeCompare(b.pod)),
    ...describeBook(world),
    volumesInUse: getVolumesInUse(world),
    pvs: persistentVolumes(world),
    claims: claimViews(world),
  };
}

export interface WorldDiff {
  readonly from: number;
  readonly to: number;
  readonly changes: { what: string; before: string | null; after: string | null }[];
}

/** A wall-clock time as an offset from the log's first event (`+1.5s`). */
function offsetText(tsMs: number, originMs: number): string {
  return `+${((tsMs - originMs) / 1000).toFixed(3).replace(/\.?0+$/, '')}s`;
}

function entries(view: WorldView, originMs: number): Map<string, string> {
  const map = new Map<string, string>();
  for (const p of view.pods)
    map.set(
      `pod ${p.uid}`,
      `${p.namespace}/${p.name} [${p.volumes.join(' ')}]${p.errors.length > 0 ? ` errors: ${p.errors.join('; ')}` : ''}`,
    );
  for (const a of view.attachments) map.set(`attachment ${a.volume}@${a.node}`, a.state);
  for (const m of view.mounts) map.set(`mount ${m.volume} × pod ${m.pod}`, m.state);
  for (const o of view.operations)
    map.set(
      `operation ${o.opId}`,
      `${o.op} ${o.volume}${o.call === null ? '' : ` (in ${o.call})`}`,
    );
  for (const b of view.backoffs)
    map.set(
      `backoff ${b.op} ${b.volume}${b.pod === '' ? '' : ` pod ${b.pod}`}`,
      `until ${offsetText(b.retryAtMs, originMs)} (backoff ${b.durationMs} ms)`,
    );
  if (view.volumesInUse !== undefined) map.set('volumesInUse', `[${view.volumesInUse.join(' ')}]`);
  for (const pv of view.pvs ?? [])
    map.set(
      `pv ${pv.name}`,
      `${pv.phase}${pv.claim === null ? '' : ` ${pv.claim}`} ${pv.capacityBytes ?? '?'} bytes`,
    );
  for (const c of view.claims ?? []) map.set(`claim ${c.claim}`, `${c.state}: ${c.detail}`);
  for (const n of view.nodes ?? []) {
    map.set(`node ${n.node} volumesInUse`, `[${n.volumesInUse.join(' ')}]`);
    map.set(
      `node ${n.node} volumesAttached`,
      `[${n.volumesAttached.map((v) => v.name).join(' ')}]`,
    );
    map.set(
      `node ${n.node}`,
      `${n.exists ? '' : 'deleted, '}${n.ready ? 'ready' : 'not ready'}${n.outOfService ? ', out of service' : ''}`,
    );
  }
  return map;
}

/** What changed between two worlds: every entry added, removed or changed. */
/** `originMs`: the log's first event's time, from which retry times are shown as offsets. */
export function diffWorlds(a: WorldView, b: WorldView, originMs = 0): WorldDiff {
  const before = entries(a, originMs);
  const after = entries(b, originMs);
  const changes = [...new Set([...before.keys(), ...after.keys()])]
    .sort()
    .filter((k) => before.get(k) !== after.get(k))
    .map((what) => ({ what, before: before.get(what) ?? null, after: after.get(what) ?? null }));
  return { from: a.seq, to: b.seq, changes };
}
