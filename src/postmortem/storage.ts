/**
 * The storage a log's world holds, for people (the inspector's storage view): its
 * StorageClasses, each claim's standing (phase, bound PV, provisioning, last error, next
 * retry) and each PV (phase, capacity, reclaim policy, node affinity). Either core: the
 * claims and PVs come from the world's description, the classes and the PVs' node affinity
 * from the objects the core keeps (LogWorld.pvWorld).
 */
import type { NodeSelector } from '../events/k8s.js';
import { lookupOf } from '../binding/claims.js';
import { bindingModeOf, isDefaultClass, reclaimPolicyOf } from '../binding/storage-class.js';
import type { ClaimView, PvWorld } from '../binding/claims-view.js';
import type { WorldView } from './replay.js';

export interface StorageClassRow {
  readonly name: string;
  readonly provisioner: string;
  readonly reclaimPolicy: string;
  readonly volumeBindingMode: string;
  readonly allowVolumeExpansion: boolean;
  readonly isDefault: boolean;
}

/** A claim's standing as the world describes it (ClaimView), its last error as its message. */
export interface ClaimRow extends Omit<ClaimView, 'lastError'> {
  readonly lastError: string | null;
}

export interface PvRow {
  readonly name: string;
  readonly phase: string;
  readonly claim: string | null;
  readonly capacityBytes: number | null;
  readonly reclaimPolicy: string | null;
  readonly storageClassName: string | null;
  readonly provisioned: boolean;
  /** The required node affinity as `key in (a, b)` terms joined by ` or `, or null. */
  readonly nodeAffinity: string | null;
}

export interface StorageView {
  readonly classes: StorageClassRow[];
  readonly claims: ClaimRow[];
  readonly pvs: PvRow[];
}

/** A required node selector as people read it: each term's expressions, terms or'ed. */
export function nodeAffinityText(selector: NodeSelector | undefined): string | null {
  const terms = selector?.nodeSelectorTerms ?? [];
  const texts = terms.map((term) =>
    (term.matchExpressions ?? [])
      .map(
        (e) =>
          `${e.key} ${e.operator === 'In' ? 'in' : e.operator} (${(e.values ?? []).join(', ')})`,
      )
      .join(' and '),
  );
  const shown = texts.filter((t) => t !== '');
  return shown.length === 0 ? null : shown.join(' or ');
}

/** The storage view of a world and its description (`view`: the same moment's). */
export function describeStorage(
  world: PvWorld,
  view: Pick<WorldView, 'claims' | 'pvs'>,
): StorageView {
  const lookup = lookupOf(world.objects);
  const classes: StorageClassRow[] = [];
  for (const sc of lookup.ofKind('StorageClass')) {
    if (sc.kind !== 'StorageClass') continue;
    classes.push({
      name: sc.metadata.name,
      provisioner: sc.provisioner,
      reclaimPolicy: reclaimPolicyOf(sc),
      volumeBindingMode: bindingModeOf(sc),
      allowVolumeExpansion: sc.allowVolumeExpansion === true,
      isDefault: isDefaultClass(sc),
    });
  }
  classes.sort((a, b) => a.name.localeCompare(b.name));
  const claims = view.claims.map((c): ClaimRow => ({
    ...c,
    lastError: c.lastError?.message ?? null,
  }));
  const pvs = view.pvs.map((pv): PvRow => {
    const object = lookup.lookup('PersistentVolume', pv.name);
    const selector =
      object?.kind === 'PersistentVolume' ? object.spec.nodeAffinity?.required : undefined;
    return {
      name: pv.name,
      phase: pv.phase,
      claim: pv.claim,
      capacityBytes: pv.capacityBytes,
      reclaimPolicy: pv.reclaimPolicy,
      storageClassName: pv.storageClassName,
      provisioned: pv.provisioned,
      nodeAffinity: nodeAffinityText(selector),
    };
  });
  return { classes, claims, pvs };
}
