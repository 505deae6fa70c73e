/**
 * History: the transitions of pairs over a log, with timestamps, operations, outcomes and
 * errors — what `vole history` prints. Computed by folding, so it shows exactly the
 * states the engine had.
 */
import { type EventOf, provisionCallNames, type VoleEvent } from '../events/index.js';
import { persistentVolumes, type PvWorld } from '../binding/claims-view.js';
import { OpId, UniqueVolumeName } from '../ids.js';
import type { World } from '../kubelet/types.js';
import { type LogWorld, logWorld, peekCore } from './log-world.js';
import { describeNodeOperation, NodeLogView } from './node-ops.js';

export interface Transition {
  readonly seq: number;
  readonly tsMs: number;
  /**
   * `attachment` (volume × node), `mount` (volume × pod), `persistentVolume` (a PV's
   * phase, `none` before it exists and after it is deleted; `volume` is the PV's name), or
   * `filesystem` (the volume's filesystem on the node, grown by NodeExpandVolume: `N bytes`,
   * `expanding to N bytes` while the call runs; `pod` is the mounting pod's, if a mount
   * expands). The node's expansion moves no attachment or mount, so only this tells it.
   */
  readonly pair: 'attachment' | 'mount' | 'persistentVolume' | 'filesystem';
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
      return UniqueVolumeName(event.volume);
    case 'CallStarted':
    case 'CallSucceeded':
    case 'CallFailed':
    case 'OperationFinished':
      return world.running.get(OpId(event.opId))?.volume;
    default:
      return undefined;
  }
}

/** The PV controller's decisions left to an external provisioner. */
function describeExternal(
  event: EventOf<'ExternalProvisioningRequested' | 'VolumeReleased'>,
): string {
  if (event.type === 'VolumeReleased')
    return `PersistentVolume ${event.pv} Released: its claim is gone (cause: seq ${event.cause})`;
  const node = event.selectedNode === undefined ? '' : `, selected node ${event.selectedNode}`;
  return (
    `claim ${event.namespace}/${event.claim} left to the external provisioner ` +
    `${event.provisioner}${node} (cause: seq ${event.cause})`
  );
}

function rpcNote(rpc: { method: string; code: string; durationMs: number } | undefined): string {
  return rpc === undefined ? '' : ` [${rpc.method} ${rpc.code} ${rpc.durationMs.toFixed(1)} ms]`;
}

/** A CSI driver's (de)registration, and the facts only a recorded log holds. */
function describeDriverOrRecorded(
  event: EventOf<
    | 'CsiDriverRegistered'
    | 'CsiDriverDeregistered'
    | 'CSINodeObserved'
    | 'KubeEventObserved'
    | 'NodeOperationObserved'
  >,
): string {
  switch (event.type) {
    case 'NodeOperationObserved':
      return describeNodeOperation(event);
    case 'CsiDriverRegistered':
      return `CSI driver ${event.driver} registered at ${event.endpoint} (node ${event.nodeId}; node: ${event.nodeCapabilities.join(' ') || 'none'}; controller: ${event.controllerCapabilities.join(' ') || 'none'})`;
    case 'CsiDriverDeregistered':
      return `CSI driver ${event.driver} gone from ${event.endpoint}: ${event.reason}`;
    case 'CSINodeObserved':
      return event.object === undefined
        ? `CSINode ${event.name} removed`
        : `CSINode ${event.name}: drivers [${(event.object.spec?.drivers ?? []).map((d) => d.name).join(' ')}]`;
    case 'KubeEventObserved':
      return `${event.eventType} ${event.reason} on ${event.involvedObject.kind} ${event.involvedObject.namespace === undefined ? '' : `${event.involvedObject.namespace}/`}${event.involvedObject.name} from ${event.component}${event.host === undefined ? '' : ` on ${event.host}`}: ${event.message}`;
  }
}

/** What a new leader found attached at its start. */
function describeFound(event: EventOf<'AttachmentsFound'>): string {
  return `attachments found at the start of leading: ${
    event.attachments
      .map((a) => `${a.volume} on ${a.node}${a.attached ? '' : ' (not confirmed)'}`)
      .join(', ') || 'none'
  }`;
}

export function describeEvent(event: VoleEvent): string {
  switch (event.type) {
    case 'EngineStarted':
      return event.node === undefined
        ? `engine started (${event.mode ?? 'kubelet'})`
        : `engine started on ${event.node} (controllerAttachDetach=${event.controllerAttachDetach})`;
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
    case 'ClaimBound':
      return `claim ${event.namespace}/${event.claim} bound to PersistentVolume ${event.volume} (cause: seq ${event.cause})`;
    case 'ClaimFinalizerRemoved':
      return (
        `claim ${event.namespace}/${event.claim} released by pvc-protection: no pod uses it ` +
        `(cause: seq ${event.cause})`
      );
    case 'ExternalProvisioningRequested':
    case 'VolumeReleased':
      return describeExternal(event);
    case 'VolumesReportedInUse':
      return `node reported in use: [${event.volumes.join(' ')}]`;
    case 'NodeStatusObserved':
      return `controller lists attached to ${event.node}: [${event.volumesAttached.map((v) => v.name).join(' ')}]`;
    case 'TokensRefreshDue':
      return `service-account tokens of pod ${event.pod} due for refresh`;
    case 'ReportRaised':
      return `${event.reason} on pod ${event.pod}: ${event.message}`;
    case 'AttachmentsFound':
      return describeFound(event);
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
    case 'CsiDriverDeregistered':
    case 'CSINodeObserved':
    case 'KubeEventObserved':
    case 'NodeOperationObserved':
      return describeDriverOrRecorded(event);
    case 'OperationFinished':
      return `${event.opId} finished: ${event.outcome}${event.error ? ` (${event.error.message})` : ''}`;
    case 'OperatorRequested':
      return `operator asked to ${event.action} ${event.volume}${event.pod === undefined ? '' : ` of pod ${event.pod}`}${event.node === undefined ? '' : ` on ${event.node}`}${event.force ? ' (forced)' : ''}: ${event.reason}`;
    case 'OperatorRequestDecided':
      return `operator request seq ${event.requestSeq} ${event.verdict}: ${event.message}`;
  }
}

function matches(t: Transition, filter: HistoryFilter): boolean {
  if (filter.volume !== undefined && t.volume !== filter.volume) return false;
  if (filter.pod !== undefined && t.pod !== filter.pod) return false;
  if (filter.node !== undefined && t.node !== filter.node) return false;
  if (filter.sinceMs !== undefined && t.tsMs < filter.sinceMs) return false;
  if (filter.untilMs !== undefined && t.tsMs > filter.untilMs) return false;
  return true;
}

/** Every pair transition in the log that passes the filter, in log order (either core). */
export function* history(
  events: Iterable<VoleEvent>,
  filter: HistoryFilter = {},
): Generator<Transition> {
  const peeked = peekCore(events);
  const world = logWorld(peeked.logCore);
  // The nodes' own logs (a recorded log's NodeOperationObserved): their pairs' view.
  const nodeView = new NodeLogView();
  for (const event of peeked.events) {
    const volumeBefore = world.eventVolume(event);
    // Desired-state events and restarts can touch any pair: watch the ones that may move.
    const touched = volumeBefore === undefined ? new Set(world.volumes()) : [volumeBefore];
    const before = new Map([...touched].map((v) => [v, world.pairs(v)]));
    const opId = 'opId' in event ? event.opId : null;
    // PVs are the binder's: the kubelet's in standalone mode, the controller's in cluster mode.
    const phasesBefore = touchesPvs(event) ? pvPhases(world.pvWorld) : undefined;
    const because = describeEvent(event);
    // Read before the fold: a finished NodeExpandVolume sets the size the node knows.
    const grown = filesystemTransition(world, event, because);
    world.fold(event);
    const seen = nodeView.step(event, because);
    if (seen !== undefined && matches(seen, filter)) yield seen;
    const error = event.type === 'CallFailed' ? event.error.message : null;
    if (grown !== undefined && matches(grown, filter)) yield grown;
    if (phasesBefore !== undefined)
      for (const t of pvTransitions(phasesBefore, pvPhases(world.pvWorld), {
        event,
        because,
        node: world.node,
      }))
        if (matches(t, filter)) yield t;
    for (const [volume, old] of before) {
      const now = world.pairs(volume);
      for (const id of new Set([...old.keys(), ...now.keys()])) {
        const was = old.get(id);
        const is = now.get(id);
        const pair = (was ?? is)!;
        const initial = pair.pair === 'attachment' ? 'detached' : 'unmounted';
        const from = was?.state ?? initial;
        const to = is?.state ?? initial;
        if (from === to) continue;
        const t: Transition = {
          seq: event.seq,
          tsMs: event.tsMs,
          pair: pair.pair,
          volume,
          node: pair.node,
          pod: pair.pod,
          from,
          to,
          because,
          opId,
          error,
        };
        if (matches(t, filter)) yield t;
      }
    }
  }
}

/** A NodeExpandVolume call as the filesystem's change: started, grown, or failed. */
function filesystemTransition(
  world: LogWorld,
  event: VoleEvent,
  because: string,
): Transition | undefined {
  if (event.type !== 'CallStarted' && event.type !== 'CallSucceeded' && event.type !== 'CallFailed')
    return undefined;
  if (event.call !== 'nodeExpand') return undefined;
  const at = world.nodeExpansion(event.opId);
  if (at === undefined) return undefined;
  const size = (bytes: number) => (bytes > 0 ? `${bytes} bytes` : 'size unknown');
  const expanding = `expanding to ${size(at.toBytes)}`;
  const [from, to] =
    event.type === 'CallStarted'
      ? [size(at.fromBytes), expanding]
      : event.type === 'CallSucceeded'
        ? // The size the plugin reported, when it reported one.
          [expanding, size(event.sizeBytes || at.toBytes)]
        : [expanding, size(at.fromBytes)];
  return {
    seq: event.seq,
    tsMs: event.tsMs,
    pair: 'filesystem',
    volume: at.volume,
    node: at.node,
    pod: at.pod,
    from,
    to,
    because,
    opId: event.opId,
    error: event.type === 'CallFailed' ? event.error.message : null,
  };
}

/** Events that may change a PV's phase (the others are not worth a walk of the PVs). */
function touchesPvs(event: VoleEvent): boolean {
  switch (event.type) {
    case 'ObjectUpserted':
      return ['PersistentVolume', 'PersistentVolumeClaim'].includes(event.object.kind);
    case 'ObjectRemoved':
      return event.kind === 'PersistentVolume' || event.kind === 'PersistentVolumeClaim';
    case 'ClaimBound':
    case 'ClaimFinalizerRemoved':
    case 'VolumeReleased':
      return true;
    case 'CallSucceeded':
      return (provisionCallNames as readonly string[]).includes(event.call);
    default:
      return false;
  }
}

function pvPhases(world: PvWorld): Map<string, string> {
  return new Map(
    persistentVolumes(world).map((pv) => {
      const size = pv.capacityBytes === null ? '' : ` ${pv.capacityBytes} bytes`;
      return [pv.name, `${pv.phase}${size}`];
    }),
  );
}

function* pvTransitions(
  before: Map<string, string>,
  after: Map<string, string>,
  at: { event: VoleEvent; because: string; node: string },
): Generator<Transition> {
  for (const name of new Set([...before.keys(), ...after.keys()])) {
    const from = before.get(name) ?? 'none';
    const to = after.get(name) ?? 'none';
    if (from === to) continue;
    yield {
      seq: at.event.seq,
      tsMs: at.event.tsMs,
      pair: 'persistentVolume',
      volume: name,
      node: at.node,
      pod: null,
      from,
      to,
      because: at.because,
      opId: 'opId' in at.event ? at.event.opId : null,
      error: null,
    };
  }
}
