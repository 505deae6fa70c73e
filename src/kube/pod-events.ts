/**
 * Events on pods with the kubelet's reasons and messages, from what the log records: a
 * failed plugin call of a pod's operation, a volume a pod cannot use, a finished expansion.
 * `podEventOf` is pure; `EventRecorder` writes core/v1 Events as Kubernetes' event
 * recorder does (one object per involved object, reason and message; a repeat raises its
 * count), for pods and for claims (src/kube/claim-events.ts).
 */
import type { Logger } from 'pino';
import type { VoleEvent } from '../events/index.js';
import { UniquePodName } from '../ids.js';
import type { World } from '../kubelet/types.js';
import type { Clock } from '../clock.js';
import { KubeApiError, type KubeTransport } from './http.js';

/** The object an Event is about (its involvedObject). */
export interface InvolvedObject {
  readonly kind: 'Pod' | 'PersistentVolumeClaim';
  readonly uid: string;
  readonly name: string;
  readonly namespace: string;
}

export interface KubeEvent {
  readonly object: InvolvedObject;
  readonly type: 'Normal' | 'Warning';
  readonly reason: string;
  readonly message: string;
}

/** The kubelet's operation names and event reasons, by vole's failed call. */
const failedCalls: Partial<Record<string, { operation: string; reason: string }>> = {
  attach: { operation: 'AttachVolume.Attach', reason: 'FailedAttachVolume' },
  waitForAttach: { operation: 'MountVolume.WaitForAttach', reason: 'FailedMount' },
  mountDevice: { operation: 'MountVolume.MountDevice', reason: 'FailedMount' },
  setUp: { operation: 'MountVolume.SetUp', reason: 'FailedMount' },
  setUpDevice: { operation: 'MapVolume.SetUpDevice', reason: 'FailedMapVolume' },
  mapPodDevice: { operation: 'MapVolume.MapPodDevice', reason: 'FailedMapVolume' },
  nodeExpand: { operation: 'MountVolume.NodeExpandVolume', reason: 'FileSystemResizeFailed' },
};

/** An operation's pod and volume, remembered from its OperationStarted. */
export interface StartedOperation {
  readonly pod: string | undefined;
  readonly volume: string;
}

/** The pod's name for a volume (its outer volume spec name), as the kubelet's messages use. */
function outerName(world: World, podUid: string, volume: string): string {
  const record = world.pods.get(UniquePodName(podUid));
  const resolved = record?.volumes.find((v) => v.volume === volume);
  return resolved?.outerVolumeSpecName ?? volume;
}

function podOf(world: World, uid: string | undefined): InvolvedObject | undefined {
  if (uid === undefined) return undefined;
  const record = world.pods.get(UniquePodName(uid));
  if (record === undefined) return undefined;
  return { kind: 'Pod', uid, name: record.name, namespace: record.namespace };
}

/**
 * The Event the kubelet would record for this log event, or undefined. `operations` holds
 * the operations started so far by opId (the caller keeps it from OperationStarted events).
 */
export function podEventOf(
  event: VoleEvent,
  world: World,
  operations: ReadonlyMap<string, StartedOperation>,
): KubeEvent | undefined {
  if (event.type !== 'CallFailed' && event.type !== 'CallSucceeded') return undefined;
  const started = operations.get(event.opId);
  const object = podOf(world, started?.pod);
  if (started === undefined || object === undefined) return undefined;
  const volume = outerName(world, object.uid, started.volume);
  if (event.type === 'CallSucceeded') {
    if (event.call !== 'nodeExpand') return undefined;
    const message = `MountVolume.NodeExpandVolume succeeded for volume "${volume}"`;
    return { object, type: 'Normal', reason: 'VolumeResizeSuccessful', message };
  }
  const failed = failedCalls[event.call];
  if (failed === undefined) return undefined;
  // vole's own messages may already name the operation ("MountVolume.SetUp failed: …").
  const prefix = `${failed.operation} failed: `;
  const error = event.error.message.startsWith(prefix)
    ? event.error.message.slice(prefix.length)
    : event.error.message;
  const message = `${failed.operation} failed for volume "${volume}" : ${error}`;
  return { object, type: 'Warning', reason: failed.reason, message };
}

/** A volume of the pod that cannot be processed (a missing claim, object, driver). */
export function podErrorEvents(world: World, uid: string): KubeEvent[] {
  const object = podOf(world, uid);
  const record = world.pods.get(UniquePodName(uid));
  if (object === undefined || record === undefined) return [];
  return [...record.errors].map(([volume, error]) => ({
    object,
    type: 'Warning' as const,
    reason: 'FailedMount',
    message: `MountVolume.SetUp failed for volume "${volume}" : ${error}`,
  }));
}

/** Writes Events; the same (object, reason, message) again raises the count of its Event. */
export class EventRecorder {
  private readonly written = new Map<string, { name: string; count: number }>();
  private serial = 0;

  constructor(
    private readonly opts: {
      http: KubeTransport;
      clock: Clock;
      node: string;
      logger: Logger;
      component: string;
    },
  ) {}

  async record(event: KubeEvent): Promise<void> {
    const key = `${event.object.uid}\u0000${event.reason}\u0000${event.message}`;
    const nowMs = this.opts.clock.nowMs();
    const nowIso = new Date(nowMs).toISOString();
    const base = `/api/v1/namespaces/${event.object.namespace}/events`;
    const known = this.written.get(key);
    try {
      if (known !== undefined) {
        known.count += 1;
        await this.opts.http.patch(
          `${base}/${known.name}`,
          { count: known.count, lastTimestamp: nowIso },
          'merge',
        );
        return;
      }
      const name = `${event.object.name}.${nowMs.toString(16)}${(this.serial++).toString(16)}`;
      await this.opts.http.post(base, this.eventObject(event, name, nowIso));
      this.written.set(key, { name, count: 1 });
    } catch (error) {
      // Events are best effort, as the kubelet's recorder: the log holds the facts.
      if (error instanceof KubeApiError && error.statusCode === 404) this.written.delete(key);
      this.opts.logger.warn({ err: error, reason: event.reason }, 'cannot write an Event');
    }
  }

  private eventObject(event: KubeEvent, name: string, nowIso: string): object {
    const { object } = event;
    return {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { name, namespace: object.namespace },
      involvedObject: {
        apiVersion: 'v1',
        kind: object.kind,
        name: object.name,
        namespace: object.namespace,
        uid: object.uid,
      },
      reason: event.reason,
      message: event.message,
      type: event.type,
      count: 1,
      firstTimestamp: nowIso,
      lastTimestamp: nowIso,
      source: { component: this.opts.component, host: this.opts.node },
      reportingComponent: this.opts.component,
      reportingInstance: this.opts.node,
    };
  }
}
