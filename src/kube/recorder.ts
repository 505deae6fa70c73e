/**
 * `vole record --kubeconfig`: the observing half of `vole controller --kubeconfig` and
 * nothing else. It lists and watches what volume decisions depend on (src/kube/recorded.ts)
 * and appends each change to a log of mode `recorded`, with its resourceVersion and the
 * time it was seen. It plans nothing, runs nothing and writes nothing to the API server
 * (deploy/recorder-rbac.yaml grants get, list and watch only).
 *
 * A watch that breaks (an API server restart) resumes from its last resourceVersion, or
 * lists again after 410 Gone; a recorder started again on its log folds the log first. In
 * each case RecordedState logs only what the log lacks: no change twice, none lost.
 */
import { existsSync } from 'node:fs';
import { eventCodec, type NewEvent, type VoleEvent } from '../events/index.js';
import { recordedMode } from '../engine/cores.js';
import type { EventStore } from '../log/event-store.js';
import { openLog } from '../log/store.js';
import { csiDrivers } from './controller.js';
import type { Clock } from '../clock.js';
import type { KubeTransport } from './http.js';
import { type ApiObject, type KubeInformer, type SeenVia, startInformer } from './informer.js';
import {
  type RecordedKind,
  type Recording,
  RecordedState,
  recordedEngineStarted,
  recordedKey,
  recordedResources,
} from './recorded.js';

export interface RecorderOptions {
  readonly http: KubeTransport;
  /** The API server's address, named in the log's EngineStarted (where it was recorded). */
  readonly server: string;
  /** The time a change is seen, and the informers' retries. */
  readonly clock: Clock;
  readonly db: string;
  readonly say: (line: string) => void;
}

/** How many changes were logged and refused since the start. */
export interface RecorderCounts {
  logged: number;
  refused: number;
}

export class Recorder {
  private readonly store: EventStore<VoleEvent>;
  private readonly state = new RecordedState();
  private informers: KubeInformer[] = [];
  /** Events waiting for the next append (one transaction per turn of the event loop). */
  private queue: NewEvent[] = [];
  private flushing = false;
  /** Until every informer has listed once: nothing is appended before EngineStarted. */
  private started = false;
  /** CSIDrivers and PVs as last seen: the plugins EngineStarted names. */
  private readonly csiObjects = new Map<string, ApiObject>();
  private drivers = new Map<string, boolean>();
  readonly counts: RecorderCounts = { logged: 0, refused: 0 };

  constructor(private readonly opts: RecorderOptions) {
    const fresh = !existsSync(opts.db);
    this.store = openLog(opts.db, { codec: eventCodec, mode: fresh ? 'create' : 'readwrite' });
    let first = true;
    for (const event of this.store.read()) {
      if (first && event.type === 'EngineStarted' && event.mode !== recordedMode) {
        this.store.close();
        throw new Error(
          `${opts.db} was written in mode ${event.mode ?? 'kubelet'}, not recorded: ` +
            'vole record appends to its own logs only; give it another --db path',
        );
      }
      first = false;
      this.state.fold(event);
    }
    this.drivers = new Map(this.state.drivers.map((d) => [d, true]));
  }

  get head(): number {
    return this.store.head().seq;
  }

  /** Starts every list+watch; resolves once each has listed (and EngineStarted is logged). */
  async start(): Promise<void> {
    for (const resource of recordedResources) {
      const kind = resource.kind;
      const informer = startInformer(
        this.opts,
        { path: resource.path, kind, apiVersion: resource.apiVersion },
        {
          upsert: (o, via) => this.upsert(kind, o, via ?? 'watch'),
          remove: (o, via) => this.take(this.state.remove(kind, o, this.seen(via ?? 'watch'))),
          listed: (all) => this.dropUnlisted(kind, all),
        },
        this.opts.say,
      );
      this.informers.push(informer);
    }
    await Promise.all(this.informers.map((i) => i.synced));
    this.started = true;
    this.drivers = this.nextDrivers(new Map());
    this.queue.unshift(this.engineStarted());
    this.flush();
  }

  private seen(via: SeenVia) {
    return { at: new Date(this.opts.clock.nowMs()).toISOString(), via };
  }

  private upsert(kind: RecordedKind, o: ApiObject, via: SeenVia): void {
    if (kind === 'CSIDriver' || kind === 'PersistentVolume') {
      this.csiObjects.set(recordedKey(kind, o.metadata.name), o);
      const next = this.nextDrivers(this.drivers);
      if (this.started && driversText(next) !== driversText(this.drivers)) {
        this.drivers = next;
        this.queue.push(this.engineStarted());
      }
    }
    this.take(this.state.upsert(kind, o, this.seen(via)));
  }

  /** Each driver named now, with those named before kept (as `vole controller` does). */
  private nextDrivers(before: ReadonlyMap<string, boolean>): Map<string, boolean> {
    const next = csiDrivers(this.csiObjects.values());
    for (const [driver, required] of before) if (!next.has(driver)) next.set(driver, required);
    return next;
  }

  private engineStarted(): NewEvent {
    const at = this.opts.clock.nowMs();
    return recordedEngineStarted(
      this.drivers,
      { source: 'api-server', origin: this.opts.server },
      at,
    );
  }

  /** After a list: each object the log holds that the list no longer shows is gone. */
  private dropUnlisted(kind: RecordedKind, listed: readonly ApiObject[]): void {
    if (kind === 'Event') return;
    const keys = new Set(
      listed.map((o) => recordedKey(kind, o.metadata.name, o.metadata.namespace)),
    );
    for (const key of this.state.keysOf(kind)) {
      if (keys.has(key)) continue;
      const [, namespace, name = ''] = key.split('/');
      const metadata = { name, ...(namespace === '' ? {} : { namespace }) };
      const gone: ApiObject = { kind, apiVersion: '', metadata };
      if (kind === 'CSIDriver' || kind === 'PersistentVolume') this.csiObjects.delete(key);
      this.take(this.state.remove(kind, gone, this.seen('list')));
    }
  }

  private take(recording: Recording): void {
    if ('refused' in recording) {
      this.counts.refused++;
      this.opts.say(`not recorded: ${recording.refused}`);
    }
    if (recording.events.length === 0) return;
    this.queue.push(...recording.events);
    if (this.started && !this.flushing) {
      this.flushing = true;
      setImmediate(() => this.flush());
    }
  }

  private flush(): void {
    this.flushing = false;
    if (!this.started || this.queue.length === 0) return;
    const events = this.queue;
    this.queue = [];
    this.store.append(events, { expectedSeq: this.store.head().seq });
    this.counts.logged += events.length;
  }

  /** Stops watching; what was seen is appended first. */
  async stop(): Promise<void> {
    for (const informer of this.informers) await informer.stop().catch(() => undefined);
    this.informers = [];
    this.flush();
    this.store.close();
  }
}

const driversText = (d: ReadonlyMap<string, boolean>) =>
  [...d]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([n, r]) => `${n}=${r}`)
    .join(',');
