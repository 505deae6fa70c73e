/**
 * Per-pod progress for a person at a terminal: after each event, the pods it concerns
 * are summarised (waiting for which volumes and why, or ready) and printed on change.
 */
import type { VoleEvent } from '../events/index.js';
import { type UniquePodName, UniqueVolumeName } from '../ids.js';
import { eventVolume } from '../postmortem/history.js';
import { podWaitStatus } from '../kubelet/queries.js';
import type { World } from '../kubelet/types.js';
import { podEntries, podEntry } from '../kubelet/by-pod.js';
import type { PodRecord } from '../kubelet/types.js';
import { requiredContents } from '../kubelet/content-invariant.js';

/**
 * What to do for the pod's volumes that wait on a ConfigMap or Secret the world lacks: the
 * error itself is the kubelet's (`configmap "web" not found`), which names no namespace.
 */
function missingObjectsHint(world: World, record: PodRecord): string {
  const missing = new Set<string>();
  for (const volume of record.volumes)
    for (const o of requiredContents(volume))
      if (world.objects.lookup(o.kind, o.name, o.namespace) === undefined)
        missing.add(`${o.kind} ${o.namespace}/${o.name}`);
  if (missing.size === 0) return '';
  return `; create ${[...missing].join(', ')} (or mark the volume optional)`;
}

export class PodProgress {
  private readonly last = new Map<string, string>();

  /**
   * `originOf`: the manifest file a pod came from, named in lines that report a problem,
   * so a typo is found where it was made.
   */
  constructor(
    private readonly print: (line: string) => void,
    private readonly originOf: (uid: string) => string | undefined = () => undefined,
  ) {}

  /** Pods an event may change: its volume's desired and mounted pods, or the pod itself. */
  private podsOf(event: VoleEvent, world: World): string[] {
    if (event.type === 'PodUpserted') return [event.pod.metadata.uid ?? ''];
    if (event.type === 'PodRemoved') return [event.uid];
    const volume =
      eventVolume(world, event) ??
      (event.type === 'OperationStarted' ? UniqueVolumeName(event.volume) : undefined);
    if (volume === undefined) return [];
    const desired = [...podEntries(world.dsw.get(volume)?.pods)].map((e) => e.pod);
    const mounted = [...podEntries(world.mounts.get(volume))].map((m) => m.pod);
    return [...new Set([...desired, ...mounted])];
  }

  onEvent(event: VoleEvent, world: World): void {
    for (const uid of this.podsOf(event, world)) {
      const line = this.summary(world, uid as UniquePodName);
      if (line === undefined || this.last.get(uid) === line) continue;
      this.last.set(uid, line);
      this.print(line);
    }
  }

  summary(world: World, uid: UniquePodName): string | undefined {
    const record = world.pods.get(uid);
    if (record === undefined) {
      const left = [...world.mounts.values()].filter((m) => podEntry(m, uid) !== undefined).length;
      return left === 0
        ? `pod ${uid}: removed, volumes torn down`
        : `pod ${uid}: removed, tearing down ${left} volume(s)`;
    }
    const name = `${record.namespace}/${record.name}`;
    const origin = this.originOf(uid);
    const named = origin === undefined ? name : `${name} (${origin})`;
    const status = podWaitStatus(world, uid);
    // Unprocessable volumes (a claim not bound yet, a missing object): the pod waits on them.
    if (status.errors.length > 0)
      return `pod ${named}: cannot process volumes yet: ${status.errors.join('; ')}`;
    if (status.ready) return `pod ${name}: mounted [${record.expectedVolumes.join(' ')}]`;
    const attached = record.volumes.filter(
      (v) => world.attachments.get(v.volume)?.value.startsWith('attached') === true,
    );
    const why =
      status.lastErrors.length > 0
        ? ` — last error: ${status.lastErrors.join('; ')}${missingObjectsHint(world, record)}`
        : '';
    const attachedText =
      attached.length > 0
        ? `, attached [${attached.map((v) => v.outerVolumeSpecName).join(' ')}]`
        : '';
    const who = why === '' ? name : named;
    return `pod ${who}: waiting for [${status.unmounted.join(' ')}]${attachedText}${why}`;
  }
}

/** Every pod ready, nothing running, and nothing attached or mounted that no pod wants. */
export function settled(world: World): boolean {
  if (world.running.size > 0 || !world.sourcesReady) return false;
  for (const uid of world.pods.keys()) if (!podWaitStatus(world, uid).ready) return false;
  for (const volume of world.attachments.keys()) if (!world.dsw.has(volume)) return false;
  for (const [volume, byPod] of world.mounts) {
    const desired = world.dsw.get(volume)?.pods;
    for (const m of podEntries(byPod)) if (podEntry(desired, m.pod) === undefined) return false;
  }
  return true;
}
