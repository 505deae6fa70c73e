/**
 * `vole metrics --db F [--at T]`: the metrics a live scrape showed at any moment of a
 * recorded log. Counters and histograms are a fold of the events since the engine start
 * at or before T; the gauges are read from the world at T. kubelet_volume_stats_* and the
 * append latency measure the live host and process, so a log does not have them.
 */
import type { VoleEvent } from '../events/index.js';
import type { AnyCore } from '../engine/cores.js';
import { VoleMetrics } from '../metrics/index.js';
import { coreOfStore, coreWorldAt } from '../postmortem/log-world.js';
import { openReadonly } from '../postmortem/open.js';
import { withProgress } from './progress.js';
import { resolveMoment } from './postmortem.js';

type Store = ReturnType<typeof openReadonly>;

/**
 * The metrics at `seq`, of either core: counters start at the last engine start (they
 * reset there), so the world is folded from a snapshot to just before it, then observed.
 */
function metricsAt(core: AnyCore, store: Store, seq: number): VoleMetrics {
  const replay = (events: Iterable<VoleEvent>, fromSeq: number) =>
    withProgress(events, { label: 'replaying', fromSeq, toSeq: seq });
  const startedSeq = coreWorldAt(core, store, seq, replay).engineStartedSeq;
  let world = coreWorldAt(core, store, Math.max(0, startedSeq - 1), replay);
  const metrics = new VoleMetrics({ source: { reader: core.reader, world: () => world } });
  for (const event of store.read({ fromSeq: world.seq + 1, toSeq: seq })) {
    world = core.fold(world, event);
    metrics.observe(event, world);
  }
  return metrics;
}

/** The exposition text of the metrics at `at` (default: the end of the log). */
export async function metricsAtMoment(db: string, at: string | undefined): Promise<string> {
  const store = openReadonly(db);
  try {
    const seq = resolveMoment(store, at);
    return await metricsAt(coreOfStore(store).core, store, seq).text();
  } finally {
    store.close();
  }
}

export async function metricsCommand(db: string, opts: { at?: string }): Promise<number> {
  process.stdout.write(await metricsAtMoment(db, opts.at));
  return 0;
}
