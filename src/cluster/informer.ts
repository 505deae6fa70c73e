/**
 * List, then watch: the whole prefix at a revision, then every change after it. A watch
 * that ends resumes from the last revision seen; when that revision was compacted away it
 * lists again (a reset). Restarts back off from 100 ms to 5 s. etcd3
 * reconnects a disconnected stream itself, from the last revision it delivered.
 */
import { type Etcd3, type IKeyValue, Range, type Watcher } from 'etcd3';

/** Keys per page of a list: a page stays well under gRPC's 4 MiB message limit. */
export const listPageKeys = 1_000;

/**
 * Everything under `prefix` at one revision, in pages (etcd's limit and a continue key,
 * as the kube-apiserver lists): a large prefix in one range answer would exceed gRPC's
 * message limit. `revision` defaults to the current one (the first page's).
 */
export async function listPrefix(
  client: Etcd3,
  prefix: string,
  opts: { revision?: number } = {},
): Promise<{ kvs: IKeyValue[]; revision: number }> {
  const end = Range.prefix(prefix).end;
  const kvs: IKeyValue[] = [];
  let start: Buffer = Buffer.from(prefix);
  let revision = opts.revision ?? 0;
  while (true) {
    let request = client.getAll().inRange(new Range(start, end)).sort('Key', 'Ascend').limit(listPageKeys);
    if (revision > 0) request = request.revision(String(revision));
    const page = await request.exec();
    if (revision === 0) revision = Number(page.header.revision);
    kvs.push(...page.kvs);
    if (!page.more || page.kvs.length === 0) return { kvs, revision };
    start = Buffer.concat([page.kvs[page.kvs.length - 1]!.key, Buffer.from([0])]);
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
