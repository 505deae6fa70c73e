/**
 * `vole simulate`: the real engine (log, fold, planner, executor) against scripted fake
 * plugins on a virtual clock. Deterministic: the same scenario gives the same result.
 * One loop for both modes; what differs (the core, steps, expectations, the state shown)
 * comes from the mode (kubelet-mode.ts, controller-mode.ts).
 */
import pino, { type Logger } from 'pino';
import { assert } from '../assert.js';
import { type CoreOperation, type CoreWorld, InvariantChecker } from '../engine/core.js';
import { byCore, coreOfMode } from '../engine/cores.js';
import { Engine } from '../engine/engine.js';
import { type EventSink, MemorySink } from '../engine/sink.js';
import type { NewEvent, VoleEvent } from '../events/index.js';
import { VirtualClock } from '../clock.js';
import { ObjectContents } from '../sources/contents.js';
import type { FakeCallRecord, FakeHost } from '../plugins/fake.js';
import type { PluginManager } from '../plugins/manager.js';
import { controllerMode } from './controller-mode.js';
import { countCalls, type Failure } from './expect.js';
import { kubeletMode } from './kubelet-mode.js';
import { simulationPlugins } from './plugins.js';
import type { Mode, SimulationHandle, WaitResult } from './mode.js';
import type { Scenario, Step } from './scenario.js';

export type { WaitResult } from './mode.js';

export interface Report {
  readonly t: number;
  readonly reason: string;
  readonly pod: string;
  readonly volume: string;
  readonly message: string;
}

export interface SimulationResult {
  readonly name: string;
  readonly ok: boolean;
  readonly failures: Failure[];
  readonly calls: FakeCallRecord[];
  readonly counts: Record<string, Record<string, number>>;
  readonly waits: WaitResult[];
  readonly state: Record<string, unknown>;
  readonly reports?: Report[];
  readonly events: number;
}

/** A log the simulation writes to and reads back from on restart. */
export interface SimulationLog {
  readonly sink: EventSink;
  readAll(): Iterable<VoleEvent>;
}

export interface SimulateOptions {
  /** The log to write; in memory when absent. */
  readonly log?: SimulationLog;
  readonly logger?: Logger;
  /** Called after every fold with the engine's world (invariant checks in tests). */
  onEvent?(event: VoleEvent, world: CoreWorld): void;
  /** Cross-check every incremental plan against a full one (default true: worlds are small). */
  readonly checkIncrementalPlan?: boolean;
  /** Check the safety invariants after every event (default true); violations fail the run. */
  readonly checkInvariants?: boolean;
  /** The pretend host the fake plugins act on (chaos runs inspect it afterwards). */
  readonly fakeHost?: FakeHost;
  /** Filled in with figures of the run that the JSON output does not carry. */
  readonly stats?: { invariantChecks: number };
}

function memoryLog(): SimulationLog {
  const sink = new MemorySink();
  return { sink, readAll: () => sink.events };
}

/** Drives one scenario; the engine is replaced on `restart` steps. */
class Simulation<W extends CoreWorld, O extends CoreOperation> implements SimulationHandle<W, O> {
  readonly clock = new VirtualClock(0);
  readonly journal: FakeCallRecord[] = [];
  readonly failures: Failure[] = [];
  readonly waits: WaitResult[] = [];
  readonly reports: Report[] = [];
  readonly plugins: PluginManager;
  readonly checker: InvariantChecker<W> | undefined;
  /**
   * The ConfigMap and Secret data the content fakes read at setUp, kept from the scenario's
   * objects and steps as a node agent keeps its store from its sources.
   */
  readonly contents = new ObjectContents();
  private readonly log: SimulationLog;
  private stopBackground: () => void = () => {};
  engine: Engine<W, O>;

  constructor(
    readonly scenario: Scenario,
    private readonly mode: Mode<W, O>,
    private readonly opts: SimulateOptions,
  ) {
    this.log = opts.log ?? memoryLog();
    this.plugins = simulationPlugins(scenario.plugins, {
      clock: this.clock,
      journal: this.journal,
      node: scenario.node,
      contents: this.contents,
      ...(opts.fakeHost === undefined ? {} : { host: opts.fakeHost }),
    });
    this.checker =
      opts.checkInvariants === false ? undefined : new InvariantChecker<W>(mode.core.invariants);
    this.engine = this.newEngine(undefined);
  }

  private newEngine(world: W | undefined): Engine<W, O> {
    const engine = new Engine<W, O>({
      config: this.mode.config(this.scenario),
      plugins: this.plugins,
      clock: this.clock,
      sink: this.log.sink,
      logger: this.opts.logger ?? pino({ level: 'silent' }),
      checkIncrementalPlan: this.opts.checkIncrementalPlan ?? true,
      // A restart here reads back every event: no mount can have run unlogged, and the
      // pairs stay as docs/scenarios.md says (a crash mid-attach leaves it attachUncertain).
      mountIntents: false,
      core: this.mode.core,
      runner: (host) => this.mode.runner(host),
      ...(world === undefined ? {} : { world }),
    });
    const onEvent = this.opts.onEvent;
    if (onEvent !== undefined) engine.subscribe((event, world) => onEvent(event, world));
    const checker = this.checker;
    if (checker !== undefined) engine.subscribe((_event, world) => checker.after(world));
    const eventInvariants = this.mode.eventInvariants;
    if (checker !== undefined && eventInvariants !== undefined)
      engine.subscribe((event, world) => checker.violations.push(...eventInvariants(event, world)));
    engine.subscribe((event) => {
      if (event.type === 'ReportRaised') {
        this.reports.push({
          t: event.tsMs,
          reason: event.reason,
          pod: event.pod,
          volume: event.volume,
          message: event.message,
        });
      }
    });
    return engine;
  }

  append(event: NewEvent): void {
    this.engine.append(event);
  }

  now(): number {
    return this.clock.nowMs();
  }

  /** Lets every operation that can finish now finish: the engine reaches quiescence. */
  async settle(): Promise<void> {
    let quietTurns = 0;
    for (let turn = 0; turn < 100_000; turn++) {
      const before = this.engine.world.seq;
      await new Promise<void>((resolve) => setImmediate(resolve));
      const quiet = this.engine.idle && this.engine.world.seq === before;
      quietTurns = quiet ? quietTurns + 1 : 0;
      if (quietTurns >= 2) return;
    }
    assert(false, 'simulation: the engine did not settle within 100,000 turns (a livelock?)');
  }

  /** Moves virtual time forward, running everything due on the way. */
  async advance(durationMs: number): Promise<void> {
    const target = this.now() + durationMs;
    while (this.clock.fireNext(target)) await this.settle();
    this.clock.moveTo(target);
    await this.settle();
  }

  /** The contents store follows the objects as a source hands them on (set first, gone last). */
  private keepContents(step: Step | undefined, removed: boolean): void {
    if (step === undefined) return;
    if (!removed && 'addObject' in step) this.contents.set(step.addObject);
    if (!removed && 'updateObject' in step) this.contents.set(step.updateObject);
    if (removed && 'removeObject' in step) {
      const { kind, name, namespace } = step.removeObject;
      this.contents.delete(kind, name, namespace);
    }
  }

  async start(): Promise<void> {
    for (const object of this.scenario.objects) this.contents.set(object);
    this.engine.start();
    this.stopBackground = this.mode.background?.(this.engine, this) ?? (() => {});
    for (const event of this.mode.startEvents(this.scenario, this.now())) this.append(event);
    await this.settle();
  }

  async restart(): Promise<void> {
    this.stopBackground();
    this.engine.stop();
    let world = this.mode.core.initialWorld();
    for (const event of this.log.readAll()) world = this.mode.core.fold(world, event);
    this.engine = this.newEngine(world);
    this.engine.start();
    this.stopBackground = this.mode.background?.(this.engine, this) ?? (() => {});
    for (const event of this.mode.restartEvents(this.scenario, this.now())) this.append(event);
    await this.settle();
  }

  async run(step: Step, index: number): Promise<void> {
    if ('advance' in step) return this.advance(step.advance);
    if ('restart' in step) return this.restart();
    if ('expect' in step) {
      this.failures.push(...this.mode.check(this.engine.world, this.journal, step.expect, index));
      return;
    }
    if ('waitForPod' in step) {
      const wait = this.mode.waitForPod;
      if (wait === undefined)
        throw new Error(`step ${index}: waitForPod is a node agent's call; it needs kubelet mode`);
      this.waits.push(await wait(this, step.waitForPod.pod, step.waitForPod.timeout ?? 123_000));
      return;
    }
    const events = this.mode.stepEvents(step, this);
    if (events === undefined)
      throw new Error(
        `step ${index}: ${Object.keys(step)[0]} does not apply in ${this.scenario.mode} mode`,
      );
    this.keepContents(step, false);
    for (const event of events) this.append(event);
    this.keepContents(step, true);
    await this.settle();
  }
}

/** Runs one scenario in the given mode (simulate picks the mode the scenario names). */
export async function simulateWith<W extends CoreWorld, O extends CoreOperation>(
  scenario: Scenario,
  mode: Mode<W, O>,
  opts: SimulateOptions,
): Promise<SimulationResult> {
  const sim = new Simulation(scenario, mode, opts);
  await sim.start();
  for (const [index, step] of scenario.steps.entries()) await sim.run(step, index);
  sim.engine.stop();
  const world = sim.engine.world;
  if (opts.stats !== undefined) opts.stats.invariantChecks += sim.checker?.checks ?? 0;
  for (const v of sim.checker?.violations ?? []) {
    sim.failures.push({
      step: -1,
      key: `invariant.${v.invariant}`,
      expected: 'never',
      actual: v.message,
      message: `invariant ${v.invariant} violated: ${v.message}`,
    });
  }
  return {
    name: scenario.name,
    ok: sim.failures.length === 0,
    failures: sim.failures,
    calls: sim.journal,
    counts: countCalls(sim.journal),
    waits: sim.waits,
    state: mode.describe(world),
    ...(mode.reportsRaised ? { reports: sim.reports } : {}),
    events: world.seq,
  };
}

export function simulate(
  scenario: Scenario,
  opts: SimulateOptions = {},
): Promise<SimulationResult> {
  return byCore(coreOfMode(scenario.mode), {
    kubelet: () => simulateWith(scenario, kubeletMode, opts),
    controller: () => simulateWith(scenario, controllerMode, opts),
  });
}
