/**
 * A memory-backed emptyDir's tmpfs size, as the kubelet's calculateEmptyDirMemorySize
 * (pkg/volume/emptydir/empty_dir.go) works it out: the node's allocatable memory, lowered to
 * the pod's memory limit (ResourceConfigForPod: only when every container declares one, or
 * the pod does), lowered to sizeLimit; and tmpfs's `noswap` by kernel release.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { NewEvent, VoleEvent } from '../../src/events/index.js';
import type { Pod } from '../../src/events/k8s.js';
import { kernelHasNoswap } from '../../src/host/mount.js';
import { fold, initialWorld } from '../../src/kubelet/index.js';
import { engineStarted } from '../support/builders.js';

const Mi = 2 ** 20;
const allocatable = { cpuMillis: 4000, memoryBytes: 1024 * Mi, ephemeralStorageBytes: 10 ** 11 };
type Container = NonNullable<Pod['spec']['containers']>[number];

const app = (name: string, memory?: string, restartPolicy?: string): Container => ({
  name,
  volumeMounts: [{ name: 'cache', mountPath: '/cache' }],
  ...(memory === undefined ? {} : { resources: { limits: { memory } } }),
  ...(restartPolicy === undefined ? {} : { restartPolicy }),
});

/** The tmpfs size the fold resolves for the pod's one Memory emptyDir. */
function tmpfsBytes(
  spec: Omit<Pod['spec'], 'volumes'>,
  opts: { sizeLimit?: string; allocatable?: boolean } = {},
): number | undefined {
  const started = engineStarted() as Extract<NewEvent, { type: 'EngineStarted' }>;
  const pod: Pod = {
    metadata: { name: 'p', namespace: 'default', uid: 'u1' },
    spec: {
      ...spec,
      volumes: [
        {
          name: 'cache',
          emptyDir: { medium: 'Memory', ...(opts.sizeLimit ? { sizeLimit: opts.sizeLimit } : {}) },
        },
      ],
    },
  };
  const world = initialWorld();
  const events: NewEvent[] = [
    { ...started, ...(opts.allocatable === false ? {} : { allocatable }) },
    { type: 'PodUpserted', tsMs: 0, pod },
  ];
  for (const event of events) fold(world, { ...event, seq: world.seq + 1 } as VoleEvent);
  const record = world.pods.get('u1' as never);
  assert.ok(record !== undefined);
  assert.deepEqual([...record.errors.values()], []);
  const source = record.volumes[0]!.source;
  assert.equal(source.kind, 'emptyDir');
  return source.kind === 'emptyDir' ? source.tmpfsBytes : undefined;
}

test('Memory emptyDir: the node allocatable when the pod sets no memory limit and no sizeLimit', () => {
  assert.equal(tmpfsBytes({ containers: [app('a')] }), 1024 * Mi);
  // One container without a limit leaves the pod without one (memoryLimitsDeclared false).
  assert.equal(tmpfsBytes({ containers: [app('a', '64Mi'), app('b')] }), 1024 * Mi);
});

test('Memory emptyDir: the pod limit is the containers summed, sidecars in, an init container if larger', () => {
  assert.equal(tmpfsBytes({ containers: [app('a', '64Mi'), app('b', '32Mi')] }), 96 * Mi);
  const withInit = {
    initContainers: [app('side', '16Mi', 'Always'), app('init', '200Mi')],
    containers: [app('a', '64Mi')],
  };
  assert.equal(tmpfsBytes(withInit), 216 * Mi, 'the init container plus the sidecar before it');
  const smallInit = {
    initContainers: [app('init', '8Mi'), app('side', '16Mi', 'Always')],
    containers: [app('a', '64Mi')],
  };
  assert.equal(tmpfsBytes(smallInit), 80 * Mi, 'the app and the sidecar');
  const overhead = { containers: [app('a', '64Mi')], overhead: { memory: '8Mi' } };
  assert.equal(tmpfsBytes(overhead), 72 * Mi, 'the RuntimeClass overhead is added');
  const podLevel = { containers: [app('a')], resources: { limits: { memory: '48Mi' } } };
  assert.equal(tmpfsBytes(podLevel), 48 * Mi, 'a pod-level limit stands for the containers');
});

test('Memory emptyDir: sizeLimit lowers the size, never raises it past the pod or the node', () => {
  const pod = { containers: [app('a', '64Mi')] };
  assert.equal(tmpfsBytes(pod, { sizeLimit: '16Mi' }), 16 * Mi);
  assert.equal(tmpfsBytes(pod, { sizeLimit: '128Mi' }), 64 * Mi);
  assert.equal(tmpfsBytes({ containers: [app('a')] }, { sizeLimit: '2Gi' }), 1024 * Mi);
  const huge = { containers: [app('a', '4Gi')] };
  assert.equal(tmpfsBytes(huge), 1024 * Mi, 'a limit above the allocatable is not used');
});

test('Memory emptyDir: with no allocatable, no limit and no sizeLimit, the kernel default', () => {
  assert.equal(tmpfsBytes({ containers: [app('a')] }, { allocatable: false }), undefined);
  const limited = { containers: [app('a', '64Mi')] };
  assert.equal(tmpfsBytes(limited, { allocatable: false }), 64 * Mi);
});

test('tmpfs noswap: from Linux 6.4 on', () => {
  assert.equal(kernelHasNoswap('6.4.0'), true);
  assert.equal(kernelHasNoswap('6.18.44-fc-v1272'), true);
  assert.equal(kernelHasNoswap('7.0.1'), true);
  assert.equal(kernelHasNoswap('6.3.13-generic'), false);
  assert.equal(kernelHasNoswap('5.15.0-91-generic'), false);
  assert.equal(kernelHasNoswap('unknown'), false);
});
