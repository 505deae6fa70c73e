/**
 * The store port on etcd (etcd3's client): ranges and transactions go to etcd's KV
 * service as one request each (no builder, no extra await), watches and leases through
 * etcd3's own watcher and lease (which reconnect and keep alive by themselves).
 */
import type { Etcd3, ICompare, IKeyValue, IRequestOp, ITxnResponse, Lease } from 'etcd3';
import { assert } from '../assert.js';
import type {
  Compare,
  KeyValue,
  KvStore,
  RangeRequest,
  RangeResult,
  StoreLease,
  StoreWatch,
  TxnOp,
  TxnResult,
  WatchHandlers,
  WatchRange,
} from './store.js';

function keyValue(kv: IKeyValue): KeyValue {
  return {
    key: kv.key.toString(),
    value: kv.value,
    createRevision: Number(kv.create_revision),
    modRevision: Number(kv.mod_revision),
    lease: kv.lease,
  };
}

function compareOf(c: Compare): ICompare {
  const key = Buffer.from(c.key);
  if ('createRevision' in c)
    return { key, result: 'Equal', target: 'Create', create_revision: c.createRevision };
  if ('modRevision' in c)
    return { key, result: 'Equal', target: 'Mod', mod_revision: c.modRevision };
  return { key, result: 'Equal', target: 'Value', value: Buffer.from(c.value) };
}

function opOf(op: TxnOp): IRequestOp {
  if ('put' in op) {
    const request_put = { key: Buffer.from(op.put), value: Buffer.from(op.value) };
    return {
      request_put: op.lease === undefined ? request_put : { ...request_put, lease: op.lease },
    };
  }
  if ('get' in op) return { request_range: { key: Buffer.from(op.get) } };
  const key = Buffer.from(op.delete);
  const end = op.end === undefined ? {} : { range_end: Buffer.from(op.end) };
  return { request_delete_range: { key, ...end } };
}

function txnResult(response: ITxnResponse): TxnResult {
  const gets: (KeyValue | undefined)[] = [];
  let deleted = 0;
  for (const r of response.responses) {
    if (r.response_range !== undefined && r.response_range !== null) {
      const kv = r.response_range.kvs[0];
      gets.push(kv === undefined ? undefined : keyValue(kv));
    }
    if (r.response_delete_range !== undefined && r.response_delete_range !== null)
      deleted += Number(r.response_delete_range.deleted);
  }
  return {
    succeeded: response.succeeded,
    revision: Number(response.header.revision),
    gets,
    deleted,
  };
}

class EtcdLease implements StoreLease {
  constructor(
    private readonly lease: Lease,
    readonly id: string,
  ) {}

  onKeepAlive(listener: () => void): void {
    this.lease.on('keepaliveSucceeded', () => listener());
  }

  onLost(listener: (error: Error) => void): void {
    this.lease.on('lost', (error) => listener(error));
  }

  revoke(): Promise<void> {
    return this.lease.revoke();
  }
}

export class EtcdStore implements KvStore {
  constructor(readonly client: Etcd3) {}

  async get(key: string): Promise<KeyValue | undefined> {
    const response = await this.client.kv.range({ key: Buffer.from(key) });
    const kv = response.kvs[0];
    return kv === undefined ? undefined : keyValue(kv);
  }

  async range(request: RangeRequest): Promise<RangeResult> {
    const response = await this.client.kv.range({
      key: Buffer.from(request.start),
      range_end: Buffer.from(request.end),
      sort_order: request.descending === true ? 'Descend' : 'Ascend',
      sort_target: request.byModRevision === true ? 'Mod' : 'Key',
      ...(request.limit === undefined ? {} : { limit: request.limit }),
      ...(request.revision === undefined || request.revision === 0
        ? {}
        : { revision: request.revision }),
      ...(request.keysOnly === true ? { keys_only: true } : {}),
    });
    return {
      kvs: response.kvs.map(keyValue),
      more: response.more,
      revision: Number(response.header.revision),
      count: Number(response.count),
    };
  }

  async txn(
    compares: readonly Compare[],
    then: readonly TxnOp[],
    otherwise: readonly TxnOp[] = [],
  ): Promise<TxnResult> {
    assert(
      then.length + compares.length <= 128,
      `a transaction of ${then.length} operations exceeds etcd's --max-txn-ops`,
    );
    const response = await this.client.kv.txn({
      compare: compares.map(compareOf),
      success: then.map(opOf),
      failure: otherwise.map(opOf),
    });
    return txnResult(response);
  }

  async watch(
    range: WatchRange,
    fromRevision: number | undefined,
    handlers: WatchHandlers,
  ): Promise<StoreWatch> {
    let builder = this.client.watch();
    builder = 'key' in range ? builder.key(range.key) : builder.prefix(range.prefix);
    if (fromRevision !== undefined) builder = builder.startRevision(String(fromRevision));
    const watcher = await builder.create();
    watcher.on('put', (kv) => handlers.put(keyValue(kv)));
    watcher.on('delete', (kv) => handlers.delete(kv.key.toString(), Number(kv.mod_revision)));
    watcher.on('error', (error) => handlers.error?.(error));
    watcher.on('connected', () => handlers.connected?.());
    return { cancel: () => watcher.cancel() };
  }

  async grantLease(ttlS: number): Promise<StoreLease> {
    const lease = this.client.lease(ttlS, { autoKeepAlive: true });
    lease.on('lost', () => undefined); // a grant failure rejects below; later losses go to onLost
    const id = await lease.grant();
    return new EtcdLease(lease, id);
  }
}
