/** Simulation in kubelet mode: one node's volume manager. */
import { podAttachAndMountRetryIntervalMs } from '../constants.js';
import type { NewEvent } from '../events/index.js';
import { UniquePodName } from '../ids.js';
import { kubeletCore } from '../engine/cores.js';
import { Executor } from '../execute/executor.js';
import { toLoggedObject } from '../sources/contents.js';
import { checkSetUpContents } from '../kubelet/content-invariant.js';
import {
  claimBindings,
  getVolumesInUse,
  podWaitStatus,
  waitErrorMessage,
} from '../kubelet/index.js';
import type { World } from '../kubelet/types.js';
import type { Operation } from '../kubelet/planner.js';
import { checkExpectation, pvStates } from './expect.js';
import type { Mode, SimulationHandle, WaitResult } from './mode.js';
import type { Step } from './scenario.js';
import { podEntries } from '../kubelet/by-pod.js';

function describeState(world: World) {
  const attachments = [...world.attachments.values()]
    .sort((a, b) => a.volume.localeCompare(b.volume))
    .map((a) => ({
      volume: a.volume,
      node: a.node,
      state: a.value,
      devicePath: a.context.devicePath,
    }));
  const mounts = [...world.mounts.values()]
    .flatMap((byPod) => [...podEntries(byPod)])
    .sort((a, b) => a.volume.localeCompare(b.volume) || a.pod.localeCompare(b.pod))
    .map((m) => ({
      volume: m.volume,
      pod: m.pod,
      outerVolumeSpecName: m.context.outerVolumeSpecName,
      state: m.value,
    }));
  const pending = [...world.running.values()]
    .sort((a, b) => a.startedSeq - b.startedSeq)
    .map((op) => ({ opId: op.opId, op: op.op, volume: op.volume, pod: op.pod, call: op.call }));
  const bindings = claimBindings(world);
  const pvs = pvStates(world);
  return { attachments, mounts, volumesInUse: getVolumesInUse(world), pending, bindings, pvs };
}

/** Events of the steps shared by both modes (pods and cluster objects). */
export function commonStepEvents(step: Step, tsMs: number): NewEvent[] | undefined {
  if ('addPod' in step) return [{ type: 'PodUpserted', tsMs, pod: step.addPod }];
  if ('updatePod' in step) return [{ type: 'PodUpserted', tsMs, pod: step.updatePod }];
  if ('removePod' in step) return [{ type: 'PodRemoved', tsMs, uid: step.removePod }];
  if ('addObject' in step)
    return [{ type: 'ObjectUpserted', tsMs, object: toLoggedObject(step.addObject) }];
  if ('updateObject' in step)
    return [{ type: 'ObjectUpserted', tsMs, object: toLoggedObject(step.updateObject) }];
  if ('removeObject' in step) {
    const { kind, name, namespace } = step.removeObject;
    return [
      {
        type: 'ObjectRemoved',
        tsMs,
        kind,
        name,
        ...(namespace === undefined ? {} : { namespace }),
      },
    ];
  }
  return undefined;
}

async function waitForPod(
  sim: SimulationHandle<World, Operation>,
  pod: string,
  timeoutMs: number,
): Promise<WaitResult> {
  const deadline = sim.now() + timeoutMs;
  // behaviour K2.5 step 2: ReprocessPod — the pod is processed again (remount-requiring volumes).
  const known = sim.engine.world.pods.get(UniquePodName(pod));
  if (known !== undefined) {
    sim.append({ type: 'PodUpserted', tsMs: sim.now(), pod: known.pod });
    await sim.settle();
  }
  for (;;) {
    const status = podWaitStatus(sim.engine.world, UniquePodName(pod));
    if (!status.known)
      return { pod, ok: false, error: `pod ${pod} is not known to the volume manager` };
    if (status.ready) return { pod, ok: true };
    if (status.errors.length > 0 || sim.now() >= deadline) {
      const cause =
        status.errors.length > 0 ? status.errors.join('; ') : 'timed out waiting for the condition';
      return { pod, ok: false, error: waitErrorMessage(status, cause) };
    }
    await sim.advance(Math.min(podAttachAndMountRetryIntervalMs, deadline - sim.now()));
  }
}

export const kubeletMode: Mode<World, Operation> = {
  core: kubeletCore,
  reportsRaised: false,
  runner: (host) => new Executor(host),
  config: (scenario) => ({
    node: scenario.node,
    controllerAttachDetach: scenario.controllerAttachDetach,
  }),
  startEvents: (scenario, tsMs) => [
    ...scenario.objects.map((object): NewEvent => ({
      type: 'ObjectUpserted',
      tsMs,
      object: toLoggedObject(object),
    })),
    // The scenario is the pod source, and it is complete from the start (behaviour K3.2).
    { type: 'SourcesReady', tsMs },
  ],
  restartEvents: (_scenario, tsMs) => [{ type: 'SourcesReady', tsMs }],
  stepEvents(step, sim) {
    const tsMs = sim.now();
    const common = commonStepEvents(step, tsMs);
    if (common !== undefined) return common;
    if ('reportInUse' in step)
      return [{ type: 'VolumesReportedInUse', tsMs, volumes: step.reportInUse }];
    if ('controllerAttach' in step) {
      const volumesAttached = step.controllerAttach.map((name) => ({
        name,
        devicePath: `/dev/fake/${name.split('/').pop()}`,
      }));
      return [{ type: 'NodeStatusObserved', tsMs, node: sim.scenario.node, volumesAttached }];
    }
    return undefined;
  },
  check: checkExpectation,
  describe: describeState,
  waitForPod,
  eventInvariants: (event, world) => checkSetUpContents(world, event),
};
