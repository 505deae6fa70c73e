/**
 * The read path's compiled event predicates (src/events/fast-check.ts) against zod, the
 * definition they are compiled from: every valid event of every covered type takes the
 * fast lane, and no value the fast lane accepts is one zod rejects or would change.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { isDeepStrictEqual } from 'node:util';
import { test } from 'node:test';
import fc from 'fast-check';
import { z } from 'zod';
import { compileFastCheck } from '../../src/events/fast-check.js';
import {
  acceptsEvent,
  eventSchemas,
  eventTypes,
  fastCheckedEventTypes,
  parseEvent,
  voleEvent,
} from '../../src/events/index.js';

const caps = {
  name: 'fake.disk',
  attachable: true,
  deviceMountable: true,
  blockMappable: false,
  nodeExpandable: false,
  requiresFSResize: false,
  requiresRemount: false,
};
const base = { seq: 7, tsMs: 1_700_000_000_000 };

/** One valid event of every type the fast lane covers, each optional field used. */
const samples: Record<string, Record<string, unknown>[]> = {
  EngineStarted: [
    {
      ...base,
      type: 'EngineStarted',
      node: 'node-1',
      controllerAttachDetach: true,
      plugins: [caps],
      version: '0.1.0',
    },
    {
      ...base,
      type: 'EngineStarted',
      node: 'node-1',
      controllerAttachDetach: false,
      plugins: [],
      version: '0.1.0',
      mode: 'controller',
      controller: { maxWaitForUnmountMs: 360_000, disableForceDetachOnTimeout: false },
    },
    {
      ...base,
      type: 'EngineStarted',
      plugins: [],
      version: '0.1.0',
      mode: 'recorded',
      recorded: { source: 'api-server', origin: 'https://127.0.0.1:6443' },
    },
  ],
  ClaimBound: [
    {
      ...base,
      type: 'ClaimBound',
      namespace: 'default',
      claim: 'task-pv-claim',
      volume: 'task-pv-volume',
      capacityBytes: 10 * 2 ** 30,
      cause: 3,
    },
    {
      ...base,
      type: 'ClaimBound',
      namespace: 'default',
      claim: 'data',
      volume: 'pv-1',
      capacityBytes: 1024,
      cause: 4,
    },
  ],
  ClaimFinalizerRemoved: [
    { ...base, type: 'ClaimFinalizerRemoved', namespace: 'default', claim: 'data', cause: 5 },
  ],
  ExternalProvisioningRequested: [
    {
      ...base,
      type: 'ExternalProvisioningRequested',
      namespace: 'default',
      claim: 'data',
      provisioner: 'disk.csi.vole.dev',
      cause: 5,
    },
    {
      ...base,
      type: 'ExternalProvisioningRequested',
      namespace: 'default',
      claim: 'late',
      provisioner: 'disk.csi.vole.dev',
      selectedNode: 'node-1',
      cause: 6,
    },
  ],
  VolumeReleased: [{ ...base, type: 'VolumeReleased', pv: 'pvc-1', cause: 7 }],
  ReportRaised: [
    {
      ...base,
      type: 'ReportRaised',
      reason: 'FailedAttachVolume',
      pod: 'default/p',
      volume: 'v',
      node: 'n',
      message: 'Multi-Attach error',
    },
  ],
  SourcesReady: [{ ...base, type: 'SourcesReady' }],
  PodRemoved: [
    { ...base, type: 'PodRemoved', uid: 'uid-1' },
    {
      ...base,
      type: 'PodRemoved',
      uid: 'uid-1',
      observed: { resourceVersion: '812', uid: 'uid-1', at: '2026-12-07T20:00:00Z', via: 'watch' },
    },
  ],
  ObjectRemoved: [
    { ...base, type: 'ObjectRemoved', kind: 'PersistentVolumeClaim', name: 'c', namespace: 'ns' },
    { ...base, type: 'ObjectRemoved', kind: 'PersistentVolume', name: 'pv' },
    {
      ...base,
      type: 'ObjectRemoved',
      kind: 'Node',
      name: 'node-1',
      observed: {
        resourceVersion: '9',
        at: '2026-12-07T20:00:00.123456Z',
        via: 'audit',
        user: 'admin',
        verb: 'delete',
      },
    },
  ],
  KubeEventObserved: [
    {
      ...base,
      type: 'KubeEventObserved',
      namespace: 'ns',
      name: 'web-0.18f2',
      reason: 'FailedAttachVolume',
      message: 'Multi-Attach error for volume "pv-1"',
      eventType: 'Warning',
      involvedObject: { kind: 'Pod', namespace: 'ns', name: 'web-0', uid: 'uid-1' },
      component: 'attachdetach-controller',
      host: 'node-1',
      firstTimestamp: '2026-12-07T20:00:00Z',
      lastTimestamp: '2026-12-07T20:01:00Z',
      count: 3,
      observed: { resourceVersion: '77', at: '2026-12-07T20:01:00Z', via: 'list' },
    },
  ],
  NodeOperationObserved: [
    {
      ...base,
      type: 'NodeOperationObserved',
      component: 'kubelet',
      node: 'node-1',
      operation: 'MountVolume.SetUp',
      outcome: 'failed',
      volume: 'kubernetes.io/csi/d^h',
      volumeSpecName: 'pv-1',
      pod: { uid: 'uid-1', namespace: 'ns', name: 'web-0' },
      error: 'rpc error: code = Internal',
      logged: { file: 'kubelet.log', line: 12, at: '2026-12-07T20:01:00.000001Z' },
    },
    {
      ...base,
      type: 'NodeOperationObserved',
      component: 'kube-controller-manager',
      node: 'node-1',
      operation: 'attacherDetacher.AttachVolume',
      outcome: 'started',
      volume: 'kubernetes.io/csi/d^h',
      logged: { file: 'kcm.log', line: 1, at: '2026-12-07T20:01:00.000001Z' },
    },
  ],
  VolumesReportedInUse: [{ ...base, type: 'VolumesReportedInUse', volumes: ['a', 'b'] }],
  TokensRefreshDue: [{ ...base, type: 'TokensRefreshDue', pod: 'uid-1' }],
  NodeStatusObserved: [
    {
      ...base,
      type: 'NodeStatusObserved',
      node: 'node-1',
      volumesAttached: [{ name: 'fake.disk/d', devicePath: '/dev/x' }],
    },
  ],
  HostObserved: [
    {
      ...base,
      type: 'HostObserved',
      attachments: [{ volume: 'v', attached: false, deviceMounted: false }, { volume: 'w' }],
      mounts: [{ volume: 'v', pod: 'p', mounted: true }],
    },
  ],
  AttachmentsVerified: [
    { ...base, type: 'AttachmentsVerified', node: 'n', volumes: [{ name: 'v', attached: true }] },
  ],
  AttachmentsFound: [
    {
      ...base,
      type: 'AttachmentsFound',
      attachments: [{ volume: 'v', node: 'n', pv: 'pv', attached: false }],
    },
  ],
  OperationStarted: [
    {
      ...base,
      type: 'OperationStarted',
      opId: 'op-7',
      op: 'mount',
      key: { volume: 'v', pod: 'p', node: '' },
      volume: 'v',
      pod: 'p',
      remount: false,
      cause: 3,
    },
    {
      ...base,
      type: 'OperationStarted',
      opId: 'op-8',
      op: 'detach',
      key: { volume: 'v', pod: '', node: 'n' },
      volume: 'v',
      node: 'n',
      verifySafeToDetach: false,
      forced: 'out-of-service',
      cause: 0,
    },
    {
      ...base,
      type: 'OperationStarted',
      opId: 'op-9',
      op: 'provision',
      key: { volume: 'kubernetes.io/csi/d^pvc-1', pod: '', node: '' },
      volume: 'kubernetes.io/csi/d^pvc-1',
      provision: {
        claim: { namespace: 'default', name: 'data', uid: '1' },
        storageClassName: 'fast',
        driver: 'd',
        name: 'pvc-1',
        requiredBytes: 1024,
        accessModes: ['ReadWriteOnce'],
        volumeMode: 'Filesystem',
        fsType: 'ext4',
        mountOptions: [],
        parameters: { type: 'ssd' },
        reclaimPolicy: 'Delete',
        requisite: [{ zone: 'z1' }],
        selectedNode: 'node-1',
      },
      cause: 2,
    },
    {
      ...base,
      type: 'OperationStarted',
      opId: 'op-10',
      op: 'controllerExpand',
      key: { volume: 'kubernetes.io/csi/d^pvc-1', pod: '', node: '' },
      volume: 'kubernetes.io/csi/d^pvc-1',
      pv: 'pvc-1',
      sizeBytes: 2048,
      cause: 3,
    },
  ],
  CallStarted: [
    { ...base, type: 'CallStarted', opId: 'op-7', call: 'mountDevice', deviceMountPath: '/m' },
    { ...base, type: 'CallStarted', opId: 'op-9', call: 'createVolume' },
  ],
  CallSucceeded: [
    {
      ...base,
      type: 'CallSucceeded',
      opId: 'op-7',
      call: 'nodeExpand',
      devicePath: '/dev/x',
      deviceMountPath: '/m',
      sizeBytes: 1024,
    },
    {
      ...base,
      type: 'CallSucceeded',
      opId: 'op-7',
      call: 'setUp',
      rpc: { method: '/csi.v1.Node/NodePublishVolume', code: 'OK', durationMs: 0.42 },
    },
    {
      ...base,
      type: 'CallSucceeded',
      opId: 'op-9',
      call: 'createVolume',
      sizeBytes: 1024,
      provisioned: {
        volumeId: 'pvc-1',
        capacityBytes: 1024,
        volumeContext: { a: 'b' },
        accessibleTopology: [{ 'topology.example.com/zone': 'z1' }],
      },
    },
    {
      ...base,
      type: 'CallSucceeded',
      opId: 'op-10',
      call: 'controllerExpand',
      sizeBytes: 2048,
      nodeExpansionRequired: true,
    },
  ],
  CallFailed: [
    {
      ...base,
      type: 'CallFailed',
      opId: 'op-7',
      call: 'mountDevice',
      error: { kind: 'uncertain', message: 'deadline' },
      rpc: {
        method: '/csi.v1.Node/NodeStageVolume',
        code: 'DEADLINE_EXCEEDED',
        durationMs: 110000,
      },
    },
    {
      ...base,
      type: 'CallFailed',
      opId: 'op-7',
      call: 'nodeExpand',
      error: { kind: 'final', message: 'no', failedPrecondition: true },
    },
  ],
  CsiDriverRegistered: [
    {
      ...base,
      type: 'CsiDriverRegistered',
      driver: 'disk.csi.vole.dev',
      endpoint: 'unix:///run/disk.sock',
      via: 'registration',
      vendorVersion: '0.1.0',
      nodeId: 'node-1',
      nodeCapabilities: ['STAGE_UNSTAGE_VOLUME'],
      controllerCapabilities: [],
      caps: {
        ...caps,
        csi: {
          publishUnpublish: false,
          stageUnstage: true,
          expand: false,
          singleNodeMultiWriter: false,
          maxVolumesPerNode: 0,
        },
      },
    },
  ],
  CsiDriverDeregistered: [
    {
      ...base,
      type: 'CsiDriverDeregistered',
      driver: 'disk.csi.vole.dev',
      endpoint: 'unix:///run/disk.sock',
      reason: 'gone',
    },
  ],
  OperatorRequested: [
    {
      ...base,
      type: 'OperatorRequested',
      action: 'detach',
      volume: 'disk.vole.dev/web-data',
      node: 'node-1',
      force: true,
      reason: 'swap the disk',
    },
    {
      ...base,
      type: 'OperatorRequested',
      action: 'release',
      volume: 'v',
      pod: 'uid-a',
      force: false,
      reason: 'r',
    },
  ],
  OperatorRequestDecided: [
    {
      ...base,
      type: 'OperatorRequestDecided',
      requestSeq: 6,
      volume: 'v',
      verdict: 'refused',
      message: 'in use',
    },
  ],
  OperationFinished: [
    { ...base, type: 'OperationFinished', opId: 'op-7', outcome: 'ok' },
    {
      ...base,
      type: 'OperationFinished',
      opId: 'op-7',
      outcome: 'failed',
      error: { kind: 'transient', message: 'x' },
    },
  ],
};

const checks = new Map(
  eventTypes.map((type) => [type, compileFastCheck(eventSchemas[type])] as const),
);

test('fast lane: covers every event type but the three that carry Kubernetes objects', () => {
  assert.deepEqual(eventTypes.filter((t) => !fastCheckedEventTypes.includes(t)).sort(), [
    'CSINodeObserved',
    'ObjectUpserted',
    'PodUpserted',
  ]);
  assert.deepEqual(Object.keys(samples).sort(), [...fastCheckedEventTypes].sort());
});

test('fast lane: every valid sample takes it, and zod agrees it is valid and unchanged', () => {
  for (const [type, list] of Object.entries(samples)) {
    for (const sample of list) {
      const check = checks.get(type as never)!;
      assert.equal(check(sample), true, `${type}: ${JSON.stringify(sample)}`);
      const parsed = voleEvent.safeParse(sample);
      assert.ok(parsed.success, `${type}: zod rejects the sample`);
      assert.deepEqual(parsed.data, sample);
      assert.equal(parseEvent(sample), sample, 'the fast lane returns the value itself');
    }
  }
});

/** A JSON value that might break a field: wrong types, edge numbers, long strings. */
const hostile = fc.oneof(
  fc.jsonValue(),
  fc.constantFrom(
    -1,
    0,
    0.5,
    Number.MAX_SAFE_INTEGER + 2,
    Number.NaN,
    Number.POSITIVE_INFINITY,
    '',
    'x'.repeat(16_385),
    null,
    undefined,
    [],
    {},
    'op-1',
    'attach',
    'controller',
    true,
  ),
);

/** Paths to every field of a sample, nested objects and array items included. */
function paths(value: unknown, prefix: (string | number)[] = []): (string | number)[][] {
  if (typeof value !== 'object' || value === null) return [prefix];
  const entries = Array.isArray(value)
    ? value.map((v, i) => [i, v] as const)
    : Object.entries(value);
  return [prefix, ...entries.flatMap(([k, v]) => paths(v, [...prefix, k]))];
}

function mutate(
  value: unknown,
  path: readonly (string | number)[],
  how: 'set' | 'delete' | 'extra',
  to: unknown,
): unknown {
  const copy = structuredClone(value) as Record<string | number, unknown>;
  let target: Record<string | number, unknown> = copy;
  // The innermost plain object on the path: where an extra key goes (JSON cannot put one
  // on an array).
  let object: Record<string | number, unknown> = copy;
  for (const key of path.slice(0, -1)) {
    target = target[key] as Record<string | number, unknown>;
    if (!Array.isArray(target)) object = target;
  }
  const last = path[path.length - 1];
  if (how === 'extra') {
    const holder = last === undefined ? undefined : target[last];
    const on =
      typeof holder === 'object' && holder !== null && !Array.isArray(holder)
        ? (holder as Record<string, unknown>)
        : object;
    on.unexpected = to;
    return copy;
  }
  if (last === undefined) return how === 'set' ? to : copy;
  if (how === 'delete') delete target[last];
  else target[last] = to;
  return copy;
}

test('fast lane: never accepts what zod rejects or would change (mutations of every sample)', () => {
  const all = Object.entries(samples).flatMap(([type, list]) => list.map((s) => ({ type, s })));
  let accepted = 0;
  fc.assert(
    fc.property(
      fc.constantFrom(...all),
      fc.nat(),
      fc.constantFrom('set', 'delete', 'extra'),
      hostile,
      ({ type, s }, pick, how, to) => {
        const options = paths(s);
        const mutated = mutate(s, options[pick % options.length]!, how, to);
        const check = checks.get(type as never)!;
        if (!check(mutated)) return;
        accepted++;
        const parsed = eventSchemas[type as keyof typeof eventSchemas].safeParse(mutated);
        assert.ok(
          parsed.success,
          `fast lane accepted ${JSON.stringify(mutated)}; zod: ${parsed.error}`,
        );
        assert.ok(isDeepStrictEqual(parsed.data, mutated), 'zod would change the value');
      },
    ),
    { numRuns: 20_000, seed: 1234 },
  );
  // Some mutations stay valid (another allowed value): the property was exercised both ways.
  assert.ok(accepted > 0);
});

test("fast lane: a rejected event still gets zod's error naming the field", () => {
  const bad = { ...samples.CallStarted![0]!, call: 'format' };
  assert.throws(() => parseEvent(bad), /call/);
});

test('fast lane: constructs outside the subset compile to undefined, not a wrong check', () => {
  assert.equal(compileFastCheck(z.string().regex(/^a/)), undefined);
  assert.equal(compileFastCheck(z.object({ a: z.string() }).catchall(z.number())), undefined);
  assert.equal(compileFastCheck(z.union([z.string(), z.number()])), undefined);
  const ok = compileFastCheck(z.object({ n: z.number().int().nonnegative().lt(10) }))!;
  assert.deepEqual([{ n: 0 }, { n: 9 }, { n: 10 }, { n: -1 }, { n: 1.5 }, { n: '1' }, {}].map(ok), [
    true,
    true,
    false,
    false,
    false,
    false,
    false,
  ]);
});

test('fast lane: only plain objects and arrays, whose JSON round trip is the same event', () => {
  class Finished {
    type = 'OperationFinished';
    seq = 1;
    tsMs = 0;
    opId = 'op-1';
    outcome = 'ok';
    toJSON() {
      return { outcome: 'failed' };
    }
  }
  assert.equal(acceptsEvent(new Finished()), false);
  const plain = { type: 'OperationFinished', seq: 1, tsMs: 0, opId: 'op-1', outcome: 'ok' };
  assert.equal(acceptsEvent(plain), true);
  class Volumes extends Array<string> {}
  const event = { ...samples.VolumesReportedInUse![0]!, volumes: Volumes.from(['a']) };
  assert.equal(acceptsEvent(event), false);
});

test('fast lane: where code generation is disallowed, zod alone validates', () => {
  const script =
    "const m = await import('./src/events/index.ts');" +
    "const e = m.parseEvent({ type: 'SourcesReady', seq: 1, tsMs: 0 });" +
    'console.log(JSON.stringify([m.fastCheckedEventTypes.length, e.type]));';
  const run = spawnSync(
    process.execPath,
    [
      '--disallow-code-generation-from-strings',
      '--import',
      'tsx',
      '--input-type=module',
      '-e',
      script,
    ],
    { encoding: 'utf8', cwd: new URL('../..', import.meta.url).pathname },
  );
  assert.equal(run.status, 0, run.stderr);
  assert.deepEqual(JSON.parse(run.stdout.trim()), [0, 'SourcesReady']);
});
