/**
 * Events on pods with the kubelet's reasons and messages, from what the log records: a
 * failed plugin call of a pod's operation, a volume a pod cannot use, a finished expansion.
 * `podEventOf` is pure; `PodEventRecorder` writes core/v1 Events as the kubelet's event
 * recorder does (one object per pod, reason and message; a repeat raises its count).
 */
import type { Logger } from 'pino';
import type { VoleEvent } from '../events/index.js';
import { UniquePodName } from '../ids.js';
import type { World } from '../world/types.js';
import { KubeApiError, type KubeHttp } from './http.js';

export interface PodEvent {
  readonly pod: { uid: string; name: string; namespace: string };
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

function podOf(world: World, uid: string | undefined): PodEvent['pod'] | undefined {
  if (uid === undefined) return undefined;
  const record = world.pods.get(UniquePodName(uid));
  if (record === undefined) return undefined;
  return { uid, name: record.name, namespace: record.namespace };
}

/**
 * The Event the kubelet would record for this log event, or undefined. `operations` holds
 * the operations started so far by opId (the caller keeps it from OperationStarted events).
 */
export function podEventOf(
  event: VoleEvent,
  world: World,
  operations: ReadonlyMap<string, StartedOperation>,
): PodEvent | undefined {
  if (event.type !== 'CallFailed' && event.type !== 'CallSucceeded') return undefined;
  const started = operations.get(event.opId);
  const pod = podOf(world, started?.pod);
  if (started === undefined || pod === undefined) return undefined;
  const volume = outerName(world, pod.uid, started.volume);
  if (event.type === 'CallSucceeded') {
    if (event.call !== 'nodeExpand') return undefined;
    const message = `MountVolume.NodeExpandVolume succeeded for volume "${volume}"`;
    return { pod, type: 'Normal', reason: 'VolumeResizeSuccessful', message };
  }
  const failed = failedCalls[event.call];
  if (failed === undefined) return undefined;
  // vole's own messages may already name the operation ("MountVolume.SetUp failed: …").
  const prefix = `${failed.operation} failed: `;
  const error = event.error.message.startsWith(prefix)
    ? event.error.message.slice(prefix.length)
    : event.error.message;
  const message = `${failed.operation} failed for volume "${volume}" : ${error}`;
  return { pod, type: 'Warning', reason: failed.reason, message };
}

/** A volume of the pod that cannot be processed (a missing claim, object, driver). */
export function podErrorEvents(world: World, uid: string): PodEvent[] {
  const pod = podOf(world, uid);
  const record = world.pods.get(UniquePodName(uid));
  if (pod === undefined || record === undefined) return [];
  return [...record.errors].map(([volume, error]) => ({
    pod,
    type: 'Warning' as const,
    reason: 'FailedMount',
    message: `MountVolume.SetUp failed for volume "${volume}" : ${error}`,
  }));
}

/** Writes pod Events; the same (pod, reason, message) again raises the count of its object. */
export class PodEventRecorder {
  private readonly written = new Map<string, { name: string; count: number }>();
  private serial = 0;

  constructor(
    private readonly opts: { http: KubeHttp; node: string; logger: Logger; component: string },
  ) {}

  async record(event: PodEvent): Promise<void> {
    const key = `${event.pod.uid}\u0000${event.reason}\u0000${event.message}`;
    const nowIso = new Date().toISOString();
    const base = `/api/v1/namespaces/${event.pod.namespace}/events`;
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
      const name = `${event.pod.name}.${Date.now().toString(16)}${(this.serial++).toString(16)}`;
      await this.opts.http.post(base, this.eventObject(event, name, nowIso));
      this.written.set(key, { name, count: 1 });
    } catch (error) {
      // Events are best effort, as the kubelet's recorder: the log holds the facts.
      if (error instanceof KubeApiError && error.statusCode === 404) this.written.delete(key);
      this.opts.logger.warn({ err: error, reason: event.reason }, 'cannot write an Event');
    }
  }

  private eventObject(event: PodEvent, name: string, nowIso: string): object {
    return {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { name, namespace: event.pod.namespace },
      involvedObject: {
        apiVersion: 'v1',
        kind: 'Pod',
        name: event.pod.name,
        namespace: event.pod.namespace,
        uid: event.pod.uid,
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
