/**
 * vole's library root, what an agent imports: the node's volume manager and the
 * attach/detach controller, the plugin interface and the built-in plugins, the events they
 * record and the errors they throw. It loads no gRPC: CSI drivers come from `vole/csi`,
 * fakes and the simulator from `vole/testing`, the engine and its cores from `vole/core`,
 * the Prometheus endpoint from `vole/metrics` (the entry modules are in src/entry/).
 *
 * @packageDocumentation
 */
export {
  VolumeManager,
  WaitForAttachAndMountError,
  type VolumeManagerOpenOptions,
  type VolumeManagerOptions,
} from './agent/volume-manager.js';
export {
  DesiredStateInputs,
  InvalidPodError,
  ReconcilerStatus,
} from './agent/volume-manager-seams.js';
export { ControllerManager, type ControllerManagerOptions } from './agent/controller-manager.js';
export type { NodeInUseCheck } from './execute/controller-executor.js';
export type {
  LogOptions,
  OpenOptions,
  SnapshotPolicy,
  WaitOptions,
  WaitUntilOptions,
} from './agent/lifecycle.js';
export { ControllerInputs, ControllerStatus } from './agent/controller-manager-seams.js';
export type { HostObservation } from './agent/host-check.js';
export {
  OperatorRequests,
  OperatorSocketError,
  type OperatorDecided,
  type OperatorReply,
  type OperatorRequest,
  type OperatorRequestInput,
} from './agent/operator.js';
export {
  caps,
  isAttachable,
  isDeviceMountable,
  PluginError,
  type AttachableVolumePlugin,
  type AttacherOps,
  type BlockMapperOps,
  type CallTarget,
  type DeviceMountableVolumePlugin,
  type DeviceMounterOps,
  type ExpanderOps,
  type PodVolumeOps,
  type ProvisionerOps,
  type SetUpOptions,
  type VolumePlugin,
} from './plugins/types.js';
export { PluginManager, PluginRegistrationError } from './plugins/manager.js';
export { builtinPlugins } from './plugins/builtin/index.js';
export type { BuiltinOptions } from './plugins/builtin/common.js';
export type { ServiceAccountTokens } from './plugins/builtin/content.js';
export { ObjectContents } from './sources/contents.js';
export {
  EventSchemaError,
  type CallError,
  type CallName,
  type CsiDriverCaps,
  type Decision,
  type EventOf,
  type EventType,
  type NewEvent,
  type NodeAllocatable,
  type OperationKind,
  type OperationStep,
  type OperatorAction,
  type OpKey,
  type PluginCaps,
  type ProvisionedVolume,
  type ProvisionRequest,
  type RpcRecord,
  type VoleEvent,
} from './events/types.js';
export type {
  ClusterObject,
  ConfigMapManifest,
  CSIDriver,
  LabelSelector,
  ManifestObject,
  Node,
  NodeSelector,
  ObjectKind,
  PersistentVolume,
  PersistentVolumeClaim,
  Pod,
  PodVolume,
  SecretManifest,
  StorageClass,
  VolumeAttachment,
} from './events/k8s.js';
export { RealClock, type Clock, type TimerHandle } from './clock.js';
export type { EventSink } from './engine/sink.js';
export type { EventListener } from './engine/engine.js';
export type { World } from './kubelet/types.js';
export type { ControllerWorld } from './controller/types.js';
export type { GroupCommitterOptions } from './log/group-commit-options.js';
export {
  ExpectedSeqConflictError,
  LogDamagedError,
  LogOpenError,
  LogReadError,
  LogReadonlyError,
  type LogOpenErrorCode,
  type LogReadErrorCode,
} from './log/errors.js';
