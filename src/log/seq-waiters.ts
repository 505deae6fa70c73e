/**
 * Promises waiting for the log to be durable up to a seq: the group committers' (SQLite,
 * the controller log in etcd, and its simulated stand-in) shared bookkeeping. Each waiter
 * is resolved once the durable head reaches its seq, or rejected when the log fails.
 */
export class SeqWaiters {
  /** In the order added; each waits for the head at the time, so their seqs never decrease. */
  private waiting: { seq: number; resolve: () => void; reject: (error: Error) => void }[] = [];

  /** A promise that resolves once `reach(seq)` (or later) is called. */
  wait(seq: number): Promise<void> {
    return new Promise((resolve, reject) => this.waiting.push({ seq, resolve, reject }));
  }

  /** The durable head moved to `durableSeq`: every waiter at or below it is resolved. */
  reach(durableSeq: number): void {
    let done = 0;
    while (done < this.waiting.length && this.waiting[done]!.seq <= durableSeq) done++;
    if (done === 0) return;
    for (const waiter of this.waiting.splice(0, done)) waiter.resolve();
  }

  /** The log will never be durable (fenced, failed): every waiter is rejected with `error`. */
  rejectAll(error: Error): void {
    for (const waiter of this.waiting.splice(0)) waiter.reject(error);
  }
}
