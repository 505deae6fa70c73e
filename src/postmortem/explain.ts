/**
 * Explain: for an event (a transition, a call, an operation), the chain of causes back
 * to the desired-state change or observation that started it, in words. Every operation
 * records the seq of the event that led the planner to it, and every call names its
 * operation (opId = `op-<seq of its OperationStarted>`), so the chain is followed by
 * links, not guessed from logs.
 */
import type { VoleEvent } from '../events/index.js';
import { describeEvent } from './history.js';

export interface CauseStep {
  readonly seq: number;
  readonly tsMs: number;
  readonly type: VoleEvent['type'];
  /** What the event is, in words. */
  readonly what: string;
  /** How it links to the next step of the chain. */
  readonly link: string | null;
}

/** Chains longer than this are cut (a log is finite, but a bug could make a cycle). */
const causeChainStepsMax = 64;

function opStartSeq(opId: string): number | undefined {
  const match = /^op-([0-9]+)$/.exec(opId);
  return match === null ? undefined : Number(match[1]);
}

function next(event: VoleEvent): { seq: number; link: string } | null {
  switch (event.type) {
    case 'CallStarted':
    case 'CallSucceeded':
    case 'CallFailed':
    case 'OperationFinished': {
      const seq = opStartSeq(event.opId);
      return seq === undefined
        ? null
        : { seq, link: `part of operation ${event.opId}, started at` };
    }
    case 'OperationStarted':
      return event.cause > 0 ? { seq: event.cause, link: 'the planner decided it after' } : null;
    default:
      return null; // A desired-state change or an observation: where chains start.
  }
}

/** The chain of causes of the event at `seq`, the event itself first. */
export function explain(get: (seq: number) => VoleEvent | undefined, seq: number): CauseStep[] {
  const chain: CauseStep[] = [];
  const seen = new Set<number>();
  let current = get(seq);
  if (current === undefined) throw new Error(`no event with seq ${seq} in this log`);
  while (current !== undefined && chain.length < causeChainStepsMax && !seen.has(current.seq)) {
    seen.add(current.seq);
    const link = next(current);
    chain.push({
      seq: current.seq,
      tsMs: current.tsMs,
      type: current.type,
      what: describeEvent(current),
      link: link?.link ?? null,
    });
    current = link === null ? undefined : get(link.seq);
  }
  return chain;
}

/** The chain as sentences, one per line. */
export function explainText(chain: readonly CauseStep[]): string {
  return chain
    .map((step, i) => {
      const head = `${i === 0 ? '' : '  '.repeat(Math.min(i, 8))}seq ${step.seq} (+${step.tsMs} ms): ${step.what}`;
      return step.link === null ? `${head}.` : `${head}; ${step.link}`;
    })
    .join('\n');
}
