/**
 * What a simulation mode (kubelet-mode.ts, controller-mode.ts) contributes to the shared
 * loop of simulate.ts, and what of a running simulation a mode may use.
 */
import type { VirtualClock } from '../clock.js';
import type { Core, CoreConfig, CoreOperation, CoreWorld, Runner } from '../engine/core.js';
import type { Engine, RunnerHost } from '../engine/engine.js';
import type { NewEvent, VoleEvent } from '../events/index.js';
import type { Violation } from '../operations/violation.js';
import type { FakeCallRecord } from '../plugins/fake.js';
import type { PluginManager } from '../plugins/manager.js';
import type { Failure } from './expect.js';
import type { Expectation, Scenario, Step } from './scenario.js';

export interface WaitResult {
  readonly pod: string;
  readonly ok: boolean;
  readonly error?: string;
}

/** A running simulation, as its mode sees it. */
export interface SimulationHandle<W extends CoreWorld, O extends CoreOperation> {
  readonly scenario: Scenario;
  readonly clock: VirtualClock;
  readonly plugins: PluginManager;
  readonly engine: Engine<W, O>;
  now(): number;
  append(event: NewEvent): void;
  /** Lets every operation that can finish now finish. */
  settle(): Promise<void>;
  /** Moves virtual time forward, running everything due on the way. */
  advance(durationMs: number): Promise<void>;
}

/** What a simulation mode contributes; everything else is shared. */
export interface Mode<W extends CoreWorld, O extends CoreOperation> {
  readonly core: Core<W, O>;
  /** Whether its result lists the reports raised (the controller's Multi-Attach reports). */
  readonly reportsRaised: boolean;
  runner(host: RunnerHost<W>): Runner<O>;
  /** Its core's configuration for the scenario (recorded in EngineStarted). */
  config(scenario: Scenario): CoreConfig;
  /** Events appended right after the first EngineStarted (objects, nodes, sources ready). */
  startEvents(scenario: Scenario, tsMs: number): NewEvent[];
  /** Events appended after a restart's EngineStarted. */
  restartEvents(scenario: Scenario, tsMs: number): NewEvent[];
  /** The events of a step this mode handles; undefined when it is not this mode's step. */
  stepEvents(step: Step, sim: SimulationHandle<W, O>): NewEvent[] | undefined;
  check(
    world: W,
    journal: readonly FakeCallRecord[],
    expectation: Expectation,
    step: number,
  ): Failure[];
  describe(world: W): Record<string, unknown>;
  waitForPod?(sim: SimulationHandle<W, O>, pod: string, timeoutMs: number): Promise<WaitResult>;
  /** Invariants of one event, checked right after its fold (the world's own are per volume). */
  eventInvariants?(event: VoleEvent, world: W): Violation[];
  /** Background work tied to an engine's life (the controller's periodic verify). */
  background?(engine: Engine<W, O>, sim: SimulationHandle<W, O>): () => void;
}
