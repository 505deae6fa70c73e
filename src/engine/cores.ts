/**
 * The two cores, and the choice of one by a log's mode: EngineStarted records the mode
 * its engine ran (absent = kubelet, the logs older versions wrote), and every reader —
 * status, replay, history, explain, verify, diff, export/import, the inspector — folds a
 * log with the core it names. A mode this version does not know is refused.
 */
import { checkControllerVolume } from '../controller/invariants.js';
import {
  foldController,
  initialControllerWorld,
  rebuildControllerIndexes,
} from '../controller/fold.js';
import {
  type ControllerOperation,
  controllerDecision,
  describeControllerOperation,
  planController,
} from '../controller/plan.js';
import * as controllerReader from '../controller/readers.js';
import {
  attachableOf,
  type ControllerAttachment,
  type ControllerPod,
  type ControllerWorld,
  pairKey,
  volumesOf,
} from '../controller/types.js';
import type { AttachmentContext } from '../../machines/index.js';
import type { PairState } from '../world/compiled-machine.js';
import type { VoleEvent } from '../events/index.js';
import type { ClusterObject } from '../events/k8s.js';
import type { UniquePodName } from '../ids.js';
import { describeOperation, kubeletDecision, type Operation, plan } from '../plan/index.js';
import { checkVolume, fold, initialWorld } from '../world/index.js';
import { ClusterObjects } from '../desired/objects.js';
import * as kubeletReader from '../world/readers.js';
import { isReferenceIndex } from '../desired/references.js';
import { volumeTable } from '../world/volumes.js';
import type { World } from '../world/types.js';
import {
  type Core,
  type CoreOperation,
  type CoreWorld,
  type EngineMode,
  engineModes,
} from './core.js';
import { type SlicedCodec, slicedCloneCodec, structuredCloneCodec } from './snapshot.js';
import { attachmentOf, deviceOf, startingDevice } from '../controller/attachment-record.js';
import { reviveControllerSpecs, reviveKubeletSpecs } from './revive-specs.js';

/** The kubelet's volume manager for one node (spec/kubelet-volume-manager.md). */
export const kubeletCore: Core<World, Operation> = {
  mode: 'kubelet',
  reader: {
    pairs: ['attachment', 'mount'],
    metrics: { totalVolumes: 'volume_manager_total_volumes', node: true, controller: false },
    operationSpec: kubeletReader.operationSpec,
    persistentVolume: kubeletReader.persistentVolume,
    gauges: kubeletReader.gauges,
    decisionTarget: kubeletReader.decisionTarget,
    claimDecisionVolumes: kubeletReader.claimDecisionVolumes,
  },
  initialWorld,
  fold,
  plan,
  decision: kubeletDecision,
  describe: describeOperation,
  invariants: checkVolume,
  // Format 7: one record per volume (format 6 kept desired state, attachments, mounts
  // and causes in four maps; format 5 indexed pods by built keys; format 4 kept objects
  // under built keys; format 3 held one-pod volumes in Maps; format 1 was JSON with
  // tagged Maps). The views over the records are made again, not read back.
  snapshot: structuredCloneCodec<World>(7, (world) => {
    const objects = ClusterObjects.revive(world.objects);
    const read =
      world.volumes instanceof Map &&
      isReferenceIndex(world.podsByObject) &&
      world.unboundClaims instanceof Set &&
      world.oneNameLists instanceof Map &&
      world.mountContexts instanceof Map;
    // Specs of snapshots from before the traits were shared held them flat.
    if (read) reviveKubeletSpecs(world);
    return read && objects
      ? {
          ...world,
          objects,
          ...volumeTable(world.volumes),
          // Snapshots from before mount intents existed hold none.
          mountIntents: world.mountIntents ?? new Map(),
          // Snapshots from before operator requests existed hold none.
          operator: world.operator ?? { pending: new Map(), holds: new Map() },
          // Snapshots from before provisioning existed hold none of its state.
          provisioning: world.provisioning ?? {
            inFlight: new Map(),
            provisioned: new Map(),
            protectedClaims: new Set(),
            resizing: new Set(),
          },
          maybeGone: [],
          takenVolumes: undefined,
          dirty: new Set(),
        }
      : undefined;
  }),
};

/** The desired and actual attachments of a pod's volumes on its node. */
function* podPairs(
  name: keyof ControllerWorld,
  value: unknown,
): Generator<readonly [keyof ControllerWorld & string, string]> {
  if (name !== 'pods') return;
  const record = value as ControllerPod;
  if (record.node === null) return;
  for (const v of volumesOf(record.volumes)) {
    yield ['dsw', pairKey(v.volume, record.node)];
    yield ['attachments', pairKey(v.volume, record.node)];
  }
}

/**
 * A pod record of a snapshot from before the intake was shared held the keys
 * (`Kind/namespace/name`) its resolution read: the same references as `[kind, name, …]`.
 * One from before the record's node was indexed from the record held it last (`Node`, its
 * node): resolution reads no Node, so such a pair is that one.
 */
function podOfKeys(record: ControllerPod): ControllerPod {
  const { references: held, node } = record;
  const last = held.length - 2;
  if (last >= 0 && held[last] === 'Node' && held[last + 1] === (node ?? ''))
    return { ...record, references: held.slice(0, last) };
  if (held[0]?.includes('/') !== true) return record;
  const references: string[] = [];
  for (const key of held) {
    const [kind, , name] = key.split('/');
    if (kind !== undefined && name !== undefined) references.push(kind, name);
  }
  return { ...record, references };
}

function reviveControllerWorld(world: Omit<ControllerWorld, 'dirty'>): ControllerWorld | undefined {
  if (!(world.reported instanceof Map && world.unboundClaims instanceof Set)) return undefined;
  const objects =
    world.objects instanceof Map
      ? ClusterObjects.of((world.objects as Map<string, ClusterObject>).values())
      : ClusterObjects.revive(world.objects);
  if (objects === undefined) return undefined;
  const indexed = isReferenceIndex(world.podsByObject);
  const revived: ControllerWorld = {
    ...world,
    objects,
    // Snapshots from before operator requests existed hold none.
    operator: world.operator ?? { pending: new Map(), holds: new Map() },
    // Snapshots from before the controller provisioned hold none of its state.
    provisioning: {
      inFlight: world.provisioning?.inFlight ?? new Map(),
      provisioned: world.provisioning?.provisioned ?? new Map(),
      // Snapshots from before pvc-protection in cluster mode hold none.
      protectedClaims: world.provisioning?.protectedClaims ?? new Set(),
      resizing: world.provisioning?.resizing ?? new Set(),
    },
    dirty: new Set(),
  };
  // Format 4 leaves the fold's indexes out; format 3 holds them (keyed by object keys
  // before the intake was shared).
  for (const [uid, record] of revived.pods) {
    const read = podOfKeys(record);
    // A list of one volume is held bare, none as the shared empty list (older snapshots
    // held a list; structured clone reads the empty one back as a list of its own). A bare
    // one is read as it is: no list made for each pod of the snapshot.
    const volumes = Array.isArray(read.volumes) ? attachableOf(read.volumes) : read.volumes;
    if (volumes !== read.volumes) revived.pods.set(uid, { ...read, volumes });
    else if (read !== record) revived.pods.set(uid, read);
  }
  // Specs of snapshots from before the traits were shared held them flat.
  reviveControllerSpecs(revived);
  if (!indexed) rebuildControllerIndexes(revived);
  barePodsOfDesired(revived.dsw);
  flatAttachments(revived.attachments);
  return revived;
}

/**
 * Snapshots written before an attachment record was its machine state held the state as
 * `state: { value, context }` (and the spec's plugin name beside it): the same pair, flat.
 * The device fields every attachment starts with are one object again (a snapshot reads
 * back a copy of it for each slice).
 */
function flatAttachments(attachments: ControllerWorld['attachments']): void {
  for (const [key, record] of attachments) {
    const old = record as ControllerAttachment & { state?: PairState<AttachmentContext> };
    if (old.state !== undefined) attachments.set(key, attachmentOf(old, old.state, old.seq));
    else if (record.device !== startingDevice && deviceOf(record.device) === startingDevice)
      attachments.set(key, { ...record, device: startingDevice });
  }
}

/**
 * Snapshots written before a desired attachment held its pods bare kept them in a Map of
 * names: the same pods, as the fold now holds them (the names are in the pod records).
 * Snapshots written before it held its key have none: its key in the map.
 */
function barePodsOfDesired(dsw: ControllerWorld['dsw']): void {
  for (const [key, entry] of dsw) {
    const pods: unknown = entry.pods;
    const keyed = entry.key === undefined ? { ...entry, key } : entry;
    if (!(pods instanceof Map)) {
      if (keyed !== entry) dsw.set(key, keyed);
      continue;
    }
    const uids = [...(pods as Map<UniquePodName, unknown>).keys()];
    const [only] = uids;
    dsw.set(key, { ...keyed, pods: uids.length === 1 ? (only as UniquePodName) : new Set(uids) });
  }
}

/** The attach/detach controller (spec/attach-detach-controller.md). */
export const controllerCore: Core<ControllerWorld, ControllerOperation> & {
  readonly snapshot: SlicedCodec<ControllerWorld>;
} = {
  mode: 'controller',
  reader: {
    pairs: ['attachment'],
    metrics: {
      totalVolumes: 'attachdetach_controller_total_volumes',
      node: false,
      controller: true,
    },
    operationSpec: controllerReader.operationSpec,
    persistentVolume: () => undefined,
    gauges: controllerReader.gauges,
    decisionTarget: controllerReader.decisionTarget,
    claimDecisionVolumes: controllerReader.claimDecisionVolumes,
  },
  initialWorld: initialControllerWorld,
  fold: foldController,
  plan: planController,
  decision: controllerDecision,
  describe: describeControllerOperation,
  invariants: checkControllerVolume,
  // Format 4: written in slices (src/engine/snapshot.ts), so a leader encoding its world
  // keeps its lease; format 3 (one structured-clone value) is still read.
  snapshot: slicedCloneCodec<ControllerWorld>(
    4,
    {
      maps: ['pods', 'objects', 'bindings', 'nodes', 'dsw', 'attachments', 'causes'],
      sets: ['reported'],
      derived: ['podsByObject', 'nodesByVolume', 'volumesByNode'],
      // A pod's specs are its desired and actual attachments' specs: one slice, one copy.
      shared: ['dsw', 'attachments'],
      companions: podPairs,
    },
    reviveControllerWorld,
    structuredCloneCodec<ControllerWorld>(3, reviveControllerWorld),
  ),
};

/** A core with its mode, for readers that work with either. */
export type LogCore =
  | { readonly mode: 'kubelet'; readonly core: typeof kubeletCore }
  | { readonly mode: 'controller'; readonly core: typeof controllerCore };

/** Either core, as a reader that needs nothing of one core's world holds it. */
export type AnyCore = Core<CoreWorld, CoreOperation>;

export class UnknownModeError extends Error {
  override name = 'UnknownModeError';
}

function isMode(mode: string): mode is EngineMode {
  return (engineModes as readonly string[]).includes(mode);
}

/** The core of a mode; throws UnknownModeError for a mode this version does not know. */
export function coreOfMode(mode: string | undefined): LogCore {
  const name = mode ?? 'kubelet';
  if (!isMode(name))
    throw new UnknownModeError(
      `this log was written in mode "${name}", which this version of vole does not know ` +
        `(it reads ${engineModes.join(' and ')} logs); read it with the vole that wrote it, or upgrade`,
    );
  return name === 'controller'
    ? { mode: 'controller', core: controllerCore }
    : { mode: 'kubelet', core: kubeletCore };
}

/**
 * One answer per core, for a reader that builds each core's own view of its world (a
 * log's world, src/postmortem/log-world.ts): with coreOfMode, the one place a logged mode
 * is matched to its core; what the answer builds holds no mode.
 */
export function byCore<T>(
  logCore: LogCore,
  answers: {
    readonly kubelet: (core: typeof kubeletCore) => T;
    readonly controller: (core: typeof controllerCore) => T;
  },
): T {
  return logCore.mode === 'controller'
    ? answers.controller(logCore.core)
    : answers.kubelet(logCore.core);
}

/**
 * The core a log names: the mode of its first EngineStarted among the first events
 * (kubelet for a log without one, such as an empty log).
 */
export function coreOfLog(first: Iterable<VoleEvent>): LogCore {
  let looked = 0;
  for (const event of first) {
    if (event.type === 'EngineStarted') return coreOfMode(event.mode);
    if (++looked >= 16) break;
  }
  return coreOfMode(undefined);
}
