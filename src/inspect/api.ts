/**
 * The inspector's read side: everything the page asks for, computed from one read-only
 * store with the post-mortem library (worldAt / replayTo, describeWorld, history, explain).
 *
 * A `Tracker` folds the log once, from its first event, and then follows the head as an
 * agent appends: it keeps the world at the head and every pair it has seen (a pair leaves
 * the world when it returns to its initial state, but the list keeps showing it). Other
 * moments are replayed on request from the latest snapshot at or before them.
 */
import type { VoleEvent } from '../events/index.js';
import {
  coreOfStore,
  describeEvent,
  describeStorage,
  type ReadableLog,
  explain,
  history,
  volumeWhyText,
  whyText,
  type LogWorld,
  logWorld,
  type WorldView,
  worldOfLogAt,
} from '../postmortem/index.js';
import type {
  CauseStep,
  EventSummary,
  HeadUpdate,
  Meta,
  PairKind,
  PairRow,
  Report,
  Transition,
  VerdictPayload,
  WorldPayload,
} from './protocol.js';
import { verdictOf } from './verdict.js';
import { recordedPairs } from './recorded-pairs.js';

/**
 * What the inspector reads: a read-only SQLite log (EventStore), or the controller log in
 * etcd followed live (src/cluster/log-mirror.ts).
 */
export interface Store extends ReadableLog {
  head(): { seq: number };
  read(opts?: { fromSeq?: number; toSeq?: number; limit?: number }): Iterable<VoleEvent>;
  get(seq: number): VoleEvent | undefined;
  bounds(): { firstSeq: number; lastSeq: number; firstTsMs: number; lastTsMs: number };
}

/** Notable events kept for the timeline's marks (the latest ones when there are more). */
const marksMax = 20_000;
/** Events one request or one push carries at most. */
const eventsPageMax = 500;
/** Transitions the pair history returns at most (the latest ones). */
const pairHistoryMax = 500;
/** Reports (ReportRaised) kept for the page (the latest ones). */
const reportsMax = 500;

interface KnownPair {
  readonly kind: PairKind;
  readonly volume: string;
  readonly node: string;
  readonly pod: string | null;
  readonly firstSeq: number;
}

function pairId(kind: PairKind, volume: string, nodeOrPod: string): string {
  return `${kind}|${volume}|${nodeOrPod}`;
}

function parsePairId(id: string): { kind: PairKind; volume: string; key: string } | undefined {
  const match = /^(attachment|mount)\|(.+)\|([^|]+)$/.exec(id);
  if (match === null) return undefined;
  return { kind: match[1] as PairKind, volume: match[2]!, key: match[3]! };
}

function toneOf(event: VoleEvent): EventSummary['tone'] {
  switch (event.type) {
    case 'CallFailed':
    case 'ReportRaised':
      return 'failure';
    case 'OperationFinished':
      return event.outcome === 'ok' ? 'op' : 'failure';
    case 'EngineStarted':
    case 'HostObserved':
      return 'engine';
    case 'PodUpserted':
    case 'PodRemoved':
    case 'ObjectUpserted':
    case 'ObjectRemoved':
    case 'SourcesReady':
    case 'VolumesReportedInUse':
    case 'NodeStatusObserved':
    case 'TokensRefreshDue':
      return 'desired';
    default:
      return 'op';
  }
}

function summarize(event: VoleEvent): EventSummary {
  return {
    seq: event.seq,
    tsMs: event.tsMs,
    type: event.type,
    what: describeEvent(event),
    tone: toneOf(event),
  };
}

/** Plugin calls that act on the attachment (the node-global side) rather than the pod's mount. */
const deviceCalls = new Set([
  'attach',
  'waitForAttach',
  'volumesAreAttached',
  'detach',
  'mountDevice',
  'unmountDevice',
  'nodeExpand',
  'verifyControllerAttached',
  'markDetached',
  'setUpDevice',
  'tearDownDevice',
]);
const podOps = new Set(['mount', 'unmount']);

/** Whether an operation in flight acts on the pair (an attachment: on its node only). */
function operationOfPair(
  o: WorldView['operations'][number],
  pair: Omit<KnownPair, 'firstSeq'>,
): boolean {
  if (o.volume !== pair.volume) return false;
  if (pair.kind === 'mount')
    return o.pod === pair.pod && (o.call === null || !deviceCalls.has(o.call));
  if (o.node !== null && o.node !== pair.node) return false;
  return o.pod === null || (o.call !== null && deviceCalls.has(o.call));
}

/** The pair list at one moment: every known pair, in the state `view` gives it. */
function pairRows(
  view: WorldView,
  known: Iterable<KnownPair>,
  podNames: ReadonlyMap<string, string>,
): PairRow[] {
  const rows = new Map<string, PairRow>();
  const attachments = new Map(
    view.attachments.map((a) => [pairId('attachment', a.volume, a.node), a]),
  );
  const mounts = new Map(view.mounts.map((m) => [pairId('mount', m.volume, m.pod), m]));
  const podName = (uid: string) => {
    const p = view.pods.find((x) => x.uid === uid);
    return p === undefined ? (podNames.get(uid) ?? null) : `${p.namespace}/${p.name}`;
  };
  const add = (pair: Omit<KnownPair, 'firstSeq'> & { firstSeq: number }) => {
    const id = pairId(pair.kind, pair.volume, pair.pod ?? pair.node);
    if (rows.has(id)) return;
    const a = pair.kind === 'attachment' ? attachments.get(id) : undefined;
    const m = pair.kind === 'mount' ? mounts.get(id) : undefined;
    const state = a?.state ?? m?.state ?? (pair.kind === 'attachment' ? 'detached' : 'unmounted');
    const operations = view.operations.filter((o) => operationOfPair(o, pair));
    const backoffs = view.backoffs.filter(
      (b) =>
        b.volume === pair.volume &&
        (pair.kind === 'mount'
          ? b.pod === pair.pod || (b.pod === '' && podOps.has(b.op) && state !== 'mounted')
          : !podOps.has(b.op) ||
            (b.op === 'mount' && b.pod === '' && state !== 'attached.deviceMounted')),
    );
    const lastError = backoffs.find((b) => b.lastError !== null)?.lastError ?? null;
    rows.set(id, {
      id,
      kind: pair.kind,
      volume: pair.volume,
      node: pair.node,
      pod: pair.pod,
      podName: pair.pod === null ? null : podName(pair.pod),
      state,
      present: a !== undefined || m !== undefined,
      uncertain: state.includes('Uncertain'),
      failing: backoffs.length > 0,
      lastError,
      firstSeq: pair.firstSeq,
      devicePath: a?.devicePath ?? '',
      deviceMountPath: a?.deviceMountPath ?? '',
      outerVolumeSpecName: m?.outerVolumeSpecName ?? '',
      remountRequired: m?.remountRequired ?? false,
      operations,
      backoffs,
    });
  };
  for (const k of known) if (k.firstSeq <= view.seq) add(k);
  // Pairs the world holds that the tracker has not seen (a moment past its head).
  for (const a of view.attachments)
    add({ kind: 'attachment', volume: a.volume, node: a.node, pod: null, firstSeq: view.seq });
  for (const m of view.mounts)
    add({ kind: 'mount', volume: m.volume, node: view.node ?? '', pod: m.pod, firstSeq: view.seq });
  return [...rows.values()].sort(
    (x, y) =>
      x.volume.localeCompare(y.volume) ||
      (x.kind === y.kind ? 0 : x.kind === 'attachment' ? -1 : 1) ||
      (x.pod ?? '').localeCompare(y.pod ?? ''),
  );
}

/** Follows a log: the world at its head, the pairs seen, the notable events. */
export class Tracker {
  /** The log's world, folded with the core its EngineStarted names (once it has events). */
  private world: LogWorld;
  private trackedSeq = 0;
  private reports: Report[] = [];
  private readonly known = new Map<string, KnownPair>();
  private readonly podNames = new Map<string, string>();
  private marks: Meta['marks'] = [];
  private version = '';
  /** Where a recorded log's facts came from (its EngineStarted), for the title. */
  private recordedFrom: string | undefined;
  /** The verdict at the head, judged again only once the log grew. */
  private judged: VerdictPayload | undefined;

  constructor(readonly store: Store) {
    // A log whose first entries were compacted into a snapshot starts from that snapshot.
    const firstSeq = store.bounds().firstSeq;
    const snapshot =
      firstSeq > 1 ? store.latestSnapshot({ atOrBeforeSeq: firstSeq - 1 }) : undefined;
    this.world = logWorld(coreOfStore(store), snapshot);
    this.trackedSeq = this.world.seq;
    this.catchUp();
  }

  get head(): number {
    return this.trackedSeq;
  }

  /**
   * Folds the events appended since the last call; returns them (the last `eventsPageMax`)
   * or an empty list when the log has not grown.
   */
  catchUp(): EventSummary[] {
    if (this.store.head().seq <= this.trackedSeq) return [];
    // A log that was empty when the tracker opened it: its first events name the core.
    if (this.trackedSeq === 0) this.world = logWorld(coreOfStore(this.store));
    const fresh: EventSummary[] = [];
    for (const event of this.store.read({ fromSeq: this.trackedSeq + 1 })) {
      const volume = this.world.eventVolume(event);
      this.world.fold(event);
      this.trackedSeq = event.seq;
      this.observe(event, volume);
      fresh.push(summarize(event));
      if (fresh.length > 2 * eventsPageMax) fresh.splice(0, fresh.length - eventsPageMax);
    }
    return fresh.slice(-eventsPageMax);
  }

  private observe(event: VoleEvent, volume: string | undefined): void {
    if (event.type === 'PodUpserted') {
      const meta = event.pod.metadata;
      if (meta.uid !== undefined)
        this.podNames.set(meta.uid, `${meta.namespace ?? 'default'}/${meta.name}`);
    }
    if (event.type === 'EngineStarted') {
      this.version = event.version;
      if (event.recorded !== undefined)
        this.recordedFrom = `${event.recorded.source} ${event.recorded.origin}`;
    }
    if (event.type === 'ReportRaised') {
      const { seq, tsMs, reason, pod, volume: v, node, message } = event;
      this.reports.push({ seq, tsMs, reason, pod, volume: v, node, message });
      if (this.reports.length > 2 * reportsMax) this.reports = this.reports.slice(-reportsMax);
    }
    const tone = toneOf(event);
    if (tone === 'failure' || tone === 'engine') {
      this.marks.push({ seq: event.seq, tone });
      if (this.marks.length > 2 * marksMax) this.marks = this.marks.slice(-marksMax);
    }
    const world = this.world;
    const volumes = volume === undefined ? world.volumes() : [volume];
    for (const v of volumes) {
      for (const pair of world.pairs(v).values()) {
        this.register({
          kind: pair.pair,
          volume: pair.volume,
          node: pair.node,
          pod: pair.pod,
          firstSeq: event.seq,
        });
      }
    }
  }

  private register(pair: KnownPair): void {
    const id = pairId(pair.kind, pair.volume, pair.pod ?? pair.node);
    if (!this.known.has(id)) this.known.set(id, pair);
  }

  /** `name`: the log's file name, or what else the page shows for it. */
  meta(name: string): Meta {
    const bounds = this.store.bounds();
    return {
      file: name,
      head: this.trackedSeq,
      firstSeq: bounds.firstSeq,
      firstTsMs: bounds.firstTsMs,
      lastTsMs: this.world.tsMs,
      title:
        this.recordedFrom === undefined
          ? this.world.title
          : `a recorded cluster (${this.recordedFrom})`,
      version: this.version,
      marks: this.marks.slice(-marksMax),
    };
  }

  /** The world at `seq` (clamped to the tracked head) with the pair list. */
  worldAt(seq: number): WorldPayload {
    const at = Math.max(0, Math.min(seq, this.trackedSeq));
    const world = at === this.trackedSeq ? this.world : worldOfLogAt(this.store, at);
    const view = world.describe();
    const originMs = this.store.bounds().firstTsMs;
    // A recorded log's pairs are the API's VolumeAttachments and the nodes' logs, not decisions.
    const pairs =
      this.recordedFrom === undefined
        ? pairRows(view, this.known.values(), this.podNames).map((pair) => ({
            ...pair,
            why: pairWhy(world, pair, originMs),
          }))
        : recordedPairs(this.store.read({ toSeq: at }));
    return {
      seq: at,
      head: this.trackedSeq,
      view,
      pairs,
      reports: this.reports.filter((r) => r.seq <= at).slice(-reportsMax),
      storage: describeStorage(world.pvWorld, view),
    };
  }

  /** The judge's verdict on the log up to the head (`vole judge`). */
  verdict(): VerdictPayload {
    if (this.judged?.toSeq !== this.trackedSeq)
      this.judged = verdictOf(this.store, this.trackedSeq);
    return this.judged;
  }

  /** What the page gets pushed after `catchUp` found new events. */
  update(events: EventSummary[]): HeadUpdate {
    const marksFrom = events[0]?.seq ?? this.trackedSeq + 1;
    return {
      head: this.trackedSeq,
      lastTsMs: this.world.tsMs,
      events,
      marks: this.marks.filter((m) => m.seq >= marksFrom),
      world: this.worldAt(this.trackedSeq),
    };
  }

  /** Event summaries with from <= seq <= to, at most `eventsPageMax`. */
  events(from: number, to: number): EventSummary[] {
    const last = Math.min(to, this.trackedSeq);
    if (last < from) return [];
    return [
      ...this.store.read({ fromSeq: Math.max(from, 1), toSeq: last, limit: eventsPageMax }),
    ].map(summarize);
  }

  event(seq: number): VoleEvent | undefined {
    return seq > this.trackedSeq ? undefined : this.store.get(seq);
  }

  explain(seq: number): CauseStep[] | undefined {
    if (seq < 1 || seq > this.trackedSeq || this.store.get(seq) === undefined) return undefined;
    return explain((s) => this.store.get(s), seq);
  }

  /** The transitions of one pair up to the head (the latest `pairHistoryMax`). */
  pairHistory(id: string): Transition[] | undefined {
    const pair = parsePairId(id);
    if (pair === undefined) return undefined;
    const out: Transition[] = [];
    const filter =
      pair.kind === 'mount'
        ? { volume: pair.volume, pod: pair.key }
        : { volume: pair.volume, node: pair.key };
    for (const t of history(this.store.read({ toSeq: this.trackedSeq }), filter)) {
      if (t.pair !== pair.kind) continue;
      out.push(t);
      if (out.length > 2 * pairHistoryMax) out.splice(0, out.length - pairHistoryMax);
    }
    return out.slice(-pairHistoryMax);
  }
}

/** `vole why` for one pair: a mount's volume of its pod, an attachment's volume. */
function pairWhy(world: LogWorld, pair: PairRow, originMs: number): string | null {
  if (pair.kind === 'mount' && pair.pod !== null) {
    const entry = world.why(pair.pod)?.volumes.find((v) => v.volume === pair.volume);
    return entry === undefined ? null : volumeWhyText(entry, { originMs }).join('\n');
  }
  const answer = world.why(pair.volume);
  return answer === undefined ? null : whyText(answer, { originMs });
}
