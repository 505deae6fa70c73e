/**
 * Replay / fold: a log of ~1,000,000 events written by the engine (generate.ts), folded
 * end to end from SQLite (read + JSON.parse + validation + fold) and in memory (fold only),
 * against the raw scan + JSON.parse ceiling and the hand-written reducer, side by side in
 * every run.
 */
import Database from 'better-sqlite3';
import { freeze } from 'immer';
import { eventCodec, type VoleEvent } from '../../src/events/index.js';
import { openLog } from '../../src/log/store.js';
import { fold, initialWorld, podCount } from '../../src/kubelet/index.js';
import { emmettFigures } from './emmett.js';
import { generateLog } from './generate.js';
import { compareWithWorld, handFold, handInitial } from './hand-reducer.js';
import {
  type Figure,
  gc,
  median,
  nowMs,
  progress,
  scratchDir,
  type SectionResult,
} from './util.js';

export interface ReplayOptions {
  readonly events: number;
  readonly population: number;
  readonly wave: number;
  readonly runs: number;
  readonly fresh: boolean;
}

/** Raw scan + JSON.parse of every row: what any reader of this table must pay. */
function scanParse(path: string): number {
  const db = new Database(path, { readonly: true });
  let n = 0;
  let sink = 0;
  for (const row of db
    .prepare('SELECT seq, ts_ms, type, data FROM events ORDER BY seq')
    .raw()
    .iterate()) {
    const data = JSON.parse((row as [number, number, string, string])[3]) as object;
    sink += data === null ? 0 : 1;
    n++;
  }
  db.close();
  if (sink !== n) throw new Error('scan: a payload did not parse to an object');
  return n;
}

/** vole's read path without the fold: scan + JSON.parse + validation (EventStore.forEach). */
function scanParseValidate(path: string): number {
  const store = openLog<VoleEvent>(path, { codec: eventCodec, mode: 'readonly' });
  const n = store.forEach({}, () => {});
  store.close();
  return n;
}

/** vole's replay, as the engine's restart does it: EventStore.forEach into a fresh world. */
function replayVole(path: string): number {
  const store = openLog<VoleEvent>(path, { codec: eventCodec, mode: 'readonly' });
  const world = initialWorld();
  store.forEach({}, (event) => fold(world, event));
  store.close();
  return world.seq;
}

/** The hand reducer fed by the raw scan + JSON.parse (no zod: docs/performance.md's reference). */
function replayHand(path: string): number {
  const db = new Database(path, { readonly: true });
  const h = handInitial();
  for (const row of db
    .prepare('SELECT seq, ts_ms, type, data FROM events ORDER BY seq')
    .raw()
    .iterate()) {
    const [seq, tsMs, type, json] = row as [number, number, string, string];
    const event = JSON.parse(json) as Record<string, unknown>;
    event.seq = seq;
    event.tsMs = tsMs;
    event.type = type;
    handFold(h, event as VoleEvent);
  }
  db.close();
  return h.seq;
}

/**
 * The same events with every second pod and object deep-frozen, as immer's produce leaves
 * what it returns: the case vole keeps immer away from. The simulator's Node steps and the
 * inspector's page state use immer; nothing that enters the kubelet log does, because a
 * live fold that saw frozen and plain objects mixed (a restart's come from JSON.parse)
 * would read them through polymorphic property accesses. This figure is that cost.
 */
function withFrozenObjects(events: readonly VoleEvent[]): VoleEvent[] {
  let k = 0;
  return events.map((event) => {
    if (event.type === 'PodUpserted' && k++ % 2 === 0)
      return { ...event, pod: freeze(structuredClone(event.pod), true) };
    if (event.type === 'ObjectUpserted' && k++ % 2 === 0)
      return { ...event, object: freeze(structuredClone(event.object), true) };
    return event;
  });
}

function timed(label: string, expected: number, fn: () => number): number {
  gc();
  const start = nowMs();
  const n = fn();
  const seconds = (nowMs() - start) / 1000;
  if (n !== expected) throw new Error(`${label}: ${n} events, expected ${expected}`);
  const rate = n / seconds;
  progress(
    `  ${label}: ${Math.round(rate).toLocaleString('en-US')} events/s (${seconds.toFixed(2)} s)`,
  );
  return rate;
}

export async function runReplay(opts: ReplayOptions): Promise<SectionResult> {
  const log = await generateLog({
    targetEvents: opts.events,
    population: opts.population,
    wave: opts.wave,
    fresh: opts.fresh,
  });
  const path = log.withoutSnapshots;
  const n = log.events;
  const rates: Record<string, number[]> = {
    ceiling: [],
    validate: [],
    vole: [],
    handSqlite: [],
    memory: [],
    handMemory: [],
    frozen: [],
  };
  // From SQLite first, with nothing else in the heap (a million preloaded events would make
  // every major GC of the replay scan them); then in memory.
  for (let run = 0; run < opts.runs; run++) {
    progress(`replay: from SQLite, run ${run + 1}/${opts.runs}`);
    rates.ceiling!.push(timed('scan + JSON.parse (ceiling)', n, () => scanParse(path)));
    rates.validate!.push(timed('scan + JSON.parse + validation', n, () => scanParseValidate(path)));
    rates.vole!.push(
      timed('vole replay (scan + parse + validation + fold)', n, () => replayVole(path)),
    );
    rates.handSqlite!.push(
      timed('hand reducer from SQLite (scan + parse + hand)', n, () => replayHand(path)),
    );
  }

  progress(`replay: loading ${n.toLocaleString('en-US')} events into memory`);
  const store = openLog<VoleEvent>(path, { codec: eventCodec, mode: 'readonly' });
  const events = [...store.read()];
  store.close();

  // The hand reducer must fold to the same pair states: checked at five points and the end.
  progress('replay: checking the hand reducer against the real fold');
  const world = initialWorld();
  const hand = handInitial();
  const checkpoints = new Set([1, 2, 3, 4].map((k) => Math.floor((n * k) / 5)).concat([n]));
  let checked = 0;
  for (let i = 0; i < n; i++) {
    fold(world, events[i]!);
    handFold(hand, events[i]!);
    if (checkpoints.has(i + 1)) {
      const diffs = compareWithWorld(hand, world);
      if (diffs.length > 0)
        throw new Error(`hand reducer differs from the fold at seq ${i + 1}:\n${diffs.join('\n')}`);
      checked +=
        world.attachments.size + [...world.mounts.values()].reduce((k, m) => k + podCount(m), 0);
    }
  }
  progress(
    `replay: the hand reducer's pair states equal the fold's (${checked.toLocaleString('en-US')} pair states at ${checkpoints.size} points)`,
  );

  const frozenEvents = withFrozenObjects(events);
  for (let run = 0; run < opts.runs; run++) {
    progress(`replay: in memory, run ${run + 1}/${opts.runs}`);
    rates.frozen!.push(
      timed('vole fold in memory, half the objects frozen by immer', n, () => {
        const w = initialWorld();
        for (const event of frozenEvents) fold(w, event);
        return w.seq;
      }),
    );
    rates.memory!.push(
      timed('vole fold in memory', n, () => {
        const w = initialWorld();
        for (const event of events) fold(w, event);
        return w.seq;
      }),
    );
    rates.handMemory!.push(
      timed('hand reducer in memory', n, () => {
        const h = handInitial();
        for (const event of events) handFold(h, event);
        return h.seq;
      }),
    );
  }
  const m = (k: string) => median(rates[k]!);
  const replayShare = rates.vole!.map((v, i) => v / rates.ceiling![i]!);
  const handOverFold = rates.handMemory!.map((v, i) => v / rates.memory![i]!);
  const frozenShare = rates.frozen!.map((v, i) => v / rates.memory![i]!);
  progress('replay: emmett-sqlite aggregateStream');
  const emmett = await emmettFigures({
    kind: 'aggregate',
    events: Math.min(n, 100_000),
    runs: opts.runs,
    dir: scratchDir('emmett-aggregate'),
    payloads: events
      .slice(0, 20_000)
      .map(({ seq: _s, tsMs: _t, type, ...data }) => ({ type, data })),
  });
  const figures: Figure[] = [
    {
      section: 'replay',
      name: `scan + JSON.parse, ${n.toLocaleString('en-US')} events (the ceiling)`,
      value: m('ceiling'),
      unit: 'events/s',
      runs: rates.ceiling,
    },
    {
      section: 'replay',
      name: 'scan + JSON.parse + validation (EventStore.forEach, no fold)',
      value: m('validate'),
      unit: 'events/s',
      runs: rates.validate,
    },
    {
      section: 'replay',
      name: 'replay from SQLite (read + JSON.parse + validation + fold)',
      value: m('vole'),
      unit: 'events/s',
      runs: rates.vole,
    },
    {
      section: 'replay',
      name: 'replay from SQLite ÷ ceiling',
      value: median(replayShare) * 100,
      unit: '%',
      runs: replayShare.map((r) => r * 100),
      target: '≥ 50 %',
      met: median(replayShare) >= 0.5,
    },
    {
      section: 'replay',
      name: 'hand reducer from SQLite (scan + JSON.parse + hand, no zod)',
      value: m('handSqlite'),
      unit: 'events/s',
      runs: rates.handSqlite,
    },
    {
      section: 'replay',
      name: 'fold in memory',
      value: m('memory'),
      unit: 'events/s',
      runs: rates.memory,
      target: '≥ 1,000,000',
      met: m('memory') >= 1_000_000,
    },
    {
      section: 'replay',
      name: 'fold in memory, half the pods and objects deep-frozen (as immer leaves them) ÷ plain',
      value: median(frozenShare) * 100,
      unit: '%',
      runs: frozenShare.map((r) => r * 100),
    },
    {
      section: 'replay',
      name: 'hand reducer in memory',
      value: m('handMemory'),
      unit: 'events/s',
      runs: rates.handMemory,
    },
    {
      section: 'replay',
      name: 'hand reducer ÷ fold (in memory)',
      value: median(handOverFold),
      unit: '×',
      runs: handOverFold,
      target: '≤ 3×',
      met: median(handOverFold) <= 3,
    },
    ...emmett,
  ];
  return {
    section: 'replay',
    figures,
    details: {
      log: {
        events: n,
        livePodsAtEnd: log.livePods,
        attachmentsAtEnd: log.attachments,
        mountsAtEnd: log.mounts,
        cached: log.cached,
      },
      handReducerCheckedPairStates: checked,
    },
  };
}
