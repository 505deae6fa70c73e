/**
 * The waits on a log's durable head: the group committers' (SQLite, the controller log in
 * etcd, and its simulated stand-in) shared bookkeeping. A wait for a seq ends once the
 * durable head reaches it, or with the log's failure; after a failure every wait fails.
 */
export class SeqWaiters {
  /** In the order of their seqs (a wait for an earlier seq than the head goes before later ones). */
  private waiting: { seq: number; resolve: () => void; reject: (error: Error) => void }[] = [];
  private failed: Error | null = null;

  /** The failure that ended the log (fenced, refused), or null while it works. */
  get fatal(): Error | null {
    return this.failed;
  }

  /**
   * Undefined when `seq` is durable already (`durableSeq` ≥ it) and the log has not failed;
   * else a promise that resolves once `reach(seq)` is called and rejects once it fails.
   */
  pending(seq: number, durableSeq: number): Promise<void> | undefined {
    if (this.failed !== null) return Promise.reject(this.failed);
    if (durableSeq >= seq) return undefined;
    return new Promise((resolve, reject) => {
      let at = this.waiting.length;
      while (at > 0 && this.waiting[at - 1]!.seq > seq) at--;
      this.waiting.splice(at, 0, { seq, resolve, reject });
    });
  }

  /** The durable head moved to `durableSeq`: every wait at or below it ends. */
  reach(durableSeq: number): void {
    let done = 0;
    while (done < this.waiting.length && this.waiting[done]!.seq <= durableSeq) done++;
    if (done === 0) return;
    for (const waiter of this.waiting.splice(0, done)) waiter.resolve();
  }

  /** The log will never be durable: every wait fails with `error`. False when it had failed already. */
  fail(error: Error): boolean {
    if (this.failed !== null) return false;
    this.failed = error;
    for (const waiter of this.waiting.splice(0)) waiter.reject(error);
    return true;
  }
}
