/**
 * Where the engine's events go: the whole contract a log backend implements for the
 * writer. The SQLite log (src/agent/sqlite-log.ts: its group committer) in production,
 * an in-memory list in simulations and tests, etcd for the controller in cluster mode.
 *
 * - `push` assigns the next seq (1, 2, 3 … with no gap) and buffers the event; the engine
 *   folds it at once, so the seq it returns must be the world's head + 1.
 * - `flush` makes every pushed event durable, in order, all or nothing. A backend that
 *   cannot (lost leadership, a full disk) throws: the engine stops.
 * - `whenDurable` is what an operation waits on before its first call (each call, for the
 *   controller), so a call never runs ahead of its OperationStarted (docs/reliability.md,
 *   "Durable points"); without it, the engine flushes there. After every plan the engine
 *   calls `afterTick`, or `flush` for a sink that only writes when flushed (etcd's).
 * - `close` flushes and releases the log.
 *
 * Readers need even less (src/postmortem/log-world.ts `ReadableLog`): `read` by seq range
 * and `latestSnapshot`.
 */
import type { NewEvent, VoleEvent } from '../events/index.js';
import { Seq } from '../ids.js';

export interface EventSink {
  /** Buffers the event and returns the seq it gets. */
  push(event: NewEvent): Seq;
  /** Makes every pushed event durable (one transaction for the whole buffer). */
  flush(): void;
  /**
   * The engine's tick is over. A sink with a group commit of its own (the SQLite log)
   * commits once a wait needs it or its lazy deadline passes, so it does nothing here;
   * without this member the engine calls flush().
   */
  afterTick?(): void;
  close(): void;
  /**
   * For a log that can be blocked (disk full): undefined when every pushed event is durable
   * (after a flush), else a promise that resolves once they are. With `throughSeq`, only
   * the events up to that seq need be durable (a mount its pod's intent covers). Without
   * it, flush() is taken to make them durable or throw.
   */
  whenDurable?(throughSeq?: number): Promise<void> | undefined;
  /** False while the log cannot be written: the engine starts no operation meanwhile. */
  readonly writable?: boolean;
  /**
   * False while the log's file is not known whole (its whole-file check runs after a
   * restart) or was found damaged: nothing is durable then, and whenDurable() waits.
   */
  readonly verified?: boolean;
  /** Called each time a blocked log is written again. */
  onWritable?(listener: () => void): void;
  /**
   * Called after each commit that wrote events, with its duration (vole_append_latency_seconds)
   * and how many it wrote.
   */
  onCommitted?(listener: (seconds: number, events: number) => void): void;
}

/** An in-memory log: what `vole simulate` uses without `--db`. */
export class MemorySink implements EventSink {
  readonly events: VoleEvent[] = [];

  constructor(initial: readonly VoleEvent[] = []) {
    this.events.push(...initial);
  }

  push(event: NewEvent): Seq {
    const seq = Seq(this.events.length + 1);
    this.events.push({ ...event, seq } as VoleEvent);
    return seq;
  }

  flush(): void {}

  close(): void {}
}
