/**
 * downwardAPI `resourceFieldRef` files, as the kubelet writes them (pkg/api/v1/resource/
 * helpers.go ExtractResourceValueByContainerNameAndNodeAllocatable): a container's declared
 * limits and requests divided by the divisor and rounded up, the node's allocatable where
 * no limit is set — the allocatable EngineStarted recorded, so a replay writes the same.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { NewEvent, VoleEvent } from '../../src/events/index.js';
import type { Pod } from '../../src/events/k8s.js';
import { validate } from '../../src/sources/validate.js';
import { fold, initialWorld } from '../../src/kubelet/index.js';
import type { World } from '../../src/kubelet/types.js';
import { builtins, engineStarted } from '../support/builders.js';
import { caps } from '../../src/plugins/types.js';

const downward = caps('kubernetes.io/downward-api', { requiresRemount: true });
const projected = caps('kubernetes.io/projected', { requiresRemount: true });
const allocatable = { cpuMillis: 4000, memoryBytes: 16 * 2 ** 30, ephemeralStorageBytes: 10 ** 11 };

function started(withAllocatable: boolean): NewEvent {
  const base = engineStarted() as Extract<NewEvent, { type: 'EngineStarted' }>;
  return {
    ...base,
    plugins: [...base.plugins, downward, projected],
    ...(withAllocatable ? { allocatable } : {}),
  };
}

function worldOf(events: NewEvent[]): World {
  const world = initialWorld();
  for (const event of events) fold(world, { ...event, seq: world.seq + 1 } as VoleEvent);
  return world;
}

const item = (path: string, resource: string, divisor?: string) => ({
  path,
  resourceFieldRef: { containerName: 'app', resource, ...(divisor ? { divisor } : {}) },
});

/** The docs' dapi-volume-resources example, with one limit left unset. */
const resourcesPod: Pod = {
  metadata: { name: 'kubernetes-downwardapi-volume-example-2', namespace: 'default', uid: 'u1' },
  spec: {
    containers: [
      {
        name: 'app',
        resources: {
          requests: { memory: '32Mi', cpu: '125m' },
          limits: { cpu: '500m' }, // memory limit not set: the node's allocatable
        },
        volumeMounts: [{ name: 'podinfo', mountPath: '/etc/podinfo' }],
      },
    ],
    volumes: [
      {
        name: 'podinfo',
        downwardAPI: {
          items: [
            item('cpu_limit', 'limits.cpu', '1m'),
            item('cpu_limit_cores', 'limits.cpu'),
            item('cpu_request', 'requests.cpu', '1m'),
            item('mem_limit', 'limits.memory', '1Mi'),
            item('mem_request', 'requests.memory', '1Mi'),
            item('storage_limit', 'limits.ephemeral-storage', '1G'),
            item('storage_request', 'requests.ephemeral-storage'),
          ],
        },
      },
    ],
  },
};

function filesOf(world: World, uid: string): Record<string, string> {
  const record = world.pods.get(uid as never);
  assert.ok(record !== undefined, 'the pod is known');
  assert.deepEqual([...record.errors.values()], [], 'the pod resolved without errors');
  const source = record.volumes[0]!.source;
  assert.equal(source.kind, 'downwardAPI');
  if (source.kind !== 'downwardAPI') return {};
  return Object.fromEntries(source.files.map((f) => [f.path, f.content]));
}

test('downwardAPI resourceFieldRef: declared limits and requests, divisors, allocatable for unset limits', () => {
  const world = worldOf([started(true), { type: 'PodUpserted', tsMs: 0, pod: resourcesPod }]);
  assert.deepEqual(filesOf(world, 'u1'), {
    cpu_limit: '500', // 500m / 1m
    cpu_limit_cores: '1', // 500m in cores, rounded up
    cpu_request: '125',
    mem_limit: String(16 * 1024), // 16Gi allocatable in Mi
    mem_request: '32',
    storage_limit: '100', // 1e11 allocatable bytes in G
    storage_request: '0', // no request and no limit declared
  });
});

test('downwardAPI resourceFieldRef: a request not set is the declared limit (API defaulting)', () => {
  const pod: Pod = structuredClone(resourcesPod);
  pod.spec.containers![0]!.resources = { limits: { memory: '64Mi', cpu: '2' } };
  const world = worldOf([started(true), { type: 'PodUpserted', tsMs: 0, pod }]);
  const files = filesOf(world, 'u1');
  assert.equal(files['mem_request'], '64');
  assert.equal(files['cpu_request'], '2000');
  assert.equal(files['mem_limit'], '64');
});

test('downwardAPI resourceFieldRef: the allocatable comes from EngineStarted, so a replay agrees', () => {
  const events = [started(true), { type: 'PodUpserted', tsMs: 0, pod: resourcesPod } as NewEvent];
  assert.deepEqual(filesOf(worldOf(events), 'u1'), filesOf(worldOf(events), 'u1'));
  // Without a recorded allocatable, an unset limit cannot be written: the volume says why.
  const unknown = worldOf([started(false), events[1]!]);
  const error = [...unknown.pods.get('u1' as never)!.errors.values()].join('');
  assert.match(
    error,
    /downward API file "mem_limit": no memory limit is set and the node's allocatable is not known/,
  );
});

test('downwardAPI resourceFieldRef in a projected volume, and a container that is not there', () => {
  const pod: Pod = structuredClone(resourcesPod);
  pod.spec.volumes = [
    {
      name: 'podinfo',
      projected: { sources: [{ downwardAPI: { items: [item('cpu', 'limits.cpu', '1m')] } }] },
    },
  ];
  const world = worldOf([started(true), { type: 'PodUpserted', tsMs: 0, pod }]);
  const source = world.pods.get('u1' as never)!.volumes[0]!.source;
  const part = source.kind === 'projected' ? source.sources[0] : undefined;
  assert.ok(part?.kind === 'downwardAPI', 'a projected downwardAPI part');
  assert.deepEqual(part.files, [{ path: 'cpu', content: '500' }]);
  const missing: Pod = structuredClone(resourcesPod);
  missing.spec.volumes![0]!.downwardAPI!.items = [
    { path: 'x', resourceFieldRef: { containerName: 'sidecar', resource: 'limits.cpu' } },
  ];
  const w2 = worldOf([started(true), { type: 'PodUpserted', tsMs: 0, pod: missing }]);
  assert.match(
    [...w2.pods.get('u1' as never)!.errors.values()].join(''),
    /container "sidecar" not found/,
  );
});

test('validation: resourceFieldRef in a volume needs containerName, a known resource, a valid divisor', () => {
  const withItems = (items: unknown[]) => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'p', namespace: 'default' },
    spec: {
      containers: [{ name: 'app', image: 'busybox' }],
      volumes: [{ name: 'podinfo', downwardAPI: { items } }],
    },
  });
  const fields = (items: unknown[]) => validate(withItems(items)).map((e) => e.field);
  const at = 'spec.volumes[0].downwardAPI.items[0].resourceFieldRef';
  assert.deepEqual(fields([{ path: 'a', resourceFieldRef: { resource: 'limits.cpu' } }]), [
    `${at}.containerName`,
  ]);
  assert.deepEqual(fields([item('a', 'limits.gpu')]), [`${at}.resource`]);
  assert.deepEqual(fields([item('a', 'limits.cpu', '1Mi')]), [`${at}.divisor`]);
  assert.deepEqual(fields([item('a', 'limits.memory', '1Mi')]), []);
  assert.deepEqual(fields([item('a', 'requests.cpu', '1m')]), []);
});
