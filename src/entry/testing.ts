/**
 * `vole/testing`: what tests of an agent use. FakePlugin records calls and answers as
 * scripted; FakeCsiDriver is a scripted CSI driver at the transport (give it to csiPlugin
 * from `vole/csi`); VirtualClock makes timers and back-offs run as fast as events come;
 * simulate runs a scenario file's steps and expectations, as `vole simulate` does.
 *
 * @packageDocumentation
 */
export {
  FakeHost,
  FakePlugin,
  type FakeCallRecord,
  type FakeOutcome,
  type FakePluginOptions,
  type FaultEntry,
  type FaultScript,
} from '../plugins/fake.js';
export { FakeCsiDriver, type FakeBackend, type FakeCsiDriverOptions } from '../csi/fake.js';
export { VirtualClock, sleep } from '../clock.js';
export { MemorySink } from '../engine/sink.js';
export {
  simulate,
  type SimulateOptions,
  type SimulationResult,
  type WaitResult,
} from '../sim/simulate.js';
export {
  parseScenario,
  ScenarioFormatError,
  type Expectation,
  type Scenario,
  type Step,
} from '../sim/scenario.js';
