/**
 * The volume manager's three seams, as the kubelet's volume manager has them: what the
 * desired-state populator is told (pods, objects, node status: `vm.inputs`), what the
 * reconciler's work answers (volumes in use, mounted volumes: `vm.status`), and what an
 * operator asks of it (detach, release, retry: `vm.operator`). Each appends events to
 * the one engine or reads its world; none keeps state of its own.
 */
import type { EventOf, NewEvent, VoleEvent } from '../events/index.js';
import type { ManifestObject, Pod } from '../events/k8s.js';
import { type ObjectContents, toLoggedObject } from '../sources/contents.js';
import { claimIdentitiesOf, withUid } from '../sources/identities.js';
import type { ManifestChanges } from '../sources/manifests.js';
import { lookupOf } from '../binding/claims.js';
import { describeInvalid, validate } from '../sources/validate.js';
import type { Clock } from '../clock.js';
import { podAttachAndMountTimeoutMs } from '../constants.js';
import { UniquePodName, UniqueVolumeName } from '../ids.js';
import {
  getExtraSupplementalGroupsForPod,
  getMountedVolumesForPod,
  getPossiblyMountedVolumesForPod,
  getVolumesInUse,
  type MountedVolumeView,
  volumeIsAttached,
} from '../kubelet/index.js';
import type { World } from '../kubelet/types.js';
import type { Engine } from '../engine/engine.js';
import type { Operation } from '../kubelet/planner.js';

type KubeletEngine = Engine<World, Operation>;

/** addPod was given a pod the API server would refuse: nothing of it was used. */
export class InvalidPodError extends Error {
  override name = 'InvalidPodError';
}

/**
 * The desired-state populator's inputs (behaviour K3.2): the pod sources, the objects pods
 * refer to, the CSI drivers registered, and the node status the kubelet publishes and
 * reads back. Each call records one event; the planner acts on it.
 */
export class DesiredStateInputs {
  constructor(
    private readonly engine: KubeletEngine,
    private readonly clock: Clock,
    private readonly contents: ObjectContents | undefined,
  ) {}

  private append(event: NewEvent): void {
    this.engine.append(event);
  }

  /**
   * The pod source reports the pod. A pod the API server would refuse (validate.ts) throws
   * InvalidPodError naming the pod and the fields, and nothing of it is used.
   */
  addPod(pod: Pod): void {
    const errors = validate({ kind: 'Pod', ...pod });
    if (errors.length > 0) {
      const { name, namespace } = pod.metadata ?? {};
      const what = { kind: 'Pod', name, namespace: namespace ?? 'default' };
      throw new InvalidPodError(`${describeInvalid(errors, what)}; the pod was not added`);
    }
    this.append({ type: 'PodUpserted', tsMs: this.clock.nowMs(), pod });
  }

  /** The pod changed, or was re-processed: remount-requiring volumes are set up again. */
  updatePod(pod: Pod): void {
    this.addPod(pod);
  }

  /** The pod is gone (deleted, or terminated with its containers stopped). */
  removePod(uid: string): void {
    this.append({ type: 'PodRemoved', tsMs: this.clock.nowMs(), uid });
  }

  /**
   * A PV, claim, ConfigMap, Secret or Node appears or changes. A ConfigMap's or Secret's
   * data goes to the contents store the plugins read; the log records its hash only.
   */
  upsertObject(object: ManifestObject): void {
    this.contents?.set(object);
    const logged = toLoggedObject(
      withUid(object, claimIdentitiesOf(lookupOf(this.engine.world.objects))),
    );
    this.append({ type: 'ObjectUpserted', tsMs: this.clock.nowMs(), object: logged });
  }

  removeObject(ref: { kind: ManifestObject['kind']; name: string; namespace?: string }): void {
    this.append({ type: 'ObjectRemoved', tsMs: this.clock.nowMs(), ...ref });
    this.contents?.delete(ref.kind, ref.name, ref.namespace);
  }

  /**
   * A manifest directory's changes (src/sources/manifests.ts diffManifests): ConfigMap and
   * Secret data first (the plugins read it at setUp), then objects, so pods resolve.
   */
  apply(changes: ManifestChanges): void {
    for (const object of changes.contents) this.contents?.set(object);
    for (const object of changes.upsertObjects) this.upsertObject(object);
    for (const pod of changes.upsertPods) this.addPod(pod);
    for (const uid of changes.removePods) this.removePod(uid);
    for (const ref of changes.removeObjects) this.removeObject(ref);
  }

  /**
   * Every pod source has reported its pods (behaviour K3.2 populatorHasAddedPods). Until then
   * nothing is unmounted or detached, so a restart never tears down a volume whose pod
   * was simply not re-added yet.
   */
  markSourcesReady(): void {
    this.append({ type: 'SourcesReady', tsMs: this.clock.nowMs() });
  }

  /**
   * A CSI driver registered or went away (src/csi/registry.ts): the log records it, so the
   * fold knows the driver's capabilities and a replay needs no driver.
   */
  recordCsiDriver(
    event:
      | Omit<EventOf<'CsiDriverRegistered'>, 'seq' | 'tsMs'>
      | Omit<EventOf<'CsiDriverDeregistered'>, 'seq' | 'tsMs'>,
  ): void {
    this.append({ ...event, tsMs: this.clock.nowMs() });
  }

  /**
   * A service-account token of this pod is due for refresh (src/kube/tokens.ts): its token
   * projections are set up again, as the kubelet's token manager has them.
   */
  tokensRefreshDue(podUid: string): void {
    this.append({ type: 'TokensRefreshDue', tsMs: this.clock.nowMs(), pod: podUid });
  }

  /** behaviour K2.5 MarkVolumesAsReportedInUse: node.status.volumesInUse as last published. */
  markVolumesAsReportedInUse(volumes: readonly string[]): void {
    this.append({ type: 'VolumesReportedInUse', tsMs: this.clock.nowMs(), volumes: [...volumes] });
  }

  /** node.status.volumesAttached as the controller published it (controller mode). */
  observeVolumesAttached(volumesAttached: readonly { name: string; devicePath: string }[]): void {
    this.append({
      type: 'NodeStatusObserved',
      tsMs: this.clock.nowMs(),
      node: this.engine.world.config.node,
      volumesAttached: [...volumesAttached],
    });
  }
}

/**
 * What the reconciler's work answers (behaviour K2.5): the node's volumes in use, a pod's
 * mounted volumes, whether the states have synced. Reads of the world, nothing recorded.
 */
export class ReconcilerStatus {
  constructor(private readonly engine: KubeletEngine) {}

  /** behaviour K2.5 GetVolumesInUse: sorted unique names of attachable volumes in DSW or ASW. */
  getVolumesInUse(): string[] {
    return getVolumesInUse(this.engine.world);
  }

  /** behaviour K2.5 VolumeIsAttached. */
  volumeIsAttached(volume: string): boolean {
    return volumeIsAttached(this.engine.world, UniqueVolumeName(volume));
  }

  /** behaviour K2.5 GetMountedVolumesForPod: outer volume name → mounted volume. */
  getMountedVolumesForPod(uid: string): Map<string, MountedVolumeView> {
    return getMountedVolumesForPod(this.engine.world, UniquePodName(uid));
  }

  /** behaviour K2.5 GetExtraSupplementalGroupsForPod. */
  getExtraSupplementalGroupsForPod(uid: string): number[] {
    return getExtraSupplementalGroupsForPod(this.engine.world, UniquePodName(uid));
  }

  /** behaviour K2.5 HasPossiblyMountedVolumesForPod: mounted or uncertain. */
  hasPossiblyMountedVolumes(uid: string): boolean {
    return getPossiblyMountedVolumesForPod(this.engine.world, UniquePodName(uid)).length > 0;
  }

  /** behaviour K3.8: true once the sources are ready after this start. */
  reconcilerStatesHasBeenSynced(): boolean {
    const world = this.engine.world;
    return world.sourcesReady && world.engineStartedSeq > 0;
  }
}
