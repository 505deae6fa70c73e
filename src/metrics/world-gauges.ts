/**
 * Gauges computed on scrape from the folded world (as Kubernetes' collectors read its
 * caches): the total volumes of the desired and actual states of world, vole's uncertain
 * pairs and pairs in backoff, and the seq the world was folded to.
 */
import { Gauge, type Registry } from 'prom-client';
import type { ControllerWorld } from '../controller/types.js';
import { podEntries } from '../world/by-pod.js';
import type { World } from '../world/types.js';
import { pluginLabel } from './names.js';

export type WorldSource =
  | { readonly mode: 'kubelet'; readonly world: () => World }
  | { readonly mode: 'controller'; readonly world: () => ControllerWorld };

type Counts = Map<string, number>;

function add(counts: Counts, key: string): void {
  counts.set(key, (counts.get(key) ?? 0) + 1);
}

/** volume_manager_total_volumes: one per (volume, pod) to mount, and per mounted one. */
function kubeletVolumeCounts(world: World): { desired: Counts; actual: Counts } {
  const desired: Counts = new Map();
  const actual: Counts = new Map();
  for (const volume of world.dsw.values())
    for (const entry of podEntries(volume.pods)) add(desired, pluginLabel(entry.resolved));
  for (const byPod of world.mounts.values())
    for (const mount of podEntries(byPod))
      if (mount.value === 'mounted') add(actual, pluginLabel(mount.spec));
  return { desired, actual };
}

/** attachdetach_controller_total_volumes: desired and attached (volume, node) pairs. */
function controllerVolumeCounts(world: ControllerWorld): { desired: Counts; actual: Counts } {
  const desired: Counts = new Map();
  const actual: Counts = new Map();
  for (const entry of world.dsw.values()) add(desired, pluginLabel(entry.spec));
  for (const a of world.attachments.values())
    if (a.state.value.startsWith('attached')) add(actual, pluginLabel(a.spec));
  return { desired, actual };
}

function uncertainPairs(source: WorldSource): { attachment: number; mount: number } {
  let attachment = 0;
  let mount = 0;
  const world = source.world();
  for (const a of world.attachments.values()) {
    const value = 'state' in a ? a.state.value : a.value;
    if (value === 'attachUncertain' || value === 'attached.deviceUncertain') attachment++;
  }
  if (source.mode === 'kubelet') {
    for (const byPod of source.world().mounts.values())
      for (const m of podEntries(byPod)) if (m.value === 'mountUncertain') mount++;
  }
  return { attachment, mount };
}

/** Operation records that failed and wait for their retry (spec §5.4): a log fact, no clock. */
function pairsInBackoff(world: World | ControllerWorld): number {
  let count = 0;
  for (const records of world.ops.values())
    for (const r of records) if (!r.pending && r.lastError !== null) count++;
  return count;
}

export function registerWorldGauges(registry: Registry, source: WorldSource): void {
  const registers = [registry];
  const totalName =
    source.mode === 'kubelet'
      ? 'volume_manager_total_volumes'
      : 'attachdetach_controller_total_volumes';
  new Gauge({
    name: totalName,
    help: 'Number of volumes in Volume Manager',
    labelNames: ['plugin_name', 'state'],
    registers,
    collect() {
      this.reset();
      const counts =
        source.mode === 'kubelet'
          ? kubeletVolumeCounts(source.world())
          : controllerVolumeCounts(source.world());
      for (const [plugin, n] of counts.desired)
        this.set({ plugin_name: plugin, state: 'desired_state_of_world' }, n);
      for (const [plugin, n] of counts.actual)
        this.set({ plugin_name: plugin, state: 'actual_state_of_world' }, n);
    },
  });
  if (source.mode === 'controller') registerInUse(registry, source.world);
  new Gauge({
    name: 'vole_uncertain_pairs',
    help: 'Pairs whose state may or may not exist on the host (a call timed out or was cut off)',
    labelNames: ['pair'],
    registers,
    collect() {
      const counts = uncertainPairs(source);
      this.set({ pair: 'attachment' }, counts.attachment);
      if (source.mode === 'kubelet') this.set({ pair: 'mount' }, counts.mount);
    },
  });
  new Gauge({
    name: 'vole_pairs_in_backoff',
    help: 'Operations that failed and wait for their retry (exponential backoff)',
    registers,
    collect() {
      this.set(pairsInBackoff(source.world()));
    },
  });
  new Gauge({
    name: 'vole_log_seq',
    help: 'The seq of the last event folded into the world these metrics describe',
    registers,
    collect() {
      this.set(source.world().seq);
    },
  });
}

/** storage_count_attachable_volumes_in_use: desired attachable volumes per node and plugin. */
function registerInUse(registry: Registry, world: () => ControllerWorld): void {
  new Gauge({
    name: 'storage_count_attachable_volumes_in_use',
    help: 'Measure number of volumes in use',
    labelNames: ['node', 'volume_plugin'],
    registers: [registry],
    collect() {
      this.reset();
      const counts = new Map<string, { node: string; plugin: string; n: number }>();
      for (const entry of world().dsw.values()) {
        const plugin = pluginLabel(entry.spec);
        const key = `${entry.node}\u0000${plugin}`;
        const found = counts.get(key) ?? { node: entry.node, plugin, n: 0 };
        found.n++;
        counts.set(key, found);
      }
      for (const c of counts.values()) this.set({ node: c.node, volume_plugin: c.plugin }, c.n);
    },
  });
}
