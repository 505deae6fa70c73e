/**
 * The invariants a run's history must pass, read from the vole logs of one cluster (each
 * node agent's log and each `vole controller` replica's log), read-only, while they run:
 * - no mount leaked: a pod the agent's log saw removed (a pod deleted while the agent was
 *   down or cut off included: its PodRemoved comes once the agent lists its pods again) has
 *   no mount left at the log's end;
 * - never a detach of a volume its node reports in use (node.status.volumesInUse, as the
 *   controller's world held it when it decided) unless forced, the reason in the event;
 * - the controller's invariants (src/controller/invariants.ts) after every event of each
 *   replica's log, among them a ReadWriteOnce volume attached, or being attached, to one
 *   node at most, and seqs without a gap;
 * - a deposed replica writes nothing: the logs merged by time, each event is written by the
 *   replica whose EngineStarted (it starts its engine once it holds the Lease) came last.
 * `vole verify` checks each log against the planner and the core's own invariants; this
 * checks what only the history of several logs shows, and counts every check it made.
 */
import { existsSync } from 'node:fs';
import type { EventOf, VoleEvent } from '../../src/events/index.js';
import { checkControllerVolume } from '../../src/controller/invariants.js';
import { controllerCore } from '../../src/engine/cores.js';
import { logWorld, peekCore, replayInto } from '../../src/postmortem/log-world.js';
import { openReadonly } from '../../src/postmortem/open.js';

export interface HistoryCheck {
  /** How many times an invariant was checked (each event or transition it applies to). */
  readonly checked: number;
  /** What broke, each naming its log, invariant and seq: none when the history is sound. */
  readonly violations: string[];
}

/**
 * Every event of the log at `path`, read at once (the writer may go on meanwhile); none
 * when there is no log yet (a standby replica opens its log once it leads).
 */
function eventsOf(path: string): VoleEvent[] {
  if (!existsSync(path)) return [];
  const store = openReadonly(path);
  try {
    return [...store.read()];
  } finally {
    store.close();
  }
}

/** A pod the agent's log saw removed must have no mount left at the log's end. */
function checkAgentLog(path: string, out: { checked: number; violations: string[] }): void {
  if (!existsSync(path)) {
    out.violations.push(`${path}: no agent log there (is it the path given to vole run --db?)`);
    return;
  }
  const events = eventsOf(path);
  const removed = new Set(
    events.filter((e) => e.type === 'PodRemoved').map((e) => (e as EventOf<'PodRemoved'>).uid),
  );
  const peeked = peekCore(events);
  const world = replayInto(logWorld(peeked.logCore), peeked.events);
  for (const volume of world.volumes())
    for (const pair of world.pairs(volume).values()) {
      if (pair.pair !== 'mount' || pair.pod === null || !removed.has(pair.pod)) continue;
      if (pair.state !== 'unmounted')
        out.violations.push(
          `${path}: mount leaked: ${volume} of removed pod ${pair.pod} is ${pair.state} at seq ${world.seq}`,
        );
    }
  out.checked += removed.size; // one check a removed pod: none of its mounts is left
}

/**
 * The controller log folded again: seqs from its first without a gap, the controller's
 * invariants after every event, and no detach of a volume its node reported in use unless
 * forced (the reason is the event's `forced`). Answers the problems found.
 */
export function checkControllerLog(events: readonly VoleEvent[]): string[] {
  const world = controllerCore.initialWorld();
  const problems: string[] = [];
  events.forEach((event, i) => {
    if (i > 0 && event.seq !== events[i - 1]!.seq + 1)
      problems.push(`the log skips from seq ${events[i - 1]!.seq} to ${event.seq}`);
    if (event.type === 'OperationStarted' && event.op === 'detach') {
      const node = world.nodes.get(event.node as never);
      if (node?.volumesInUse.has(event.volume) === true && event.forced === undefined)
        problems.push(
          `seq ${event.seq}: detach of ${event.volume} from ${event.node} while in use, not forced`,
        );
    }
    controllerCore.fold(world, event);
    for (const v of world.dirty)
      problems.push(
        ...checkControllerVolume(world, v).map((x) => `seq ${event.seq}: ${x.message}`),
      );
    world.dirty.clear();
  });
  return problems;
}

/** Merged by time, every event is written by the replica that started its engine last. */
function checkDeposedWriteNothing(
  logs: ReadonlyMap<string, readonly VoleEvent[]>,
  out: { checked: number; violations: string[] },
): void {
  const merged = [...logs].flatMap(([path, events]) => events.map((event) => ({ path, event })));
  // Stable: a log's own events keep their order when two share a millisecond.
  merged.sort((a, b) => a.event.tsMs - b.event.tsMs);
  let leader: string | undefined;
  for (const { path, event } of merged) {
    if (event.type === 'EngineStarted') leader = path;
    out.checked++;
    if (leader !== path)
      out.violations.push(
        `${path}: ${event.type} at seq ${event.seq} (${new Date(event.tsMs).toISOString()}) written while ${leader ?? 'no replica'} led`,
      );
  }
}

/** The invariants over the history of `agentLogs` and `controllerLogs` (SQLite log files). */
export function checkHistory(opts: {
  agentLogs: readonly string[];
  controllerLogs: readonly string[];
}): HistoryCheck {
  const out = { checked: 0, violations: [] as string[] };
  for (const path of opts.agentLogs) checkAgentLog(path, out);
  const logs = new Map(opts.controllerLogs.map((path) => [path, eventsOf(path)]));
  for (const [path, events] of logs) {
    out.checked += events.length;
    out.violations.push(...checkControllerLog(events).map((problem) => `${path}: ${problem}`));
  }
  checkDeposedWriteNothing(logs, out);
  return out;
}
