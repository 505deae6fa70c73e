/**
 * The attach/detach controller's two seams, named as the volume manager's are: what it is
 * told (`cm.inputs`: pods, cluster objects, what another leader left attached) and what its
 * work answers (`cm.status`: a node's volumesAttached, whether it has settled). Each appends
 * events to the one engine or reads its world; none keeps state of its own.
 */
import { planBindings } from '../binding/decide.js';
import { lookupOf } from '../binding/claims.js';
import type { Clock } from '../clock.js';
import {
  attachmentAt,
  type ControllerOperation,
  type ControllerWorld,
  pairKey,
} from '../controller/types.js';
import type { Engine } from '../engine/engine.js';
import type { NewEvent } from '../events/index.js';
import type { ClusterObject, ManifestObject, Pod } from '../events/k8s.js';
import { NodeName } from '../ids.js';
import { toLoggedObject } from '../sources/contents.js';
import { claimIdentitiesOf, withUid } from '../sources/identities.js';
import type { ManifestChanges } from '../sources/manifests.js';

type ControllerEngine = Engine<ControllerWorld, ControllerOperation>;

/**
 * What the controller is told, with the volume manager's verbs (DesiredStateInputs): the
 * pods the scheduler placed, the Nodes, PersistentVolumes and claims they use.
 */
export class ControllerInputs {
  constructor(
    private readonly engine: ControllerEngine,
    private readonly clock: Clock,
  ) {}

  private append(event: NewEvent): void {
    this.engine.append(event);
  }

  /** A pod was added (its spec.nodeName schedules it: the controller attaches its volumes). */
  addPod(pod: Pod): void {
    this.append({ type: 'PodUpserted', tsMs: this.clock.nowMs(), pod });
  }

  /** The pod changed (scheduled, or its volumes changed). */
  updatePod(pod: Pod): void {
    this.addPod(pod);
  }

  /** The pod is gone: its volumes may detach once the node no longer reports them in use. */
  removePod(uid: string): void {
    this.append({ type: 'PodRemoved', tsMs: this.clock.nowMs(), uid });
  }

  /**
   * An object as the log holds it: a claim without a UID with the one the world knows it
   * by (else a new one), a ConfigMap or Secret as its content hash.
   */
  loggedObject(object: ManifestObject): ClusterObject {
    return toLoggedObject(withUid(object, claimIdentitiesOf(lookupOf(this.engine.world.objects))));
  }

  /** A Node, PersistentVolume or claim was added or changed (a ConfigMap or Secret: its hash). */
  upsertObject(object: ManifestObject): void {
    const logged = this.loggedObject(object);
    this.append({ type: 'ObjectUpserted', tsMs: this.clock.nowMs(), object: logged });
  }

  removeObject(ref: { kind: ManifestObject['kind']; name: string; namespace?: string }): void {
    this.append({ type: 'ObjectRemoved', tsMs: this.clock.nowMs(), ...ref });
  }

  /** A manifest directory's changes, in the order that keeps references resolvable. */
  apply(changes: Omit<ManifestChanges, 'contents'>): void {
    for (const object of changes.upsertObjects) this.upsertObject(object);
    for (const pod of changes.upsertPods) this.addPod(pod);
    for (const uid of changes.removePods) this.removePod(uid);
    for (const ref of changes.removeObjects) this.removeObject(ref);
  }

  /**
   * What the API server shows attached as this controller begins to lead (another
   * leader's work): the world adopts what it lacks before it plans anything.
   */
  attachmentsFound(
    attachments: readonly { volume: string; node: string; pv: string; attached: boolean }[],
  ): void {
    this.append({
      type: 'AttachmentsFound',
      tsMs: this.clock.nowMs(),
      attachments: [...attachments],
    });
  }
}

/** What the controller's work answers: reads of its world, nothing recorded. */
export class ControllerStatus {
  constructor(private readonly engine: ControllerEngine) {}

  /** node.status.volumesAttached of `node`, sorted by volume name. */
  volumesAttached(node: string): { name: string; devicePath: string }[] {
    const world = this.engine.world;
    const reported = world.reported.get(NodeName(node));
    return [...(reported ?? [])].sort().map((name) => ({
      name,
      devicePath: attachmentAt(world, pairKey(name, node))?.devicePath ?? '',
    }));
  }

  /** Every desired attachment confirmed, nothing else attached, nothing running. */
  settled(): boolean {
    const world = this.engine.world;
    if (world.running.size > 0) return false;
    // A claim the planner is about to bind: its pods' attachments are not desired yet.
    if (world.unboundClaims.size > 0 && planBindings(world, 0).length > 0) return false;
    for (const pair of world.pairs.values())
      if (pair.pods === null || !pair.value.startsWith('attached')) return false;
    return true;
  }
}
