/**
 * What the controller keeps of a Pod (src/controller/pod-record.ts): a pod as the API
 * server has it, cut to what the controller reads, resolves to the same attachable
 * volumes and references, and the controller's record holds the cut pod.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { heapUsedAfterGc } from '../../scripts/bench/util.js';
import { keptBytesEach } from '../support/heap.js';
import { managedAnnotation } from '../../src/controller/index.js';
import { controllerPodOf } from '../../src/controller/pod-record.js';
import {
  allDesired,
  attachableOf,
  type ControllerWorld,
  volumesOf,
} from '../../src/controller/types.js';
import { ClusterObjects } from '../../src/desired/objects.js';
import { controllerCore } from '../../src/engine/cores.js';
import type { NewEvent, VoleEvent } from '../../src/events/index.js';
import type { ClusterObject, Pod } from '../../src/events/k8s.js';
import { UniquePodName } from '../../src/ids.js';
import { caps } from '../../src/plugins/types.js';
import { resolvePod } from '../../src/desired/resolve.js';
import { diskObjects } from '../support/builders.js';

/** A pod as the API server returns it: labels, owners, containers, probes, status. */
function apiServerPod(): Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: 'web-0',
      namespace: 'default',
      uid: 'uid-web-0',
      resourceVersion: '4711',
      labels: { app: 'web' },
      annotations: { 'prometheus.io/scrape': 'true' },
      ownerReferences: [{ apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'web', uid: 'u' }],
    },
    spec: {
      nodeName: 'node-0',
      serviceAccountName: 'web',
      volumes: [
        { name: 'data', persistentVolumeClaim: { claimName: 'claim-disk-0' } },
        { name: 'logs', persistentVolumeClaim: { claimName: 'claim-disk-1' } },
        { name: 'unused', persistentVolumeClaim: { claimName: 'claim-disk-2' } },
        { name: 'spare', persistentVolumeClaim: { claimName: 'claim-disk-2' } },
        { name: 'config', configMap: { name: 'web-config' } },
        {
          name: 'info',
          downwardAPI: { items: [{ path: 'labels', fieldRef: { fieldPath: 'metadata.labels' } }] },
        },
        { name: 'token', projected: { sources: [{ serviceAccountToken: { path: 'token' } }] } },
      ],
      initContainers: [
        { name: 'init', image: 'busybox', volumeMounts: [{ name: 'logs', mountPath: '/logs' }] },
      ],
      containers: [
        {
          name: 'web',
          image: 'registry.example.com/web:1.0',
          env: [{ name: 'MODE', value: 'production' }],
          resources: { requests: { cpu: '250m' } },
          readinessProbe: { httpGet: { path: '/healthz', port: 8080 } },
          volumeMounts: [
            { name: 'data', mountPath: '/var/lib/web' },
            { name: 'config', mountPath: '/etc/web', readOnly: true },
            { name: 'info', mountPath: '/etc/info' },
            { name: 'token', mountPath: '/var/run/secrets' },
          ],
          // A Filesystem PV used as a device: an error for the volume, in both resolutions.
          volumeDevices: [{ name: 'unused', devicePath: '/dev/xvda' }],
        },
      ],
    },
    status: {
      phase: 'Running',
      podIP: '10.0.0.7',
      conditions: [{ type: 'Ready', status: 'True' }],
    },
  } as Pod;
}

function diskEvents(): NewEvent[] {
  return [0, 1, 2].flatMap((i) => diskObjects(`disk-${i}`));
}

test('the cut pod resolves to the same attachable volumes and references as the whole one', () => {
  const objects = ClusterObjects.of(
    diskEvents().flatMap((e) => (e.type === 'ObjectUpserted' ? [e.object as ClusterObject] : [])),
  );
  const input = {
    objects,
    plugins: new Map([['fake.disk', caps('fake.disk', { attachable: true })]]),
    bindings: new Map(),
  };
  const whole = apiServerPod();
  const cut = controllerPodOf(whole);
  const a = resolvePod(whole, input);
  const b = resolvePod(cut, input);
  assert.deepEqual(b.expectedVolumes, a.expectedVolumes);
  assert.deepEqual(b.expectedVolumes, ['data', 'logs', 'unused', 'config', 'info', 'token']);
  assert.deepEqual(b.errors, a.errors);
  assert.match(b.errors.get('unused') ?? '', /volumeDevices|Block|device/i);
  assert.deepEqual(
    b.volumes.filter((v) => v.traits.attachable),
    a.volumes.filter((v) => v.traits.attachable),
  );
  assert.equal(
    b.volumes.filter((v) => v.traits.attachable).length,
    2,
    'data and logs; not unused (an error), not spare (no container uses it)',
  );
  assert.deepEqual(b.references, a.references);
  assert.deepEqual(cut, {
    metadata: { name: 'web-0', namespace: 'default', uid: 'uid-web-0' },
    spec: {
      nodeName: 'node-0',
      serviceAccountName: 'web',
      volumes: whole.spec.volumes,
      initContainers: [{ volumeMounts: [{ name: 'logs' }] }],
      containers: [
        {
          volumeMounts: [{ name: 'data' }, { name: 'config' }, { name: 'info' }, { name: 'token' }],
          volumeDevices: [{ name: 'unused' }],
        },
      ],
    },
    status: { phase: 'Running' },
  });
});

/** A controller world with the node of `apiServerPod` managed and its disks' objects. */
function loadedWorld(): {
  world: ControllerWorld;
  append: (event: NewEvent) => void;
} {
  const world: ControllerWorld = controllerCore.initialWorld();
  const append = (event: NewEvent) =>
    controllerCore.fold(world, { ...event, seq: world.seq + 1 } as VoleEvent);
  append({
    type: 'EngineStarted',
    tsMs: 0,
    node: 'controller',
    controllerAttachDetach: true,
    plugins: [caps('fake.disk', { attachable: true })],
    version: 'test',
    mode: 'controller',
    controller: { maxWaitForUnmountMs: 360_000, disableForceDetachOnTimeout: false },
  });
  append({
    type: 'ObjectUpserted',
    tsMs: 0,
    object: {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: 'node-0', annotations: { [managedAnnotation]: 'true' } },
    },
  });
  for (const event of diskEvents()) append(event);
  return { world, append };
}

test("the controller's pod record holds the cut pod, and a finished pod is still seen finished", () => {
  const { world, append } = loadedWorld();
  const whole = apiServerPod();
  append({ type: 'PodUpserted', tsMs: 0, pod: whole });
  const record = world.pods.get(UniquePodName('uid-web-0'))!;
  assert.deepEqual(record.pod, controllerPodOf(whole));
  assert.deepEqual(
    volumesOf(record.volumes).map((v) => v.outerVolumeSpecName),
    ['data', 'logs'],
  );
  assert.equal([...allDesired(world)].length, 2);
  append({ type: 'PodUpserted', tsMs: 0, pod: { ...whole, status: { phase: 'Succeeded' } } });
  assert.equal(world.pods.get(UniquePodName('uid-web-0'))!.terminated, true);
  assert.equal([...allDesired(world)].length, 0, 'a finished pod wants nothing attached');
});

test('a cut pod holds its fields in objects of their exact size', () => {
  const count = 20_000;
  // As read from etcd: parsed from JSON, with a field the cut drops.
  const pods = Array.from(
    { length: count },
    (_, i) =>
      JSON.parse(
        JSON.stringify({
          metadata: {
            name: `pod-p-${i}`,
            namespace: 'default',
            uid: `p-${i}`,
            resourceVersion: '5',
          },
          spec: {
            nodeName: 'node-0',
            volumes: [{ name: 'data', persistentVolumeClaim: { claimName: `claim-p-${i}` } }],
          },
        }),
      ) as Pod,
  );
  controllerPodOf(pods[0]!); // compiled before the measure
  const before = heapUsedAfterGc();
  const cut = pods.map((pod) => controllerPodOf(pod));
  const bytes = (heapUsedAfterGc() - before) / count;
  assert.equal(cut.length, count);
  assert.deepEqual(cut[7], {
    metadata: { name: 'pod-p-7', namespace: 'default', uid: 'p-7' },
    spec: pods[7]!.spec,
  });
  // 136 bytes a pod (the pod 40, its metadata 48, its spec 40, the array's slot 8); 192
  // when the metadata kept a property array and the spec room for four fields.
  assert.ok(bytes < 164, `${Math.round(bytes)} bytes a cut pod`);
});

test("a pod's claim names are the known claims' own strings in the controller's cut", () => {
  const count = 10_000;
  // Long names (a claim's may have 253 characters): what is shared stands out of the noise.
  const claimName = (i: number) => `${'data-'.repeat(48)}${i}`;
  const parsed = <T>(value: T): T => JSON.parse(JSON.stringify(value)) as T;
  const claims = ClusterObjects.of(
    Array.from({ length: count }, (_, i) => {
      const object: ClusterObject = {
        apiVersion: 'v1',
        kind: 'PersistentVolumeClaim',
        metadata: { name: claimName(i), namespace: 'default' },
        spec: { volumeName: `pv-${i}` },
      };
      return parsed(object);
    }),
  );
  const pods = () =>
    Array.from({ length: count }, (_, i) =>
      parsed<Pod>({
        metadata: { name: `pod-${i}`, namespace: 'default', uid: `u-${i}` },
        spec: {
          volumes: [
            { name: 'data', persistentVolumeClaim: { claimName: claimName(i) } },
            { name: 'logs', persistentVolumeClaim: { claimName: 'unknown', readOnly: true } },
            { name: 'config', configMap: { name: 'web' } },
          ],
        },
      }),
    );
  const some = pods()[3]!;
  assert.deepEqual(controllerPodOf(some, claims), controllerPodOf(some), 'equal values');
  const alone = controllerPodOf(some, new ClusterObjects());
  assert.deepEqual(alone.spec.volumes, some.spec.volumes, 'no known claim: equal volumes');
  assert.equal(alone.spec.volumes![1], some.spec.volumes![1], 'a volume of an unknown claim kept');
  const other = controllerPodOf(pods()[4]!, new ClusterObjects());
  assert.equal(other.spec.volumes![2], alone.spec.volumes![2], 'one ConfigMap volume for both');
  assert.ok(Object.isFrozen(alone.spec.volumes![2]), 'a shared volume is frozen');
  /** Bytes a pod of the cut pods kept, their claims known or not. */
  const keptBytes = (known: boolean) =>
    keptBytesEach(() => pods().map((pod) => controllerPodOf(pod, known ? claims : undefined)));
  keptBytes(true); // a first round grows what the measured ones would be charged for
  const own = keptBytes(false);
  const shared = keptBytes(true);
  // Each pod kept its own copy of its claim's name (264 bytes) before; rounds differ by ~20.
  assert.ok(
    shared <= own - 150,
    `pods with their claim names shared: ${Math.round(shared)} bytes a pod, with their own: ${Math.round(own)}`,
  );
});

test('a pod record holds one attachable volume bare, none as one shared list, more as a list', () => {
  const { world } = loadedWorld();
  const [disk, other] = resolvePod(apiServerPod(), {
    objects: world.objects,
    plugins: world.plugins,
    bindings: world.bindings,
  }).volumes.filter((v) => v.traits.attachable);
  assert.ok(disk !== undefined && other !== undefined, 'two attachable volumes resolved');
  assert.equal(attachableOf([disk]), disk, 'one: bare');
  assert.deepEqual(volumesOf(attachableOf([disk])), [disk]);
  const notAttachable = { ...disk, traits: { ...disk.traits, attachable: false } };
  assert.equal(attachableOf([notAttachable]), attachableOf([]), 'none: the one shared list');
  assert.deepEqual(volumesOf(attachableOf([notAttachable, disk])), [disk]);
  const both = [disk, other];
  assert.equal(attachableOf(both), both, "all of two: the resolution's own list");
  assert.deepEqual(volumesOf(attachableOf([disk, notAttachable, other])), both);
  // What a pod of one disk keeps for its attachable volumes (beside the 40 bytes of the
  // object holding them and its slot): a list of one took 56 bytes more.
  const kept = keptBytesEach(() =>
    Array.from({ length: 20_000 }, () => ({ volumes: attachableOf([disk]) })),
  );
  const asList = keptBytesEach(() =>
    Array.from({ length: 20_000 }, () => ({ volumes: [disk] as const })),
  );
  assert.ok(kept <= 48, `a record's attachable volumes keep ${Math.round(kept)} bytes`);
  assert.ok(asList >= kept + 40, `a list of one kept ${Math.round(asList)} bytes`);
});

test("a pod's volumes of no claim are one shared object for every pod that declares them alike", () => {
  const count = 10_000;
  const pods = () =>
    Array.from(
      { length: count },
      (_, i) =>
        JSON.parse(
          JSON.stringify({
            metadata: { name: `pod-${i}`, namespace: 'default', uid: `u-${i}` },
            spec: {
              volumes: [
                { name: 'scratch', emptyDir: {} },
                { name: 'config', configMap: { name: 'web', defaultMode: 420 } },
              ],
            },
          }),
        ) as Pod,
    );
  const none = new ClusterObjects();
  const keptBytes = (objects: ClusterObjects | undefined) =>
    keptBytesEach(() => pods().map((pod) => controllerPodOf(pod, objects)));
  keptBytes(none);
  const own = keptBytes(undefined);
  const shared = keptBytes(none);
  // Each pod held its own emptyDir volume (~64 bytes) and ConfigMap volume (~80) before.
  assert.ok(
    shared <= own - 100,
    `volumes shared: ${Math.round(shared)} bytes a pod, each its own: ${Math.round(own)}`,
  );
});
