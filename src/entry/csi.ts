/**
 * `vole/csi`: any CSI driver as a volume plugin. The registry connects to a driver's
 * endpoint over gRPC (`registry.add('unix:///…/csi.sock', 'flag')`), asks what it is and
 * can do, and registers a plugin for it in the PluginManager the volume manager uses; the
 * watcher does the same for drivers that register through `<root>/plugins_registry/`, as
 * the kubelet's plugin watcher. Give the registry's events to `vm.inputs.recordCsiDriver`
 * so the log knows each driver. This entry loads gRPC; the root does not.
 *
 * @packageDocumentation
 */
export { CsiDriverRegistry, type DriverEvent, type DriverInfo } from '../csi/registry.js';
export { RegistrationWatcher } from '../csi/watcher.js';
export {
  csiPlugin,
  csiPluginCaps,
  type CsiDriverHandle,
  type CsiPluginOptions,
} from '../csi/plugin.js';
export { CsiRpcError, GrpcTransport, type CsiTransport, type RpcInfo } from '../csi/transport.js';
export { noCsiHost, realCsiHost, type CsiHostOps } from '../csi/host.js';
export { csiPublishPath, csiStagingPath } from '../csi/paths.js';
export { pluginsRegistryDirName } from '../host/paths.js';
export type { CsiDriverCaps } from '../events/types.js';
