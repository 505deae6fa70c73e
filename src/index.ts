/** vole's library entry point. */
export {
  VolumeManager,
  WaitForAttachAndMountError,
  type VolumeManagerOptions,
} from './agent/volume-manager.js';
export {
  DesiredStateInputs,
  InvalidPodError,
  ReconcilerStatus,
} from './agent/volume-manager-seams.js';
export { OperatorRequests } from './agent/operator.js';
export { describeInvalid, type FieldError, validate } from './sources/validate.js';
export { ObjectContents, toLoggedObject } from './sources/contents.js';
export { builtinPlugins } from './plugins/builtin/index.js';
export { ControllerManager, type ControllerManagerOptions } from './agent/controller-manager.js';
export { Engine, engineVersion, type EngineOptions, type RunnerHost } from './engine/engine.js';
export type { Core, CoreWorld, EngineMode, Runner } from './engine/core.js';
export { controllerCore, coreOfLog, coreOfMode, kubeletCore } from './engine/cores.js';
export { callTable } from './operations/calls.js';
export { MemorySink, type EventSink } from './engine/sink.js';
export { RealClock, VirtualClock, type Clock } from './clock.js';
export { PluginManager, PluginRegistrationError } from './plugins/manager.js';
export { FakePlugin } from './plugins/fake.js';
export * from './plugins/types.js';
export * from './events/index.js';
export * from './world/index.js';
export * from './operations/pending.js';
export type * from './operations/types.js';
export type * from './operations/volume-spec.js';
export { plan, type Operation, type PlanResult } from './plan/index.js';
export { parseScenario } from './sim/scenario.js';
export { simulate, type SimulationResult } from './sim/simulate.js';
export {
  VoleMetrics,
  serveMetrics,
  type MetricsServer,
  type WorldSource,
} from './metrics/index.js';
export { why, whyText, volumeWhyText, type WhyAnswer, type VolumeWhy } from './postmortem/why.js';
export type { OperatorRequest, OperatorDecided, OperatorReply } from './agent/operator.js';
export {
  setEventLoopNice,
  eventLoopNiceDefault,
  type EventLoopNiceOutcome,
} from './host/event-loop-priority.js';
