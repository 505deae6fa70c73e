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
  type ControllerPod,
  type ControllerWorld,
  pairKey,
  volumesOf,
} from '../controller/types.js';
import type { VoleEvent } from '../events/index.js';
import type { ClusterObject } from '../events/k8s.js';
import { describeOperation, kubeletDecision, type Operation, plan } from '../kubelet/planner.js';
import { checkVolume, fold, initialWorld } from '../kubelet/index.js';
import { ClusterObjects } from '../desired/objects.js';
import * as kubeletReader from '../kubelet/readers.js';
import { isReferenceIndex } from '../desired/references.js';
import { volumeTable } from '../kubelet/volumes.js';
import type { World } from '../kubelet/types.js';
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
import { deviceOf, startingDevice } from '../controller/attachment-record.js';
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
  // Format 8: one record per volume, the traits of a spec one shared object of its kind.
  // A snapshot is a cache: one of another format is ignored and the log replayed. The
  // views over the records are made again, not read back.
  snapshot: structuredCloneCodec<World>(8, (world) => {
    const objects = ClusterObjects.revive(world.objects);
    const read =
      world.volumes instanceof Map &&
      isReferenceIndex(world.podsByObject) &&
      world.unboundClaims instanceof Set &&
      world.oneNameLists instanceof Map &&
      world.mountContexts instanceof Map &&
      world.mountIntents instanceof Map &&
      world.operator !== undefined &&
      world.provisioning !== undefined;
    // Structured clone reads back a copy of the traits for each spec: the shared ones again.
    if (read) reviveKubeletSpecs(world);
    return read && objects
      ? {
          ...world,
          objects,
          ...volumeTable(world.volumes),
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

function reviveControllerWorld(read: Omit<ControllerWorld, 'dirty'>): ControllerWorld | undefined {
  const world = read;
  if (
    !(world.reported instanceof Map && world.unboundClaims instanceof Set) ||
    !(world.pairs instanceof Map) ||
    world.operator === undefined ||
    world.provisioning === undefined
  )
    return undefined;
  // Written a slice of entries at a time, the objects are read back as a Map.
  const objects =
    world.objects instanceof Map
      ? ClusterObjects.of((world.objects as Map<string, ClusterObject>).values())
      : undefined;
  if (objects === undefined) return undefined;
  const revived: ControllerWorld = {
    ...world,
    pairs: startingDevicesShared(world.pairs),
    objects,
    dirty: new Set(),
  };
  for (const [uid, record] of revived.pods) {
    // A list of one volume is held bare, none as the shared empty list (structured clone
    // reads the empty one back as a list of its own).
    const volumes = Array.isArray(record.volumes) ? attachableOf(record.volumes) : record.volumes;
    if (volumes !== record.volumes) revived.pods.set(uid, { ...record, volumes });
  }
  // Structured clone reads back a copy of the traits for each spec: the shared ones again.
  reviveControllerSpecs(revived);
  // The fold's indexes are not written (derived): built again from the records.
  rebuildControllerIndexes(revived);
  return revived;
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

/** The large maps of the controller's world, written in slices. */
const controllerFields: SlicedFields<ControllerWorld> = {
  maps: ['pods', 'objects', 'bindings', 'nodes', 'pairs', 'causes'],
  sets: ['reported'],
  derived: ['podsByObject', 'nodesByVolume', 'volumesByNode'],
  // A pod's specs are its pairs' desired and attached specs: one slice, one copy.
  shared: ['pairs'],
  companions: podPairs,
};

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
  // Format 6: written in slices (src/engine/snapshot.ts), so a leader encoding its world
  // keeps its lease, a pair in one record, the traits of a spec one shared object of its
  // kind. A snapshot is a cache: one of another format is ignored and the log replayed.
  snapshot: slicedCloneCodec<ControllerWorld>(6, controllerFields, reviveControllerWorld),
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
        `(it reads ${[...engineModes, recordedMode].join(', ').replace(/, ([^,]*)$/, ' and $1')} logs); read it with the vole that wrote it, or upgrade`,
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
