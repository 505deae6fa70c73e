/**
 * vole's metrics, in a prom-client Registry of its own (a library never writes to the
 * global default registry): the Kubernetes names of docs/operating.md plus vole's own.
 *
 *   const vm = VolumeManager.create({ ... });
 *   await vm.metrics.registry.metrics();   // the Prometheus text exposition
 */
import { Histogram, Registry } from 'prom-client';
import type { VoleEvent } from '../events/index.js';
import type { CoreWorld } from '../engine/core.js';
import { EventMetrics } from './event-metrics.js';
import { appendSecondsBuckets } from './names.js';
import { type PodVolumeStats, registerVolumeStats } from './volume-stats.js';
import { registerWorldGauges, type WorldSource } from './world-gauges.js';

export { claimVolumes, measureVolumes } from './volume-stats.js';
export type { WorldSource } from './world-gauges.js';
export { serveMetrics, type MetricsServer, parseMetricsAddress } from './server.js';

export interface VoleMetricsOptions {
  /** Where the gauges computed on scrape read the world. */
  readonly source: WorldSource;
  /** Live agents only: statfs of mounted claim volumes (kubelet_volume_stats_*). */
  readonly volumeStats?: () => Promise<PodVolumeStats[]>;
  /** Live engines only: the durable commit time of each batch of appended events. */
  readonly appendLatency?: boolean;
}

export class VoleMetrics {
  readonly registry = new Registry();
  private readonly events: EventMetrics;
  private readonly appendLatency: Histogram | undefined;

  constructor(opts: VoleMetricsOptions) {
    this.events = new EventMetrics(this.registry, opts.source.reader);
    registerWorldGauges(this.registry, opts.source);
    if (opts.volumeStats !== undefined) registerVolumeStats(this.registry, opts.volumeStats);
    this.appendLatency =
      opts.appendLatency === true
        ? new Histogram({
            name: 'vole_append_latency_seconds',
            help: 'Time to make one batch of appended events durable in the log',
            buckets: [...appendSecondsBuckets],
            registers: [this.registry],
          })
        : undefined;
  }

  /** Folds one event, given the world after it (subscribe this to the engine). */
  observe(event: VoleEvent, world: CoreWorld): void {
    this.events.observe(event, world);
  }

  /** Records one durable commit of the log. */
  observeAppend(seconds: number): void {
    this.appendLatency?.observe(seconds);
  }

  /** The Prometheus text exposition. */
  text(): Promise<string> {
    return this.registry.metrics();
  }
}
