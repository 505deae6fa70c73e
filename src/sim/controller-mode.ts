/**
 * Simulation in controller mode (docs/scenarios.md "Controller mode"): the attach/detach
 * controller for a set of nodes. Node health, taints and what each node reports in use
 * are Node objects, changed by the nodeStatus / nodeReady / taint / untaint steps. The
 * simulation plays the API server: a claim gets the pvc-protection finalizer when it is
 * made, and deleting it while it has one only marks it deleted (claim-protection.ts).
 */
import type { NewEvent } from '../events/index.js';
import { type Draft, produce } from 'immer';
import type { Node } from '../events/k8s.js';
import { objectKey } from '../events/k8s.js';
import { controllerCore } from '../engine/cores.js';
import { toLoggedObject } from '../sources/contents.js';
import { admitObject, markedForDeletion } from '../binding/claim-protection.js';
import { rfc3339 } from '../kubelet/provisioning.js';
import { managedAnnotation, maxWaitForUnmountMsDefault } from '../controller/index.js';
import { ControllerExecutor } from '../execute/controller-executor.js';
import { startAttachmentVerifier } from '../execute/verify-attachments.js';
import type { ControllerOperation } from '../controller/plan.js';
import { allAttachments, attachmentAt, type ControllerWorld } from '../controller/types.js';
import type { FakeCallRecord } from '../plugins/fake.js';
import { claimBindings } from '../kubelet/queries.js';
import {
  checkBindings,
  checkCounts,
  checkPvs,
  type Failure,
  missRecorder,
  pathMatches,
  pvStates,
} from './expect.js';
import { commonStepEvents } from './kubelet-mode.js';
import type { Expectation, ScenarioPlugin, Step } from './scenario.js';
import type { Mode } from './mode.js';

/**
 * A node's Node object. Its labels carry each fake CSI driver's topology segment of that
 * node (`topologyKey`: its zone), as the kubelet labels its Node with NodeGetInfo's
 * accessible_topology: what the controller's provisioner reads for WaitForFirstConsumer.
 */
function nodeObject(name: string, plugins: readonly ScenarioPlugin[] = []): Node {
  const labels: Record<string, string> = {};
  for (const p of plugins) {
    if (!('csi' in p) || p.csi === undefined) continue;
    const zone = p.csi.zones?.[name];
    if (p.csi.topologyKey !== undefined && zone !== undefined) labels[p.csi.topologyKey] = zone;
  }
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name,
      annotations: { [managedAnnotation]: 'true' },
      ...(Object.keys(labels).length === 0 ? {} : { labels }),
    },
    spec: { taints: [] },
    status: { conditions: [{ type: 'Ready', status: 'True' }], volumesInUse: [] },
  };
}

function currentNode(world: ControllerWorld, name: string): Node {
  const object = world.objects.get(objectKey('Node', name));
  return object?.kind === 'Node' ? object : nodeObject(name);
}

function describe(world: ControllerWorld) {
  const attached = [...allAttachments(world)]
    .sort((a, b) => a.volume.localeCompare(b.volume) || a.node.localeCompare(b.node))
    .map((a) => ({
      volume: a.volume,
      node: a.node,
      state: a.value,
      attachedConfirmed: a.value.startsWith('attached'),
      mountedByNode: world.nodes.get(a.node)?.volumesInUse.has(a.volume) === true,
    }));
  const nodes = [...world.nodes.keys()].sort().map((node) => ({
    node,
    volumesAttached: [...(world.reported.get(node) ?? [])].sort().map((name) => ({
      name,
      devicePath: attachmentAt(world, `${name}@${node}`)?.devicePath ?? '',
    })),
  }));
  const pending = [...world.running.values()]
    .sort((a, b) => a.startedSeq - b.startedSeq)
    .map((op) => ({ opId: op.opId, op: op.op, volume: op.volume, node: op.node, call: op.call }));
  const pvs = pvStates(world);
  return { attachments: attached, nodes, pending, bindings: claimBindings(world), pvs };
}

function check(
  world: ControllerWorld,
  journal: readonly FakeCallRecord[],
  expectation: Expectation,
  step: number,
): Failure[] {
  const failures: Failure[] = [];
  const miss = missRecorder(step, failures);
  checkCounts(journal, expectation, miss);
  checkBindings(world, expectation, miss);
  checkPvs(world, expectation, miss);
  for (const [key, expected] of Object.entries(expectation.attachments ?? {})) {
    const actual = attachmentAt(world, key)?.value ?? 'detached';
    if (!pathMatches(actual, expected)) miss(`attachments.${key}`, expected, actual);
  }
  for (const key of ['mounts', 'volumesInUse', 'podReady'] as const) {
    if (expectation[key] !== undefined)
      miss(key, 'a node agent expectation', 'controller mode has no pod mounts; use kubelet mode');
  }
  return failures;
}

/**
 * The steps on objects as the API server takes them: admission gives a new claim the
 * pvc-protection finalizer (an update keeps a deletion under way), and a delete of an
 * object with finalizers sets its deletionTimestamp. Undefined: not such a step.
 */
function apiServerStepEvents(
  step: Step,
  world: ControllerWorld,
  tsMs: number,
): NewEvent[] | undefined {
  if ('addObject' in step || 'updateObject' in step) {
    const given = 'addObject' in step ? step.addObject : step.updateObject;
    const held = world.objects.get(
      objectKey(given.kind, given.metadata.name, given.metadata.namespace),
    );
    const deleting = held?.metadata.deletionTimestamp;
    const object = admitObject(
      deleting === undefined
        ? given
        : { ...given, metadata: { ...given.metadata, deletionTimestamp: deleting } },
    );
    return [{ type: 'ObjectUpserted', tsMs, object: toLoggedObject(object) }];
  }
  if (!('removeObject' in step)) return undefined;
  const { kind, name, namespace } = step.removeObject;
  const held = world.objects.get(objectKey(kind, name, namespace));
  const marked = held === undefined ? undefined : markedForDeletion(held, rfc3339(tsMs));
  if (marked === undefined) return undefined; // gone at once
  return marked === held ? [] : [{ type: 'ObjectUpserted', tsMs, object: marked }];
}

export const controllerMode: Mode<ControllerWorld, ControllerOperation> = {
  core: controllerCore,
  reportsRaised: true,
  runner: (host) => new ControllerExecutor(host),
  config: (scenario) => ({
    controller: {
      maxWaitForUnmountMs: scenario.maxWaitForUnmount ?? maxWaitForUnmountMsDefault,
      disableForceDetachOnTimeout: scenario.disableForceDetachOnTimeout ?? false,
      // The simulation plays the API server's admission and graceful deletion.
      pvcProtection: true,
    },
  }),
  startEvents: (scenario, tsMs) => [
    ...(scenario.nodes ?? [scenario.node]).map((name): NewEvent => ({
      type: 'ObjectUpserted',
      tsMs,
      object: nodeObject(name, scenario.plugins),
    })),
    ...scenario.objects.map((object): NewEvent => ({
      type: 'ObjectUpserted',
      tsMs,
      object: toLoggedObject(admitObject(object)),
    })),
  ],
  restartEvents: () => [],
  stepEvents(step, sim) {
    const tsMs = sim.now();
    const api = apiServerStepEvents(step, sim.engine.world, tsMs);
    if (api !== undefined) return api;
    const common = commonStepEvents(step, tsMs);
    if (common !== undefined) return common;
    const world = sim.engine.world;
    // A step changes a field or two deep inside the Node: written as the change itself.
    const update = (name: string, change: (n: Draft<Node>) => void): NewEvent[] => [
      { type: 'ObjectUpserted', tsMs, object: produce(currentNode(world, name), change) },
    ];
    if ('nodeStatus' in step) {
      return update(step.nodeStatus.node, (n) => {
        (n.status ??= {}).volumesInUse = [...step.nodeStatus.volumesInUse];
      });
    }
    if ('nodeReady' in step) {
      const status = step.nodeReady.ready ? 'True' : 'False';
      return update(step.nodeReady.node, (n) => {
        (n.status ??= {}).conditions = [{ type: 'Ready', status }];
      });
    }
    if ('taint' in step) {
      const { node, key, effect, value } = step.taint;
      const taint = {
        key,
        ...(effect === undefined ? {} : { effect }),
        ...(value === undefined ? {} : { value }),
      };
      return update(node, (n) => {
        const spec = (n.spec ??= {});
        spec.taints = [...(spec.taints ?? []).filter((t) => t.key !== key), taint];
      });
    }
    if ('untaint' in step) {
      const { node, key } = step.untaint;
      return update(node, (n) => {
        const spec = (n.spec ??= {});
        spec.taints = (spec.taints ?? []).filter((t) => t.key !== key);
      });
    }
    if ('removeNode' in step)
      return [{ type: 'ObjectRemoved', tsMs, kind: 'Node', name: step.removeNode }];
    return undefined;
  },
  check,
  describe,
  background: (engine, sim) =>
    startAttachmentVerifier(engine, { plugins: sim.plugins, clock: sim.clock }),
};
