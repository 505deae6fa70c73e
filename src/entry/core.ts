/**
 * `vole/core`: the engine under the facades, for those who build their own. An Engine runs
 * one Core (the kubelet's or the attach/detach controller's: a pure fold of events into a
 * world, and a pure planner of operations from it) with a Runner that calls the plugins,
 * appending every decision and outcome to an EventSink. The facades of the root are
 * assembled from these.
 *
 * @packageDocumentation
 */
export {
  Engine,
  engineVersion,
  type EngineOptions,
  type EventListener,
  type RunnerHost,
} from '../engine/engine.js';
export type {
  Core,
  CoreConfig,
  CoreOperation,
  CorePlan,
  CoreWorld,
  ControllerCoreConfig,
  EngineMode,
  KubeletCoreConfig,
  PlanOptions,
  Runner,
  SnapshotCodec,
  Violation,
} from '../engine/core.js';
export {
  controllerCore,
  coreOfLog,
  coreOfMode,
  kubeletCore,
  UnknownModeError,
  type LogCore,
} from '../engine/cores.js';
export { MemorySink, type EventSink } from '../engine/sink.js';
export { Executor } from '../execute/executor.js';
export { ControllerExecutor, type NodeInUseCheck } from '../execute/controller-executor.js';
export { fold, foldAll, initialWorld } from '../kubelet/fold.js';
export { plan, type Operation, type PlanResult } from '../kubelet/planner.js';
export {
  foldController,
  initialControllerWorld,
  planController,
  type ControllerOperation,
  type ControllerPlan,
} from '../controller/index.js';
export { callTable } from '../operations/calls.js';
export { eventCodec, eventTypes, parseEvent, voleEvent } from '../events/types.js';
export { describeInvalid, validate, type FieldError } from '../sources/validate.js';
export { toLoggedObject } from '../sources/contents.js';
export { why, whyText, volumeWhyText, type VolumeWhy, type WhyAnswer } from '../postmortem/why.js';
export {
  eventLoopNiceDefault,
  setEventLoopNice,
  type EventLoopNiceOutcome,
} from '../host/event-loop-priority.js';
