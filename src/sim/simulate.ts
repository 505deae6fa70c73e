/**
 * `vole simulate`: the real engine (log, fold, planner, executor) against scripted fake
 * plugins on a virtual clock. Deterministic: the same scenario gives the same result.
 */
import pino, { type Logger } from 'pino';
import { assert } from '../assert.js';
import { podAttachAndMountRetryIntervalMs, podAttachAndMountTimeoutMs } from '../constants.js';
import type { NewEvent, VoleEvent } from '../events/index.js';
import { VirtualClock } from '../execute/clock.js';
import { UniquePodName } from '../ids.js';
import type { FakeCallRecord } from '../plugins/fake.js';
import { Engine } from '../agent/engine.js';
import { type EventSink, MemorySink } from '../agent/sink.js';
import { foldAll, getVolumesInUse, podWaitStatus, waitErrorMessage } from '../world/index.js';
import type { World } from '../world/types.js';
import { checkExpectation, countCalls, type Failure } from './expect.js';
import { simulationPlugins } from './plugins.js';
import type { Scenario, Step } from './scenario.js';

export interface WaitResult {
  readonly pod: string;
  readonly ok: boolean;
  readonly error?: string;
}

export interface SimulationResult {
  readonly name: string;
  readonly ok: boolean;
  readonly failures: Failure[];
  readonly calls: FakeCallRecord[];
  readonly counts: Record<string, Record<string, number>>;
  readonly waits: WaitResult[];
  readonly state: ReturnType<typeof describeState>;
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
  readonly onEvent?: (event: VoleEvent, world: World) => void;
  /** Cross-check every incremental plan against a full one (default true: worlds are small). */
  readonly checkIncrementalPlan?: boolean;
}

function memoryLog(): SimulationLog {
  const sink = new MemorySink();
  return { sink, readAll: () => sink.events };
}

export function describeState(world: World) {
  const attachments = [...world.attachments.values()]
    .sort((a, b) => a.volume.localeCompare(b.volume))
    .map((a) => ({ volume: a.volume, node: a.node, state: a.state.value, devicePath: a.state.context.devicePath }));
  const mounts = [...world.mounts.values()]
    .flatMap((byPod) => [...byPod.values()])
    .sort((a, b) => a.volume.localeCompare(b.volume) || a.pod.localeCompare(b.pod))
    .map((m) => ({ volume: m.volume, pod: m.pod, outerVolumeSpecName: m.state.context.outerVolumeSpecName, state: m.state.value }));
  const pending = [...world.running.values()]
    .sort((a, b) => a.startedSeq - b.startedSeq)
    .map((op) => ({ opId: op.opId, op: op.op, volume: op.volume, pod: op.pod, call: op.call }));
  return { attachments, mounts, volumesInUse: getVolumesInUse(world), pending };
}

/** Drives one scenario; the engine is replaced on `restart` steps. */
class Simulation {
  readonly clock = new VirtualClock(0);
  readonly journal: FakeCallRecord[] = [];
  readonly failures: Failure[] = [];
  readonly waits: WaitResult[] = [];
  readonly plugins;
  private readonly log: SimulationLog;
  engine: Engine;

  constructor(private readonly scenario: Scenario, private readonly opts: SimulateOptions) {
    this.log = opts.log ?? memoryLog();
    this.plugins = simulationPlugins(scenario.plugins, { clock: this.clock, journal: this.journal });
    this.engine = this.newEngine(undefined);
  }

  private newEngine(world: World | undefined): Engine {
    const engine = new Engine({
      node: this.scenario.node,
      controllerAttachDetach: this.scenario.controllerAttachDetach,
      plugins: this.plugins,
      clock: this.clock,
      sink: this.log.sink,
      logger: this.opts.logger ?? pino({ level: 'silent' }),
      checkIncrementalPlan: this.opts.checkIncrementalPlan ?? true,
      ...(world === undefined ? {} : { world }),
    });
    const onEvent = this.opts.onEvent;
    if (onEvent !== undefined) engine.subscribe(onEvent);
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

  async start(): Promise<void> {
    this.engine.start();
    for (const object of this.scenario.objects) this.append({ type: 'ObjectUpserted', tsMs: this.now(), object });
    // The scenario is the pod source, and it is complete from the start (spec §3.2).
    this.append({ type: 'SourcesReady', tsMs: this.now() });
    await this.settle();
  }

  async restart(): Promise<void> {
    this.engine.stop();
    const world = foldAll(this.log.readAll());
    this.engine = this.newEngine(world);
    this.engine.start();
    this.append({ type: 'SourcesReady', tsMs: this.now() });
    await this.settle();
  }

  async waitForPod(pod: string, timeoutMs: number): Promise<void> {
    const deadline = this.now() + timeoutMs;
    for (;;) {
      const status = podWaitStatus(this.engine.world, UniquePodName(pod));
      if (!status.known) {
        this.waits.push({ pod, ok: false, error: `pod ${pod} is not known to the volume manager` });
        return;
      }
      if (status.ready) {
        this.waits.push({ pod, ok: true });
        return;
      }
      if (status.errors.length > 0 || this.now() >= deadline) {
        const cause = status.errors.length > 0 ? status.errors.join('; ') : 'timed out waiting for the condition';
        this.waits.push({ pod, ok: false, error: waitErrorMessage(status, cause) });
        return;
      }
      await this.advance(Math.min(podAttachAndMountRetryIntervalMs, deadline - this.now()));
    }
  }

  async run(step: Step, index: number): Promise<void> {
    const tsMs = this.now();
    if ('addPod' in step) this.append({ type: 'PodUpserted', tsMs, pod: step.addPod });
    else if ('updatePod' in step) this.append({ type: 'PodUpserted', tsMs, pod: step.updatePod });
    else if ('removePod' in step) this.append({ type: 'PodRemoved', tsMs, uid: step.removePod });
    else if ('advance' in step) return this.advance(step.advance);
    else if ('addObject' in step) this.append({ type: 'ObjectUpserted', tsMs, object: step.addObject });
    else if ('updateObject' in step) this.append({ type: 'ObjectUpserted', tsMs, object: step.updateObject });
    else if ('removeObject' in step) {
      const { kind, name, namespace } = step.removeObject;
      this.append({ type: 'ObjectRemoved', tsMs, kind, name, ...(namespace === undefined ? {} : { namespace }) });
    } else if ('reportInUse' in step) this.append({ type: 'VolumesReportedInUse', tsMs, volumes: step.reportInUse });
    else if ('controllerAttach' in step) {
      const volumesAttached = step.controllerAttach.map((name) => ({ name, devicePath: `/dev/fake/${name.split('/').pop()}` }));
      this.append({ type: 'NodeStatusObserved', tsMs, node: this.scenario.node, volumesAttached });
    } else if ('restart' in step) return this.restart();
    else if ('waitForPod' in step) return this.waitForPod(step.waitForPod.pod, step.waitForPod.timeout ?? podAttachAndMountTimeoutMs);
    else if ('expect' in step) {
      this.failures.push(...checkExpectation(this.engine.world, this.journal, step.expect, index));
      return;
    } else {
      throw new Error(`step ${index}: ${Object.keys(step)[0]} needs controller mode (mode: controller), ` +
        'which this version does not run yet');
    }
    await this.settle();
  }
}

export async function simulate(scenario: Scenario, opts: SimulateOptions = {}): Promise<SimulationResult> {
  if (scenario.mode === 'controller') {
    throw new Error('mode: controller is not implemented in this version of vole; run the scenario in kubelet mode');
  }
  const sim = new Simulation(scenario, opts);
  await sim.start();
  for (const [index, step] of scenario.steps.entries()) await sim.run(step, index);
  sim.engine.stop();
  const world = sim.engine.world;
  return {
    name: scenario.name,
    ok: sim.failures.length === 0,
    failures: sim.failures,
    calls: sim.journal,
    counts: countCalls(sim.journal),
    waits: sim.waits,
    state: describeState(world),
    events: world.seq,
  };
}

