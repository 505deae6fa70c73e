/**
 * The two cores, and the choice of one by a log's mode: EngineStarted records the mode
 * its engine ran (absent = kubelet, the logs older versions wrote), and every reader —
 * status, replay, history, explain, verify, diff, export/import, the inspector — folds a
 * log with the core it names. A mode this version does not know is refused.
 */
import { checkControllerVolume } from '../controller/invariants.js';
import { foldController, initialControllerWorld } from '../controller/fold.js';
import {
  type ControllerOperation,
  controllerDecision,
  describeControllerOperation,
  planController,
} from '../controller/plan.js';
import * as controllerReader from '../controller/readers.js';
import { controllerSnapshotCodec } from '../controller/snapshot-codec.js';
import type { ControllerWorld } from '../controller/types.js';
import type { VoleEvent } from '../events/index.js';
import { describeOperation, kubeletDecision, type Operation, plan } from '../kubelet/planner.js';
import { checkVolume, fold, initialWorld } from '../kubelet/index.js';
import * as kubeletReader from '../kubelet/readers.js';
import { kubeletSnapshotCodec } from '../kubelet/snapshot-codec.js';
import type { World } from '../kubelet/types.js';
import type { SlicedCodec } from '../operations/snapshot-codec.js';
import {
  type Core,
  type CoreOperation,
  type CoreWorld,
  type EngineMode,
  engineModes,
} from './core.js';
import { v8Serializer } from './snapshot.js';

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
  // Its codec (format, shape, revival) is the kubelet's own, on the engine's V8 serializer.
  snapshot: kubeletSnapshotCodec(v8Serializer),
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
  // Its codec (format, the fields written in slices, revival) is the controller's own.
  snapshot: controllerSnapshotCodec(v8Serializer),
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
