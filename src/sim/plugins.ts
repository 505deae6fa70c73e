/** The plugins of a simulation: the built-in fakes plus the scenario's scripted ones. */
import type { Clock } from '../clock.js';
import { type FakeHost, FakePlugin, type FakeCallRecord } from '../plugins/fake.js';
import { PluginManager } from '../plugins/manager.js';
import { caps } from '../plugins/types.js';
import { builtinPluginNames } from '../world/resolve.js';
import type { ScenarioPlugin } from './scenario.js';

/** Built-in sources as fakes, neither attachable nor device-mountable (SCENARIOS.md). */
const builtins: ScenarioPlugin[] = [
  { name: builtinPluginNames.emptyDir },
  { name: builtinPluginNames.hostPath },
  { name: builtinPluginNames.configMap, requiresRemount: true },
  { name: builtinPluginNames.secret, requiresRemount: true },
  { name: builtinPluginNames.local },
];

export function simulationPlugins(
  scenarioPlugins: readonly ScenarioPlugin[],
  opts: { clock: Clock; journal: FakeCallRecord[]; host?: FakeHost },
): PluginManager {
  const byName = new Map<string, ScenarioPlugin>();
  for (const p of [...builtins, ...scenarioPlugins]) byName.set(p.name, p);
  const manager = new PluginManager();
  for (const p of byName.values()) {
    manager.register(
      new FakePlugin({
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
      }),
    );
  }
  return manager;
}
