/**
 * CSIDriver attachRequired in Kubernetes mode, as the kubelet's CSI plugin (CanAttach): a
 * CSI volume needs attaching unless its CSIDriver says `attachRequired: false`, and a
 * driver without a CSIDriver object needs it too, whatever its capabilities. The node then
 * waits for the controller's attachment. Outside Kubernetes mode the capability decides.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { csiPluginCaps } from '../../src/csi/plugin.js';
import type { CsiDriverCaps, NewEvent, VoleEvent } from '../../src/events/index.js';
import { plan } from '../../src/kubelet/planner.js';
import { UniquePodName } from '../../src/ids.js';
import { fold, initialWorld } from '../../src/kubelet/index.js';
import type { World } from '../../src/kubelet/types.js';
import { builtins, claim, diskObjects, podUpserted, sourcesReady } from '../support/builders.js';

const driverCaps = (publishUnpublish: boolean): CsiDriverCaps => ({
  publishUnpublish,
  stageUnstage: true,
  expand: false,
  singleNodeMultiWriter: false,
  maxVolumesPerNode: 0,
});

function started(opts: { publishUnpublish: boolean; kube: boolean; controller: boolean }) {
  return {
    type: 'EngineStarted',
    tsMs: 0,
    node: 'node-1',
    controllerAttachDetach: opts.controller,
    plugins: [csiPluginCaps('fake.disk', driverCaps(opts.publishUnpublish)), ...builtins],
    version: 'test',
    ...(opts.kube ? { csiDriverObjects: true } : {}),
  } as const satisfies NewEvent;
}

const csiDriver = (attachRequired: boolean | undefined): NewEvent => ({
  type: 'ObjectUpserted',
  tsMs: 0,
  object: {
    apiVersion: 'storage.k8s.io/v1',
    kind: 'CSIDriver',
    metadata: { name: 'fake.disk' },
    spec: attachRequired === undefined ? {} : { attachRequired },
  },
});

function worldOf(events: NewEvent[]): World {
  const world = initialWorld();
  for (const event of events) fold(world, { ...event, seq: world.seq + 1 } as VoleEvent);
  return world;
}

const podA = podUpserted('uid-a', [claim('d1')]);

const attachableIn = (world: World) =>
  world.pods.get(UniquePodName('uid-a'))?.volumes[0]?.traits.attachable;

function attachable(events: NewEvent[]): boolean | undefined {
  return attachableIn(worldOf([...events, sourcesReady, ...diskObjects('d1'), podA]));
}

const controllerKube = { kube: true, controller: true };

test('attachRequired: no CSIDriver object means attach required, whatever the driver offers', () => {
  assert.equal(attachable([started({ ...controllerKube, publishUnpublish: false })]), true);
  assert.equal(attachable([started({ ...controllerKube, publishUnpublish: true })]), true);
});

test('attachRequired: false skips attaching; true or unset requires it', () => {
  const caps = { ...controllerKube, publishUnpublish: true };
  assert.equal(attachable([started(caps), csiDriver(false)]), false);
  assert.equal(attachable([started(caps), csiDriver(true)]), true);
  assert.equal(attachable([started(caps), csiDriver(undefined)]), true);
});

test('attachRequired: outside Kubernetes mode the driver capability decides', () => {
  const manifests = { kube: false, controller: true };
  assert.equal(attachable([started({ ...manifests, publishUnpublish: false })]), false);
  assert.equal(
    attachable([started({ ...manifests, publishUnpublish: true }), csiDriver(false)]),
    true,
  );
});

test('attachRequired: attaching itself, the node only publishes what the driver can', () => {
  const kubelet = { kube: true, controller: false };
  assert.equal(attachable([started({ ...kubelet, publishUnpublish: false })]), false);
  assert.equal(attachable([started({ ...kubelet, publishUnpublish: true })]), true);
  assert.equal(
    attachable([started({ ...kubelet, publishUnpublish: true }), csiDriver(false)]),
    false,
  );
});

test('attachRequired: a CSIDriver arriving later resolves the pod again; the mount goes on', () => {
  const history = [
    started({ ...controllerKube, publishUnpublish: false }),
    sourcesReady,
    ...diskObjects('d1'),
    podA,
  ];
  const world = worldOf(history);
  assert.equal(attachableIn(world), true);
  // Attach required: the node waits for the controller (volumesInUse, volumesAttached).
  const waiting = plan(world, 0).operations.map((o) => o.op);
  assert.ok(!waiting.includes('mount'), `no mount before the attachment: ${waiting.join(' ')}`);
  fold(world, { ...csiDriver(false), seq: world.seq + 1 } as VoleEvent);
  assert.equal(attachableIn(world), false);
  const next = plan(world, 0).operations.map((o) => o.op);
  assert.ok(next.length > 0, 'not attachable: the node goes on without the controller');
  assert.ok(!next.includes('attach'), next.join(' '));
});
