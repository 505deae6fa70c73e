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
  type ControllerPair,
  type ControllerPod,
  type ControllerWorld,
  pairKey,
  volumesOf,
} from '../controller/types.js';
import type { AttachmentContext } from '../../machines/index.js';
import type { PairState } from '../world/compiled-machine.js';
import type { VoleEvent } from '../events/index.js';
import type { ClusterObject } from '../events/k8s.js';
import { type NodeName, Seq, type UniquePodName, type UniqueVolumeName } from '../ids.js';
import type { OneOrMany } from '../desired/one-or-many.js';
import type { ResolvedVolume } from '../operations/volume-spec.js';
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
import {
  type SlicedCodec,
  type SlicedFields,
  slicedCloneCodec,
  structuredCloneCodec,
} from './snapshot.js';
import {
  attachmentState,
  deviceOf,
  notAttached,
  pairOf,
  startingDevice,
  undesired,
} from '../controller/attachment-record.js';
import { reviveControllerSpecs, reviveKubeletSpecs } from './revive-specs.js';

/** The kubelet's volume manager for one node (docs/behaviour.md). */
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

/** The pairs (desired and actual attachments) of a pod's volumes on its node. */
function* podPairs(
  name: keyof ControllerWorld,
  value: unknown,
): Generator<readonly [keyof ControllerWorld & string, string]> {
  if (name !== 'pods') return;
  const record = value as ControllerPod;
  if (record.node === null) return;
  for (const v of volumesOf(record.volumes)) yield ['pairs', pairKey(v.volume, record.node)];
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

function reviveControllerWorld(read: Omit<FormerWorld, 'dirty'>): ControllerWorld | undefined {
  const { dsw, attachments, ...world } = read;
  if (!(world.reported instanceof Map && world.unboundClaims instanceof Set)) return undefined;
  const pairs =
    world.pairs === undefined
      ? dsw && attachments && pairsOf(dsw, attachments)
      : startingDevicesShared(world.pairs);
  if (!(pairs instanceof Map)) return undefined;
  const objects =
    world.objects instanceof Map
      ? ClusterObjects.of((world.objects as Map<string, ClusterObject>).values())
      : ClusterObjects.revive(world.objects);
  if (objects === undefined) return undefined;
  const indexed = isReferenceIndex(world.podsByObject);
  const revived: ControllerWorld = {
    ...world,
    pairs,
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
  // Formats 4 and 5 leave the fold's indexes out; format 3 holds them (keyed by object keys
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
  return revived;
}

/** A desired attachment as snapshots before format 5 held it, in a map of its own. */
interface FormerDesired {
  readonly key?: string;
  readonly volume: UniqueVolumeName;
  readonly node: NodeName;
  readonly spec: ResolvedVolume;
  readonly pods: OneOrMany<UniquePodName> | ReadonlyMap<UniquePodName, unknown>;
  readonly multiAttachErrorReported: boolean;
}

/** An attachment as snapshots before format 5 held it, flat or with a state of its own. */
type FormerAttachment = Omit<ControllerPair, 'pods' | 'desiredSpec' | 'attachedSpec'> & {
  readonly spec: ResolvedVolume;
  readonly state?: PairState<AttachmentContext>;
};

/** The controller's world as a snapshot holds it: format 5, or the two maps of older ones. */
type FormerWorld = Omit<ControllerWorld, 'pairs'> & {
  readonly pairs?: ControllerWorld['pairs'];
  readonly dsw?: Map<string, FormerDesired>;
  readonly attachments?: Map<string, FormerAttachment>;
};

/**
 * A former desired entry's pods as the fold holds them: bare, a Set from two (snapshots
 * written before held them in a Map of names, now in the pod records).
 */
function barePods(pods: FormerDesired['pods']): OneOrMany<UniquePodName> {
  if (!(pods instanceof Map)) return pods as OneOrMany<UniquePodName>;
  const uids = [...pods.keys()];
  return uids.length === 1 ? uids[0]! : new Set(uids);
}

/**
 * Snapshots written before format 5 kept a pair's desire and its attachment in two maps
 * (`dsw` and `attachments`, keyed alike): each pair in one record, keyed by the desired
 * entry's key string. An attachment written with `state: { value, context }` (before the
 * record was its machine state) is read flat; its device fields as they start are the one
 * shared object again (a snapshot reads back a copy of it for each slice).
 */
function pairsOf(
  dsw: ReadonlyMap<string, FormerDesired>,
  attachments: ReadonlyMap<string, FormerAttachment>,
): ControllerWorld['pairs'] {
  const pairs: ControllerWorld['pairs'] = new Map();
  const keys = new Set([...dsw.keys(), ...attachments.keys()]);
  for (const key of keys) {
    const d = dsw.get(key);
    const a = attachments.get(key);
    const desire =
      d === undefined
        ? undesired
        : {
            pods: barePods(d.pods),
            desiredSpec: d.spec,
            multiAttachErrorReported: d.multiAttachErrorReported,
          };
    const at = a ?? { volume: d!.volume, node: d!.node, detachRequestedAtMs: null };
    const attached =
      a === undefined ? notAttached : { spec: a.spec, state: a.state ?? attachmentState(a) };
    pairs.set(key, pairOf({ ...at, device: startingDevice }, desire, attached, a?.seq ?? Seq(0)));
  }
  return pairs;
}

/**
 * The device fields every attachment starts with are one shared object (`startingDevice`),
 * which a snapshot reads back as a copy for each slice: the shared one again.
 */
function startingDevicesShared(pairs: ControllerWorld['pairs']): ControllerWorld['pairs'] {
  for (const [key, pair] of pairs)
    if (pair.device !== startingDevice && deviceOf(pair.device) === startingDevice)
      pairs.set(key, { ...pair, device: startingDevice });
  return pairs;
}

/** The large maps of the controller's world (format 5), written in slices. */
const controllerFields: SlicedFields<ControllerWorld> = {
  maps: ['pods', 'objects', 'bindings', 'nodes', 'pairs', 'causes'],
  sets: ['reported'],
  derived: ['podsByObject', 'nodesByVolume', 'volumesByNode'],
  // A pod's specs are its pairs' desired and attached specs: one slice, one copy.
  shared: ['pairs'],
  companions: podPairs,
};

/**
 * Format 4's: a pair's desire and its attachment in two maps (`dsw` and `attachments`),
 * read into one record a pair (`pairsOf`). Named as the world it is read as is not: the
 * codec only decodes with them, and its revive reads the former world.
 */
const formerFields = {
  maps: ['pods', 'objects', 'bindings', 'nodes', 'dsw', 'attachments', 'causes'],
  sets: ['reported'],
  derived: ['podsByObject', 'nodesByVolume', 'volumesByNode'],
  shared: ['dsw', 'attachments'],
  companions: () => [],
} satisfies SlicedFields<FormerWorld> as unknown as SlicedFields<ControllerWorld>;

/** The attach/detach controller (docs/behaviour.md). */
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
  // Format 5: written in slices (src/engine/snapshot.ts), so a leader encoding its world
  // keeps its lease, a pair in one record. Format 4 (the same, a pair's desire and its
  // attachment in two maps) and format 3 (one structured-clone value) are still read; a
  // version before format 5 reads a format-5 snapshot as of another format (it replays).
  snapshot: slicedCloneCodec<ControllerWorld>(
    5,
    controllerFields,
    reviveControllerWorld,
    slicedCloneCodec<ControllerWorld>(
      4,
      formerFields,
      reviveControllerWorld,
      structuredCloneCodec<ControllerWorld>(3, reviveControllerWorld),
    ),
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

/**
 * The mode of a log of a cluster vole did not run (`vole record`, `vole import
 * --audit-log`): the controller's inputs as the API server showed them, and nothing
 * decided or done. It folds with the controller's core, so its readers work on it.
 */
export const recordedMode = 'recorded';

/** The core of a mode; throws UnknownModeError for a mode this version does not know. */
export function coreOfMode(mode: string | undefined): LogCore {
  const name = mode === recordedMode ? 'controller' : (mode ?? 'kubelet');
  if (!isMode(name))
    throw new UnknownModeError(
      `this log was written in mode "${name}", which this version of vole does not know ` +
        `(it reads ${[...engineModes, recordedMode].join(', ')} logs); read it with the vole that wrote it, or upgrade`,
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
