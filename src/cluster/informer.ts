/**
 * List, then watch: the whole prefix at a revision, then every change after it. A watch
 * that ends resumes from the last revision seen; when that revision was compacted away it
 * lists again (a reset). Restarts back off from 100 ms to 5 s. etcd3
 * reconnects a disconnected stream itself, from the last revision it delivered.
 */
import { type Etcd3, type IKeyValue, Range, type Watcher } from 'etcd3';

/** Keys per page of a list: a page stays well under gRPC's 4 MiB message limit. */
export const listPageKeys = 1_000;

/** Keys as numbers (big-endian, zero-padded to this many bytes) for guessing page bounds. */
const boundBytes = 512;

function keyNumber(key: Buffer): bigint {
  const padded = Buffer.alloc(boundBytes);
  key.copy(padded, 0, 0, Math.min(key.length, boundBytes));
  return BigInt(`0x${padded.toString('hex')}`);
}

function numberKey(value: bigint): Buffer {
  return Buffer.from(value.toString(16).padStart(boundBytes * 2, '0'), 'hex');
}

/**
 * The end of the next page's range, guessed from the key span the last page covered:
 * etcd 3.4 walks the whole rest of a range to count it, whatever the limit, so pages over
 * an unbounded range cost O(keys left) each and a list of N keys O(N²) (0.8 s a page at
 * 200,000 keys on the benchmark machine). A bounded range costs what it holds.
 */
function guessEnd(start: Buffer, span: bigint | null, end: Buffer): Buffer {
  if (span === null || start.length > boundBytes) return end;
  const bound = numberKey(keyNumber(start) + span);
  return bound.length > boundBytes || Buffer.compare(bound, end) >= 0 || Buffer.compare(bound, start) <= 0 ? end : bound;
}

/**
 * Everything under `prefix` at one revision, in pages (etcd's limit and a continue key,
 * as the kube-apiserver lists): a large prefix in one range answer would exceed gRPC's
 * message limit. Each page after the first asks a range bounded by a guess of where
 * `pageKeys` keys end (the span of the last page, widened when a page comes back short),
 * so each costs etcd about what it returns. `revision` defaults to the current one.
 */
export async function listPrefix(
  client: Etcd3,
  prefix: string,
  opts: { revision?: number; pageKeys?: number } = {},
): Promise<{ kvs: IKeyValue[]; revision: number }> {
  const pageKeys = opts.pageKeys ?? listPageKeys;
  const end = Buffer.from(Range.prefix(prefix).end);
  const kvs: IKeyValue[] = [];
  let start: Buffer = Buffer.from(prefix);
  let revision = opts.revision ?? 0;
  let span: bigint | null = null;
  while (true) {
    const bound = guessEnd(start, span, end);
    let request = client.getAll().inRange(new Range(start, bound)).sort('Key', 'Ascend').limit(pageKeys);
    if (revision > 0) request = request.revision(String(revision));
    const page = await request.exec();
    if (revision === 0) revision = Number(page.header.revision);
    kvs.push(...page.kvs);
    if (page.more && page.kvs.length > 0) {
      const last = page.kvs[page.kvs.length - 1]!.key;
      span = keyNumber(last) - keyNumber(start) + 1n; // what held pageKeys keys
      start = Buffer.concat([last, Buffer.from([0])]);
    } else {
      if (bound === end) return { kvs, revision };
      const grow = BigInt(Math.min(8, Math.ceil(pageKeys / Math.max(1, page.kvs.length))));
      span = (span ?? 1n) * grow;
      start = bound;
    }
  }
}

export interface PrefixHandlers {
  /** Everything under the prefix at `revision` (the first list, and after a compaction). */
  reset(kvs: readonly IKeyValue[], revision: number): void;
  put(kv: IKeyValue): void;
  delete(key: string): void;
  /** A list or watch failed; it is retried (for progress lines and logs). */
  trouble?(message: string): void;
}

const backoffMsMin = 100;
const backoffMsMax = 5_000;

export class PrefixInformer {
  private watcher: Watcher | null = null;
  private revision = 0;
  private stopped = false;
  private backoffMs = backoffMsMin;
  private timer: NodeJS.Timeout | null = null;
  private listed = false;

  constructor(
    private readonly client: Etcd3,
    readonly prefix: string,
    private readonly handlers: PrefixHandlers,
  ) {}

  /** Lists and starts watching; resolves after the first successful list. */
  async start(): Promise<void> {
    while (!this.stopped && !this.listed) {
      try {
        await this.list();
      } catch (error) {
        this.handlers.trouble?.(`list ${this.prefix}: ${(error as Error).message}`);
        await new Promise((resolve) => setTimeout(resolve, this.nextBackoff()));
      }
    }
    if (!this.stopped) await this.watchFrom(this.revision + 1);
  }

  get lastRevision(): number {
    return this.revision;
  }

  private nextBackoff(): number {
    const ms = this.backoffMs;
    this.backoffMs = Math.min(this.backoffMs * 2, backoffMsMax);
    return ms;
  }

  private async list(): Promise<void> {
    const { kvs, revision } = await listPrefix(this.client, this.prefix);
    this.revision = revision;
    this.listed = true;
    this.handlers.reset(kvs, this.revision);
  }

  private async watchFrom(revision: number): Promise<void> {
    const watcher = await this.client
      .watch()
      .prefix(this.prefix)
      .startRevision(String(revision))
      .create();
    if (this.stopped) return void (await watcher.cancel().catch(() => undefined));
    this.watcher = watcher;
    watcher.on('connected', () => {
      this.backoffMs = backoffMsMin;
    });
    watcher.on('put', (kv) => {
      this.revision = Math.max(this.revision, Number(kv.mod_revision));
      this.handlers.put(kv);
    });
    watcher.on('delete', (kv) => {
      this.revision = Math.max(this.revision, Number(kv.mod_revision));
      this.handlers.delete(kv.key.toString());
    });
    watcher.on('error', (error) => this.restart(String(error.message ?? error)));
  }

  /**
   * The watch ended: resume after the last revision, or list again if that revision was
   * compacted (etcd cancels such a watch; etcd3 passes no reason, so the range at the last
   * revision is asked).
   */
  private restart(why: string): void {
    if (this.stopped) return;
    const old = this.watcher;
    this.watcher = null;
    void old?.cancel().catch(() => undefined);
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.resume(why).catch((error: Error) => this.restart(error.message));
    }, this.nextBackoff());
  }

  private async resume(why: string): Promise<void> {
    let compacted = /compact/i.test(why);
    if (!compacted && this.listed) {
      try {
        await this.client.getAll().prefix(this.prefix).revision(String(this.revision)).limit(1).keys();
      } catch (error) {
        compacted = /compact/i.test((error as Error).message);
        if (!compacted) throw error;
      }
    }
    this.handlers.trouble?.(`watch ${this.prefix}: ${why}${compacted ? ' (compacted: listing again)' : ''}`);
    if (compacted) this.listed = false;
    await this.start();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== null) clearTimeout(this.timer);
    const watcher = this.watcher;
    this.watcher = null;
    await watcher?.cancel().catch(() => undefined);
  }
}
