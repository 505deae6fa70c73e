/**
 * Group commit: events pushed within one turn of the event loop are written in one
 * transaction (PERF.md: one fsync per event caps the engine near 14 k events/s). `flush()`
 * writes the buffer at once; the executor calls it before touching the host.
 */
import { Seq } from '../ids.js';
import type { EventStore } from './store.js';

type Envelope = { seq: number; tsMs: number; type: string };

export class GroupCommitter<E extends Envelope> {
  private buffer: Omit<E, 'seq'>[] = [];
  private durable: number;
  private scheduled = false;

  constructor(private readonly store: EventStore<E>) {
    this.durable = store.head().seq;
  }

  get durableSeq(): Seq {
    return Seq(this.durable);
  }

  get pendingCount(): number {
    return this.buffer.length;
  }

  /** Buffers the event; returns the seq it will have. */
  push(event: Omit<E, 'seq'>): Seq {
    this.buffer.push(event);
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => {
        this.scheduled = false;
        this.flush();
      });
    }
    return Seq(this.durable + this.buffer.length);
  }

  /** Writes the buffer in one transaction. On failure the buffer is kept and the error thrown. */
  flush(): void {
    if (this.buffer.length === 0) return;
    const result = this.store.append(this.buffer, { expectedSeq: this.durable });
    this.durable = result.lastSeq;
    this.buffer = [];
  }

  close(): void {
    this.flush();
    this.store.close();
  }
}
