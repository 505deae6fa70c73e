/**
 * `vole metrics --db F [--at T]`: the metrics a live scrape showed at any moment of a
 * recorded log. Counters and histograms are a fold of the events since the engine start
 * at or before T; the gauges are read from the world at T. kubelet_volume_stats_* and the
 * append latency measure the live host and process, so a log does not have them.
 */
import { controllerCore, coreOfLog, kubeletCore } from '../engine/cores.js';
import type { ControllerWorld } from '../controller/types.js';
import { VoleMetrics } from '../metrics/index.js';
import { fold } from '../world/index.js';
import { openReadonly } from '../postmortem/open.js';
import { rawWorldAt, resolveMoment } from './postmortem.js';

type Store = ReturnType<typeof openReadonly>;

/** The mode of the log: the first engine start says which core wrote it. */
function modeOf(store: Store): 'kubelet' | 'controller' {
  return coreOfLog(store.read({ fromSeq: 1, toSeq: 16 })).mode;
}

function controllerMetrics(store: Store, seq: number): VoleMetrics {
  let world: ControllerWorld = controllerCore.initialWorld();
  const metrics = new VoleMetrics({
    source: { reader: controllerCore.reader, world: () => world },
  });
  for (const event of store.read({ fromSeq: 1, toSeq: seq })) {
    world = controllerCore.fold(world, event);
    metrics.observe(event, world);
  }
  return metrics;
}

function kubeletMetrics(store: Store, seq: number): VoleMetrics {
  // Counters start at the last engine start: fold from just before it, observing.
  const startedSeq = rawWorldAt(store, seq).engineStartedSeq;
  const world = rawWorldAt(store, Math.max(0, startedSeq - 1));
  const metrics = new VoleMetrics({ source: { reader: kubeletCore.reader, world: () => world } });
  for (const event of store.read({ fromSeq: world.seq + 1, toSeq: seq })) {
    fold(world, event);
    metrics.observe(event, world);
  }
  return metrics;
}

/** The exposition text of the metrics at `at` (default: the end of the log). */
export async function metricsAtMoment(db: string, at: string | undefined): Promise<string> {
  const store = openReadonly(db);
  try {
    const seq = resolveMoment(store, at);
    const metrics =
      modeOf(store) === 'controller' ? controllerMetrics(store, seq) : kubeletMetrics(store, seq);
    return await metrics.text();
  } finally {
    store.close();
  }
}

export async function metricsCommand(db: string, opts: { at?: string }): Promise<number> {
  process.stdout.write(await metricsAtMoment(db, opts.at));
  return 0;
}
