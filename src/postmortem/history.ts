/**
 * History: the transitions of pairs over a log, with timestamps, operations, outcomes and
 * errors — what `vole history` prints. Computed by folding, so it shows exactly the
 * states the engine had.
 */
import type { VoleEvent } from '../events/index.js';
import type { UniqueVolumeName } from '../ids.js';
import { fold, initialWorld } from '../world/index.js';
import type { World } from '../world/types.js';

export interface Transition {
  readonly seq: number;
  readonly tsMs: number;
  /** `attachment` (volume × node) or `mount` (volume × pod). */
  readonly pair: 'attachment' | 'mount';
  readonly volume: string;
  readonly node: string;
  readonly pod: string | null;
  readonly from: string;
  readonly to: string;
  /** The event that made the change, in words. */
  readonly because: string;
  readonly opId: string | null;
  readonly error: string | null;
}

export interface HistoryFilter {
  readonly volume?: string;
  readonly pod?: string;
  readonly node?: string;
  readonly sinceMs?: number;
  readonly untilMs?: number;
}

/** The volume an event is about, if it is about one (operations name it through opId). */
export function eventVolume(world: World, event: VoleEvent): UniqueVolumeName | undefined {
  switch (event.type) {
    case 'OperationStarted':
      return event.volume as UniqueVolumeName;
    case 'CallStarted':
    case 'CallSucceeded':
    case 'CallFailed':
    case 'OperationFinished':
      return world.running.get(event.opId as never)?.volume;
    default:
      return undefined;
  }
}

function rpcNote(rpc: { method: string; code: string; durationMs: number } | undefined): string {
  return rpc === undefined ? '' : ` [${rpc.method} ${rpc.code} ${rpc.durationMs.toFixed(1)} ms]`;
}

export function describeEvent(event: VoleEvent): string {
  switch (event.type) {
    case 'EngineStarted':
      return `engine started on ${event.node} (controllerAttachDetach=${event.controllerAttachDetach})`;
    case 'SourcesReady':
      return 'pod sources ready';
    case 'PodUpserted':
      return `pod ${event.pod.metadata.namespace ?? 'default'}/${event.pod.metadata.name} (${event.pod.metadata.uid}) added or updated`;
    case 'PodRemoved':
      return `pod ${event.uid} removed`;
    case 'ObjectUpserted':
      return `${event.object.kind} ${event.object.metadata.name} added or updated`;
    case 'ObjectRemoved':
      return `${event.kind} ${event.name} removed`;
    case 'VolumesReportedInUse':
      return `node reported in use: [${event.volumes.join(' ')}]`;
    case 'NodeStatusObserved':
      return `controller lists attached to ${event.node}: [${event.volumesAttached.map((v) => v.name).join(' ')}]`;
    case 'ReportRaised':
      return `${event.reason} on pod ${event.pod}: ${event.message}`;
    case 'AttachmentsVerified':
      return `attachments on ${event.node} verified: ${
        event.volumes
          .filter((v) => !v.attached)
          .map((v) => v.name)
          .join(' ') || 'all present'
      }${event.volumes.some((v) => !v.attached) ? ' gone' : ''}`;
    case 'HostObserved':
      return `host checked: ${event.attachments.length + event.mounts.length} uncertain pair(s)`;
    case 'OperationStarted':
      return `${event.op}${event.remount === true ? ' (remount)' : ''} started as ${event.opId} (cause: seq ${event.cause})`;
    case 'CallStarted':
      return `${event.call} called (${event.opId})`;
    case 'CallSucceeded':
      return `${event.call} succeeded (${event.opId})${rpcNote(event.rpc)}`;
    case 'CallFailed':
      return `${event.call} failed, ${event.error.kind} (${event.opId}): ${event.error.message}${rpcNote(event.rpc)}`;
    case 'CsiDriverRegistered':
      return `CSI driver ${event.driver} registered at ${event.endpoint} (node ${event.nodeId}; node: ${event.nodeCapabilities.join(' ') || 'none'}; controller: ${event.controllerCapabilities.join(' ') || 'none'})`;
    case 'CsiDriverDeregistered':
      return `CSI driver ${event.driver} gone from ${event.endpoint}: ${event.reason}`;
    case 'OperationFinished':
      return `${event.opId} finished: ${event.outcome}${event.error ? ` (${event.error.message})` : ''}`;
    case 'OperatorRequested':
      return `operator asked to ${event.action} ${event.volume}${event.pod === undefined ? '' : ` of pod ${event.pod}`}${event.node === undefined ? '' : ` on ${event.node}`}${event.force ? ' (forced)' : ''}: ${event.reason}`;
    case 'OperatorRequestDecided':
      return `operator request seq ${event.requestSeq} ${event.verdict}: ${event.message}`;
  }
}

interface PairStates {
  attachment: string;
  mounts: Map<string, string>;
}

function statesOf(world: World, volume: UniqueVolumeName): PairStates {
  return {
    attachment: world.attachments.get(volume)?.state.value ?? 'detached',
    mounts: new Map(
      [...(world.mounts.get(volume) ?? new Map()).values()].map((m) => [m.pod, m.state.value]),
    ),
  };
}

function matches(t: Transition, filter: HistoryFilter): boolean {
  if (filter.volume !== undefined && t.volume !== filter.volume) return false;
  if (filter.pod !== undefined && t.pod !== filter.pod) return false;
  if (filter.node !== undefined && t.node !== filter.node) return false;
  if (filter.sinceMs !== undefined && t.tsMs < filter.sinceMs) return false;
  if (filter.untilMs !== undefined && t.tsMs > filter.untilMs) return false;
  return true;
}

/** Every pair transition in the log that passes the filter, in log order. */
export function* history(
  events: Iterable<VoleEvent>,
  filter: HistoryFilter = {},
): Generator<Transition> {
  const world = initialWorld();
  for (const event of events) {
    const volumeBefore = eventVolume(world, event);
    const touched = new Set<UniqueVolumeName>(volumeBefore === undefined ? [] : [volumeBefore]);
    // Desired-state events and restarts can touch any pair: watch the ones that may move.
    if (volumeBefore === undefined) for (const v of world.attachments.keys()) touched.add(v);
    if (volumeBefore === undefined) for (const v of world.mounts.keys()) touched.add(v);
    const before = new Map([...touched].map((v) => [v, statesOf(world, v)]));
    const opId = 'opId' in event ? event.opId : null;
    fold(world, event);
    const error = event.type === 'CallFailed' ? event.error.message : null;
    for (const [volume, old] of before) {
      const now = statesOf(world, volume);
      const base = {
        seq: event.seq,
        tsMs: event.tsMs,
        volume,
        node: world.config.node,
        because: describeEvent(event),
        opId,
        error,
      };
      if (old.attachment !== now.attachment) {
        const t: Transition = {
          ...base,
          pair: 'attachment',
          pod: null,
          from: old.attachment,
          to: now.attachment,
        };
        if (matches(t, filter)) yield t;
      }
      for (const pod of new Set([...old.mounts.keys(), ...now.mounts.keys()])) {
        const from = old.mounts.get(pod) ?? 'unmounted';
        const to = now.mounts.get(pod) ?? 'unmounted';
        if (from === to) continue;
        const t: Transition = { ...base, pair: 'mount', pod, from, to };
        if (matches(t, filter)) yield t;
      }
    }
  }
}
