/**
 * Gauges computed on scrape from the folded world (as Kubernetes' collectors read its
 * caches): the total volumes of the desired and actual states of world, vole's uncertain
 * pairs and pairs in backoff, and the seq the world was folded to.
 */
import { Gauge, type Registry } from 'prom-client';
import type { CoreReader, CoreWorld } from '../engine/core.js';
import { pluginLabel } from './names.js';

/** Where the gauges read the world, and its core's answers about it. */
export interface WorldSource {
  readonly reader: CoreReader<CoreWorld>;
  readonly world: () => CoreWorld;
}

type Counts = Map<string, number>;

/** The specs counted by their plugin_name label. */
function byPlugin(specs: readonly Parameters<typeof pluginLabel>[0][]): Counts {
  const counts: Counts = new Map();
  for (const spec of specs) {
    const label = pluginLabel(spec);
    counts.set(label, (counts.get(label) ?? 0) + 1);
  }
  return counts;
}

/** Operation records that failed and wait for their retry (behaviour K5.4): a log fact, no clock. */
function pairsInBackoff(world: CoreWorld): number {
  let count = 0;
  for (const records of world.ops.values())
    for (const r of records) if (!r.pending && r.lastError !== null) count++;
  return count;
}

export function registerWorldGauges(registry: Registry, source: WorldSource): void {
  const registers = [registry];
  const { reader } = source;
  new Gauge({
    name: reader.metrics.totalVolumes,
    help: 'Number of volumes in Volume Manager',
    labelNames: ['plugin_name', 'state'],
    registers,
    collect() {
      this.reset();
      const gauges = reader.gauges(source.world());
      for (const [plugin, n] of byPlugin(gauges.desired))
        this.set({ plugin_name: plugin, state: 'desired_state_of_world' }, n);
      for (const [plugin, n] of byPlugin(gauges.actual))
        this.set({ plugin_name: plugin, state: 'actual_state_of_world' }, n);
    },
  });
  if (reader.metrics.controller) registerInUse(registry, source);
  new Gauge({
    name: 'vole_uncertain_pairs',
    help: 'Pairs whose state may or may not exist on the host (a call timed out or was cut off)',
    labelNames: ['pair'],
    registers,
    collect() {
      const { uncertain } = reader.gauges(source.world());
      for (const pair of reader.pairs) this.set({ pair }, uncertain.get(pair) ?? 0);
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
function registerInUse(registry: Registry, source: WorldSource): void {
  new Gauge({
    name: 'storage_count_attachable_volumes_in_use',
    help: 'Measure number of volumes in use',
    labelNames: ['node', 'volume_plugin'],
    registers: [registry],
    collect() {
      this.reset();
      const counts = new Map<string, { node: string; plugin: string; n: number }>();
      for (const entry of source.reader.gauges(source.world()).inUse) {
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
