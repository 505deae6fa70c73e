/**
 * given/when/then specifications of planner rules (docs/style.md rule 9, after Emmett's
 * DeciderSpecification): given a history of events, when one more happens at nowMs,
 * then the planner returns exactly these operations — or nothing, or an assertion.
 */
import assert from 'node:assert/strict';
import type { NewEvent, VoleEvent } from '../../src/events/index.js';
import type { PlanResult } from '../../src/kubelet/planner.js';
import type { World } from '../../src/kubelet/types.js';

export interface Decider {
  fold(world: World, event: VoleEvent): World;
  plan(world: World, nowMs: number): PlanResult;
  initialWorld(): World;
}

/** The parts of an operation a rule speaks about. */
export interface ExpectedOperation {
  op: string;
  volume: string;
  pod?: string;
  remount?: boolean;
}

function sequence(events: readonly NewEvent[]): VoleEvent[] {
  return events.map((e, i) => ({ ...e, seq: i + 1 }) as VoleEvent);
}

export const PlanSpecification = {
  for(decider: Decider) {
    return {
      given(history: readonly NewEvent[]) {
        return {
          when(event: NewEvent | readonly NewEvent[], opts: { nowMs: number }) {
            const all = sequence([...history, ...[event].flat()]);
            let failure: unknown;
            let result: PlanResult | undefined;
            try {
              const world = all.reduce(decider.fold, decider.initialWorld());
              result = decider.plan(world, opts.nowMs);
            } catch (error) {
              failure = error;
            }
            const planned = () => {
              if (failure !== undefined) throw failure;
              return result!.operations.map((o) => {
                const e: ExpectedOperation = { op: o.op, volume: o.volume };
                if (o.op === 'mount' || o.op === 'unmount') e.pod = o.pod;
                if (o.op === 'mount') e.remount = o.remount;
                return e;
              });
            };
            return {
              then(expected: ExpectedOperation[]) {
                const normalized = expected.map((e) =>
                  e.op === 'mount' ? { remount: false, ...e } : e,
                );
                assert.deepEqual(planned(), normalized);
              },
              thenNothingPlanned() {
                assert.deepEqual(planned(), []);
              },
              thenRetryAt(volume: string, atMs: number) {
                planned();
                assert.deepEqual(result!.retries, [{ volume, atMs }]);
              },
              thenAsserts(pattern: RegExp) {
                assert.ok(failure instanceof Error, 'expected an assertion failure');
                assert.match((failure as Error).message, pattern);
              },
            };
          },
        };
      },
    };
  },
};
