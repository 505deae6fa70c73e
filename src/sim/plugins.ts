/** The plugins of a simulation: the built-in fakes plus the scenario's scripted ones. */
import { FakeCsiDriver } from '../csi/fake.js';
import { noCsiHost } from '../csi/host.js';
import { csiPlugin } from '../csi/plugin.js';
import type { Clock } from '../clock.js';
import { type FakeHost, FakePlugin, type FakeCallRecord } from '../plugins/fake.js';
import { PluginManager } from '../plugins/manager.js';
import { caps, type VolumePlugin } from '../plugins/types.js';
import { builtinPluginNames } from '../desired/resolve.js';
import type { ObjectContents } from '../sources/contents.js';
import type { ScenarioPlugin } from './scenario.js';

/** Built-in sources as fakes, neither attachable nor device-mountable (docs/scenarios.md). */
const builtins: ScenarioPlugin[] = [
  { name: builtinPluginNames.emptyDir },
  { name: builtinPluginNames.hostPath },
  { name: builtinPluginNames.configMap, requiresRemount: true },
  { name: builtinPluginNames.secret, requiresRemount: true },
  { name: builtinPluginNames.downwardAPI, requiresRemount: true },
  { name: builtinPluginNames.projected, requiresRemount: true },
  { name: builtinPluginNames.local },
];

interface SimulationPluginOptions {
  clock: Clock;
  journal: FakeCallRecord[];
  host?: FakeHost;
  /** The node's name (a CSI driver's node_id). */
  node?: string;
  /** What the configMap, secret and projected fakes read at setUp (the scenario's objects). */
  contents?: ObjectContents;
}

/** The plugins that read ConfigMaps and Secrets at setUp, scripted faults or not. */
const contentReaders: ReadonlySet<string> = new Set([
  builtinPluginNames.configMap,
  builtinPluginNames.secret,
  builtinPluginNames.projected,
]);

/** vole's own CSI plugin in front of a scripted driver at the gRPC boundary. */
function scriptedCsiDriver(
  p: Extract<ScenarioPlugin, { csi: object }>,
  opts: SimulationPluginOptions,
): VolumePlugin {
  const node = opts.node ?? 'node-1';
  const zone = p.csi.zones?.[node];
  const topologyKey = p.csi.topologyKey;
  const transport = new FakeCsiDriver({
    name: p.name,
    backend: { capacityBytes: p.csi.capacityBytes ?? Number.MAX_SAFE_INTEGER, volumes: new Map() },
    ...(p.faults === undefined ? {} : { faults: p.faults }),
    ...(p.volumeFaults === undefined ? {} : { volumeFaults: p.volumeFaults }),
    clock: opts.clock,
    journal: opts.journal,
    ...(opts.host === undefined ? {} : { host: opts.host }),
  });
  const driverCaps = {
    publishUnpublish: p.csi.publishUnpublish ?? false,
    stageUnstage: p.csi.stageUnstage ?? false,
    expand: p.csi.expand ?? false,
    singleNodeMultiWriter: false,
    maxVolumesPerNode: p.csi.maxVolumesPerNode ?? 0,
    createDelete: p.csi.createDelete ?? false,
    controllerExpand: p.csi.controllerExpand ?? false,
    ...(topologyKey === undefined || zone === undefined
      ? {}
      : { accessibleTopology: { [topologyKey]: zone } }),
  };
  return csiPlugin(
    { name: p.name, transport, caps: driverCaps, nodeId: node },
    { root: '/var/lib/vole', host: noCsiHost, nowMs: () => opts.clock.nowMs() },
  );
}

function scriptedPlugin(
  p: Exclude<ScenarioPlugin, { csi: object }>,
  opts: SimulationPluginOptions,
) {
  return new FakePlugin({
    caps: caps(p.name, {
      attachable: p.attachable ?? false,
      deviceMountable: p.deviceMountable ?? p.attachable ?? false,
      blockMappable: p.blockMappable ?? false,
      nodeExpandable: p.nodeExpandable ?? false,
      requiresFSResize: p.requiresFSResize ?? true,
      requiresRemount: p.requiresRemount ?? false,
    }),
    ...(p.faults === undefined ? {} : { faults: p.faults }),
    ...(p.volumeFaults === undefined ? {} : { volumeFaults: p.volumeFaults }),
    clock: opts.clock,
    journal: opts.journal,
    ...(opts.host === undefined ? {} : { host: opts.host }),
    ...(opts.contents === undefined || !contentReaders.has(p.name)
      ? {}
      : { contents: opts.contents }),
  });
}

export function simulationPlugins(
  scenarioPlugins: readonly ScenarioPlugin[],
  opts: SimulationPluginOptions,
): PluginManager {
  const byName = new Map<string, ScenarioPlugin>();
  for (const p of [...builtins, ...scenarioPlugins]) byName.set(p.name, p);
  const manager = new PluginManager();
  for (const p of byName.values()) {
    manager.register('csi' in p ? scriptedCsiDriver(p, opts) : scriptedPlugin(p, opts));
  }
  return manager;
}
