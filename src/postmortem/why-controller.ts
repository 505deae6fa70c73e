/**
 * `vole why` on the leading controller's log (cluster mode): a claim waiting for its
 * binding or provisioning (the step, its last error and next retry, as a kubelet's log
 * answers in standalone mode), a pod's claims and attachments, and a volume's attachments,
 * CreateVolume in flight or DeleteVolume. A pure function of the folded controller world.
 */
import { valuesOf } from '../desired/one-or-many.js';
import { controllerClaimView } from '../controller/provisioning.js';
import {
  attachmentAt,
  type ControllerWorld,
  desiredAt,
  pairKey,
  volumesOf,
} from '../controller/types.js';
import type { NodeName, UniquePodName, UniqueVolumeName } from '../ids.js';
import { claimName, isClaimBound } from '../binding/claims.js';
import { retryAtMs } from '../operations/pending.js';
import { persistentVolumes } from '../binding/claims-view.js';
import type { OpRecord } from '../operations/types.js';
import { claimEntry, findClaim, type VolumeWhy, type WhyAnswer } from './why.js';

const noPod = '' as UniquePodName;

function answer(world: ControllerWorld, kind: WhyAnswer['kind'], subject: string) {
  return (volumes: VolumeWhy[]): WhyAnswer => ({
    kind,
    subject,
    atSeq: world.seq,
    atTsMs: world.tsMs,
    volumes,
  });
}

/** The failed record (in backoff) of an operation on the volume at this node ('' for none). */
function backoffOf(world: ControllerWorld, volume: UniqueVolumeName, node: string) {
  let found: OpRecord | undefined;
  for (const r of world.ops.get(volume) ?? []) {
    if (r.pending || r.lastError === null || r.key.node !== node) continue;
    if (found === undefined || retryAtMs(r) > retryAtMs(found)) found = r;
  }
  return found;
}

/**
 * One operation step of a volume at a node ('' for the provisioner's): the operation
 * running, else the backoff of its last failure, else `waiting` on `step`.
 */
function stepEntry(
  world: ControllerWorld,
  at: { outer: string; volume: UniqueVolumeName; node: string; pod: UniquePodName },
  idle: Pick<VolumeWhy, 'status' | 'step' | 'detail' | 'sinceSeq'>,
): VolumeWhy {
  const running = [...world.running.values()].find(
    (op) => op.volume === at.volume && (op.node ?? '') === at.node,
  );
  const failed = backoffOf(world, at.volume, at.node);
  const lastError = world.lastErrors.get(at.volume) ?? null;
  const base = { outerVolumeSpecName: at.outer, volume: at.volume, pod: at.pod };
  const cause = world.causes.get(at.volume) ?? world.bindingCause;
  if (running !== undefined)
    return {
      ...base,
      status: 'running',
      step: running.call ?? running.op,
      detail: `${running.op} running as ${running.opId}`,
      sinceSeq: running.startedSeq,
      lastError,
      nextRetryAtMs: null,
      causeSeq: running.cause,
    };
  return {
    ...base,
    ...idle,
    ...(failed === undefined ? {} : { status: 'waiting' as const, step: failed.opName }),
    lastError: failed === undefined ? null : lastError,
    nextRetryAtMs: failed === undefined ? null : retryAtMs(failed),
    causeSeq: failed === undefined ? cause : (lastError?.seq ?? cause),
  };
}

/** A volume's attachment to a node, as the controller sees it. */
function attachmentEntry(
  world: ControllerWorld,
  volume: UniqueVolumeName,
  node: NodeName,
  at: { outer: string; pod: UniquePodName },
): VolumeWhy {
  const attachment = attachmentAt(world, pairKey(volume, node));
  const state = attachment?.value ?? 'detached';
  const wanted = desiredAt(world, pairKey(volume, node)) !== undefined;
  const since = attachment?.seq ?? world.seq;
  const idle: Pick<VolumeWhy, 'status' | 'step' | 'detail' | 'sinceSeq'> =
    wanted && state.startsWith('attached')
      ? { status: 'bound', step: 'attached', detail: `attached to ${node}`, sinceSeq: since }
      : wanted
        ? {
            status: 'waiting',
            step: 'attach',
            detail: `attachment ${state} on ${node}`,
            sinceSeq: since,
          }
        : {
            status: 'tearingDown',
            step: 'detach',
            detail: `attachment ${state} on ${node}, no pod wants it there`,
            sinceSeq: since,
          };
  return stepEntry(world, { ...at, volume, node }, idle);
}

/** A provisioned volume's provisioner side: CreateVolume in flight, or its PV to delete. */
function provisionerEntry(world: ControllerWorld, volume: UniqueVolumeName): VolumeWhy | undefined {
  const inFlight = world.provisioning.inFlight.get(volume);
  const pvName = world.provisioning.provisioned.get(volume);
  if (inFlight === undefined && pvName === undefined) return undefined;
  const at = { outer: 'provisioner', volume, node: '', pod: noPod };
  if (inFlight !== undefined) {
    const { namespace, name } = inFlight.request.claim;
    const retried = inFlight.mayExist
      ? ' (may have taken effect: retried under the same name)'
      : '';
    return stepEntry(world, at, {
      status: 'waiting',
      step: 'createVolume',
      detail: `CreateVolume ${inFlight.request.name} for claim ${namespace}/${name}${retried}`,
      sinceSeq: world.seq,
    });
  }
  const pv = persistentVolumes(world).find((p) => p.name === pvName);
  const deleting = pv?.phase === 'Released' && pv.reclaimPolicy === 'Delete';
  return stepEntry(
    world,
    at,
    deleting
      ? {
          status: 'waiting',
          step: 'deleteVolume',
          detail: `PersistentVolume ${pvName} Released (reclaim Delete): DeleteVolume once detached everywhere`,
          sinceSeq: world.seq,
        }
      : {
          status: 'bound',
          step: 'provisioned',
          detail: `PersistentVolume ${pvName} ${pv?.phase ?? ''}`.trimEnd(),
          sinceSeq: world.seq,
        },
  );
}

/** A pod's claims not bound yet, and its volumes' attachments on its node. */
function podWhy(world: ControllerWorld, uid: UniquePodName): WhyAnswer {
  const record = world.pods.get(uid)!;
  const { name, namespace = 'default' } = record.pod.metadata;
  const volumes: VolumeWhy[] = [];
  for (const v of record.pod.spec.volumes ?? []) {
    const claim = v.persistentVolumeClaim?.claimName;
    if (claim === undefined) continue;
    const pvc = findClaim(world.objects, `${namespace}/${claim}`);
    if (pvc === undefined || isClaimBound(pvc, world.bindings)) continue;
    const view = controllerClaimView(world, pvc);
    volumes.push(claimEntry(world, view, { outer: v.name, pod: uid, sinceSeq: record.seq }));
  }
  for (const v of volumesOf(record.volumes)) {
    const at = { outer: v.outerVolumeSpecName, pod: uid };
    if (record.node === null)
      volumes.push(
        stepEntry(
          world,
          { ...at, volume: v.volume, node: '' },
          {
            status: 'waiting',
            step: 'schedule',
            detail: 'the pod is not scheduled to a node',
            sinceSeq: record.seq,
          },
        ),
      );
    else volumes.push(attachmentEntry(world, v.volume, record.node, at));
  }
  return answer(world, 'pod', `${namespace}/${name} (${uid})`)(volumes);
}

function findPodUid(world: ControllerWorld, text: string): UniquePodName | undefined {
  if (world.pods.has(text as UniquePodName)) return text as UniquePodName;
  const matches = [...world.pods.values()].filter((p) => {
    const { name, namespace = 'default' } = p.pod.metadata;
    return `${namespace}/${name}` === text || name === text;
  });
  return matches.length === 1 ? matches[0]!.uid : undefined;
}

/** The answer for a pod, a claim or a volume of the controller's log; undefined: none. */
export function controllerWhy(world: ControllerWorld, subject: string): WhyAnswer | undefined {
  const uid = findPodUid(world, subject);
  if (uid !== undefined) return podWhy(world, uid);
  const pvc = findClaim(world.objects, subject);
  if (pvc !== undefined) {
    const view = controllerClaimView(world, pvc);
    const at = { outer: `claim ${claimName(pvc)}`, pod: noPod, sinceSeq: world.seq };
    return answer(world, 'claim', claimName(pvc))([claimEntry(world, view, at)]);
  }
  const volume = subject as UniqueVolumeName;
  const volumes: VolumeWhy[] = [];
  const provisioner = provisionerEntry(world, volume);
  if (provisioner !== undefined) volumes.push(provisioner);
  for (const node of [...valuesOf(world.nodesByVolume.get(volume))].sort())
    volumes.push(attachmentEntry(world, volume, node, { outer: volume, pod: noPod }));
  return volumes.length === 0 ? undefined : answer(world, 'volume', volume)(volumes);
}
