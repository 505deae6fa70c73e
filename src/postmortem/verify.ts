/**
 * Verify: re-fold a log with this version's code, with the core its EngineStarted names,
 * and re-run the planner at every decision point. Reports each decision the current
 * planner would not have made there — compared whole: kind, keys, steps, cause and the
 * controller's detach safety — (a determinism check across versions), each event the
 * current schema cannot read, and each event the fold refuses or that breaks an invariant
 * (naming pair and seq).
 */
import { InvariantError } from '../assert.js';
import { type Core, type CoreOperation, type CoreWorld, InvariantChecker } from '../engine/core.js';
import { type AnyCore, coreOfLog } from '../engine/cores.js';
import type { Decision, EventOf, NewEvent, VoleEvent } from '../events/index.js';
import { UniqueVolumeName } from '../ids.js';

export interface Divergence {
  readonly seq: number;
  readonly kind: 'decision' | 'unreadable' | 'invariant';
  readonly message: string;
}

export interface VerifyReport {
  readonly mode: string;
  readonly events: number;
  readonly decisions: number;
  readonly invariantChecks: number;
  readonly divergences: Divergence[];
  readonly ok: boolean;
}

/** Stops after this many divergences: one bug usually explains the rest. */
const divergencesMax = 100;

/** The decision an OperationStarted records (older logs have no steps: not compared). */
function loggedDecision(event: EventOf<'OperationStarted'>): Decision {
  const { type: _type, seq: _seq, tsMs: _tsMs, opId: _opId, ...decision } = event;
  return decision;
}

/** A decision as a canonical string: the same fields in the same order. */
function canonical(d: Decision, withSteps: boolean): string {
  return JSON.stringify({
    op: d.op,
    volume: d.volume,
    key: [d.key.volume, d.key.pod, d.key.node],
    pod: d.pod ?? null,
    node: d.node ?? null,
    remount: d.remount ?? null,
    steps: withSteps ? (d.steps ?? null) : null,
    verifySafeToDetach: d.verifySafeToDetach ?? null,
    forced: d.forced ?? null,
    refused: d.refused ?? null,
    cause: d.cause,
  });
}

/** A decision's name: its op, what it acts on as the core names it, and its pod. */
type Target = (d: Decision) => string;

function name(d: Decision, target: Target): string {
  return `${d.op} ${target(d)}${d.pod === undefined ? '' : ` for pod ${d.pod}`}`;
}

function details(d: Decision): string {
  const parts = [
    `key {${d.key.volume} ${d.key.pod} ${d.key.node}}`,
    ...(d.steps === undefined ? [] : [`steps [${d.steps.join(' ')}]`]),
    ...(d.remount === undefined ? [] : [`remount ${d.remount}`]),
    ...(d.verifySafeToDetach === undefined ? [] : [`verifySafeToDetach ${d.verifySafeToDetach}`]),
    ...(d.forced === undefined ? [] : [`forced ${d.forced}`]),
    `cause seq ${d.cause}`,
  ];
  return parts.join(', ');
}

/** Why the logged decision is not among the planned ones, in words; undefined if it is. */
function decisionDivergence(
  logged: Decision,
  planned: readonly Decision[],
  target: Target,
): string | undefined {
  const withSteps = logged.steps !== undefined;
  const wanted = canonical(logged, withSteps);
  if (planned.some((p) => canonical(p, withSteps) === wanted)) return undefined;
  const head = `the log started ${name(logged, target)}`;
  const same = planned.find((p) => name(p, target) === name(logged, target));
  if (same !== undefined)
    return `${head} with ${details(logged)}; this version would start it with ${details(same)}`;
  const would = planned.length === 0 ? 'nothing' : planned.map((p) => name(p, target)).join(', ');
  return `${head}; this version would start ${would}`;
}

/**
 * Decisions that are events themselves (a claim bound, a Multi-Attach report): a turn
 * appends them before the operations it starts, all decided on the world before them.
 */
const decisionEvents: ReadonlySet<string> = new Set([
  'ClaimBound',
  'ClaimFinalizerRemoved',
  'ExternalProvisioningRequested',
  'VolumeReleased',
  'ReportRaised',
]);

/** The claim decisions verify re-plans (a report is for people: not compared). */
type ClaimDecision = Extract<NewEvent, { type: 'ClaimBound' | 'ClaimFinalizerRemoved' }>;

function isClaimDecision<E extends { type: string }>(event: E): event is E & ClaimDecision {
  return event.type === 'ClaimBound' || event.type === 'ClaimFinalizerRemoved';
}

/** A claim decision as a canonical string: what it decided and why, not when. */
function claimDecisionKey(e: ClaimDecision): string {
  const volume = e.type === 'ClaimBound' ? ` → ${e.volume} (${e.capacityBytes} bytes)` : '';
  return `${e.type} ${e.namespace}/${e.claim}${volume} cause ${e.cause}`;
}

/**
 * The events an engine appends in one turn after a plan: the decisions that are events,
 * then each OperationStarted with the CallStarted its operation makes at once. They were
 * all decided on the world before the first of them, so they are re-planned on that world.
 */
function isGroupEvent(event: VoleEvent, group: readonly VoleEvent[]): boolean {
  if (event.type === 'OperationStarted') return true;
  if (decisionEvents.has(event.type)) return group.every((e) => decisionEvents.has(e.type));
  if (event.type !== 'CallStarted') return false;
  return group.some((e) => e.type === 'OperationStarted' && e.opId === event.opId);
}

class Verifier<W extends CoreWorld, O extends CoreOperation> {
  readonly world: W;
  readonly divergences: Divergence[] = [];
  readonly checker: InvariantChecker<W>;
  decisions = 0;
  private broken = false;

  constructor(private readonly core: Core<W, O>) {
    this.world = core.initialWorld();
    this.checker = new InvariantChecker<W>(core.invariants);
  }

  get done(): boolean {
    return this.broken || this.divergences.length >= divergencesMax;
  }

  /**
   * Re-plans a group's volumes on the world before it, then folds the group. A decision
   * that plan does not hold is re-planned once more on the world just before it (a later
   * turn whose events came before anything else was appended); only a decision neither
   * plan makes is a divergence.
   */
  group(events: readonly VoleEvent[]): void {
    const starts = events.filter(
      (e): e is EventOf<'OperationStarted'> => e.type === 'OperationStarted',
    );
    const planned = starts.length === 0 ? [] : this.planFor(starts, starts[0]!.tsMs);
    const claimDecisions = events.filter(isClaimDecision);
    if (claimDecisions.length > 0) this.checkClaimDecisions(claimDecisions);
    for (const event of events) {
      if (this.done) return;
      if (event.type === 'OperationStarted') this.check(event, planned);
      this.fold(event);
    }
  }

  /**
   * Claim decisions (a binding, pvc-protection's release) are re-planned too, on the world
   * before them: the planner must make each of them again (the core names the volumes whose plan makes them).
   */
  private checkClaimDecisions(logged: readonly (ClaimDecision & { seq: number })[]): void {
    const volumes = this.core.reader.claimDecisionVolumes;
    if (volumes.length === 0) return;
    const nowMs = logged[0]!.tsMs;
    const planned = (this.core.plan(this.world, nowMs, { volumes }).events ?? [])
      .filter(isClaimDecision)
      .map(claimDecisionKey);
    for (const event of logged) {
      this.decisions++;
      const key = claimDecisionKey(event);
      if (planned.includes(key)) continue;
      const would = planned.length === 0 ? 'nothing' : planned.join(', ');
      this.divergences.push({
        seq: event.seq,
        kind: 'decision',
        message: `the log decided ${key}; this version would decide ${would}`,
      });
    }
  }

  private planFor(starts: readonly EventOf<'OperationStarted'>[], nowMs: number): Decision[] {
    const volumes = [...new Set(starts.map((e) => UniqueVolumeName(e.volume)))];
    return this.core
      .plan(this.world, nowMs, { volumes })
      .operations.map((op) => this.core.decision(op));
  }

  private check(start: EventOf<'OperationStarted'>, planned: readonly Decision[]): void {
    this.decisions++;
    const logged = loggedDecision(start);
    if (decisionDivergence(logged, planned, this.core.reader.decisionTarget) === undefined) return;
    const why = decisionDivergence(
      logged,
      this.planFor([start], start.tsMs),
      this.core.reader.decisionTarget,
    );
    if (why !== undefined)
      this.divergences.push({ seq: start.seq, kind: 'decision', message: why });
  }

  private fold(event: VoleEvent): void {
    try {
      this.core.fold(this.world, event);
      this.checker.after(this.world);
      this.world.dirty.clear();
      for (const v of this.checker.violations.splice(0))
        this.divergences.push({
          seq: v.seq,
          kind: 'invariant',
          message: `${v.invariant}: ${v.message}`,
        });
    } catch (error) {
      if (!(error instanceof InvariantError)) throw error;
      this.divergences.push({ seq: event.seq, kind: 'invariant', message: error.message });
      this.broken = true; // The world is no longer trustworthy after a refused event.
    }
  }
}

function run<W extends CoreWorld, O extends CoreOperation>(
  core: Core<W, O>,
  iterator: Iterator<VoleEvent>,
  first: VoleEvent[],
  opts: { onProgress?: (seq: number) => void },
): VerifyReport {
  const verifier = new Verifier(core);
  let count = 0;
  let group: VoleEvent[] = [];
  const flush = () => {
    if (group.length > 0) verifier.group(group);
    group = [];
  };
  const next = (): IteratorResult<VoleEvent> => {
    const buffered = first.shift();
    return buffered === undefined ? iterator.next() : { done: false, value: buffered };
  };
  while (!verifier.done) {
    let step: IteratorResult<VoleEvent>;
    try {
      step = next();
    } catch (error) {
      flush();
      const seq = verifier.world.seq + group.length + 1;
      verifier.divergences.push({ seq, kind: 'unreadable', message: (error as Error).message });
      break;
    }
    if (step.done === true) break;
    const event = step.value;
    if (++count % 65_536 === 0) opts.onProgress?.(event.seq);
    if (isGroupEvent(event, group)) {
      group.push(event);
    } else {
      flush();
      verifier.group([event]);
    }
  }
  flush();
  const divergences = verifier.divergences.slice(0, divergencesMax);
  return {
    mode: core.mode,
    events: count,
    decisions: verifier.decisions,
    invariantChecks: verifier.checker.checks,
    divergences,
    ok: divergences.length === 0,
  };
}

/**
 * Verifies a log. The core comes from the mode of its first EngineStarted; a mode this
 * version does not know throws UnknownModeError (a clear message, not a divergence).
 */
export function verify(
  events: Iterable<VoleEvent>,
  opts: { onProgress?: (seq: number) => void } = {},
): VerifyReport {
  const iterator = events[Symbol.iterator]();
  const first: VoleEvent[] = [];
  let unreadable: string | undefined;
  try {
    for (let i = 0; i < 16; i++) {
      const step = iterator.next();
      if (step.done === true) break;
      first.push(step.value);
      if (step.value.type === 'EngineStarted') break;
    }
  } catch (error) {
    unreadable = (error as Error).message;
  }
  const chosen = coreOfLog(first);
  const rest: Iterator<VoleEvent> = unreadable === undefined ? iterator : failingAfter(unreadable);
  const core: AnyCore = chosen.core;
  return run(core, rest, first, opts);
}

/** An iterator that throws `message` (the read error met while looking for the mode). */
function failingAfter(message: string): Iterator<VoleEvent> {
  return {
    next: () => {
      throw new Error(message);
    },
  };
}
