/** Event builders for tests: short, readable, with the defaults of a one-node world. */
import type { NewEvent } from '../../src/events/index.js';
import type { PersistentVolumeClaim, Pod, StorageClass } from '../../src/events/k8s.js';
import { caps } from '../../src/plugins/types.js';

export const disk = caps('fake.disk', { attachable: true, deviceMountable: true });
export const builtins = [
  caps('kubernetes.io/empty-dir'),
  caps('kubernetes.io/host-path'),
  caps('kubernetes.io/configmap', { requiresRemount: true }),
  caps('kubernetes.io/secret', { requiresRemount: true }),
];

export function engineStarted(opts: { controllerAttachDetach?: boolean } = {}): NewEvent {
  return {
    type: 'EngineStarted',
    tsMs: 0,
    node: 'node-1',
    controllerAttachDetach: opts.controllerAttachDetach ?? false,
    plugins: [disk, ...builtins],
    version: 'test',
  };
}

/** The controller's EngineStarted: an attachable fake disk, Kubernetes' 6-minute force-detach. */
export const controllerStarted: NewEvent = {
  type: 'EngineStarted',
  tsMs: 0,
  plugins: [caps('fake.disk', { attachable: true })],
  version: 'test',
  mode: 'controller',
  controller: { maxWaitForUnmountMs: 360_000, disableForceDetachOnTimeout: false },
};

export const sourcesReady: NewEvent = { type: 'SourcesReady', tsMs: 0 };

/** A PV of the fake disk plugin and its bound claim `claim-<handle>`. */
export function diskObjects(handle: string, opts: { accessModes?: string[] } = {}): NewEvent[] {
  return [
    {
      type: 'ObjectUpserted',
      tsMs: 0,
      object: {
        apiVersion: 'v1',
        kind: 'PersistentVolume',
        metadata: { name: `pv-${handle}` },
        spec: {
          accessModes: opts.accessModes ?? ['ReadWriteOnce'],
          csi: { driver: 'fake.disk', volumeHandle: handle },
        },
      },
    },
    {
      type: 'ObjectUpserted',
      tsMs: 0,
      object: {
        apiVersion: 'v1',
        kind: 'PersistentVolumeClaim',
        metadata: { name: `claim-${handle}`, namespace: 'default' },
        spec: { volumeName: `pv-${handle}` },
        // Bound by the API server already: these events need no ClaimBound of the planner.
        status: { phase: 'Bound' },
      },
    },
  ];
}

type PodVolumes = NonNullable<Pod['spec']['volumes']>;

export function pod(uid: string, volumes: PodVolumes): Pod {
  return { metadata: { name: uid, namespace: 'default', uid }, spec: { volumes } };
}

export function podUpserted(uid: string, volumes: PodVolumes): NewEvent {
  return { type: 'PodUpserted', tsMs: 0, pod: pod(uid, volumes) };
}

export const claim = (handle: string, name = 'data') => ({
  name,
  persistentVolumeClaim: { claimName: `claim-${handle}` },
});
export const emptyDir = (name = 'scratch') => ({ name, emptyDir: {} });
export const configMap = (name = 'config') => ({ name, configMap: { name } });

/**
 * One whole operation as the executor writes it: OperationStarted, each call's start and
 * outcome, OperationFinished. `opId` must be `op-<seq of its OperationStarted>`, so the
 * caller gives the seq the first event will get.
 */
export function operation(
  startSeq: number,
  op: {
    op: string;
    volume: string;
    pod?: string;
    key?: { volume: string; pod: string; node: string };
  },
  calls: {
    call: string;
    ok?: boolean;
    kind?: 'transient' | 'uncertain' | 'final';
    devicePath?: string;
    deviceMountPath?: string;
  }[],
  opts: { tsMs?: number; finished?: boolean } = {},
): NewEvent[] {
  const opId = `op-${startSeq}`;
  const tsMs = opts.tsMs ?? 0;
  const key = op.key ?? { volume: op.volume, pod: op.pod ?? '', node: '' };
  const events: NewEvent[] = [
    {
      type: 'OperationStarted',
      tsMs,
      opId,
      op: op.op,
      key,
      volume: op.volume,
      ...(op.pod === undefined ? {} : { pod: op.pod }),
      cause: 0,
    } as NewEvent,
  ];
  let failed: { kind: 'transient' | 'uncertain' | 'final'; message: string } | undefined;
  for (const c of calls) {
    events.push({
      type: 'CallStarted',
      tsMs,
      opId,
      call: c.call,
      ...(c.deviceMountPath === undefined ? {} : { deviceMountPath: c.deviceMountPath }),
    } as NewEvent);
    if (c.ok === false || c.kind !== undefined) {
      failed = { kind: c.kind ?? 'final', message: `${c.call} failed` };
      events.push({ type: 'CallFailed', tsMs, opId, call: c.call, error: failed } as NewEvent);
      break;
    }
    events.push({
      type: 'CallSucceeded',
      tsMs,
      opId,
      call: c.call,
      ...(c.devicePath === undefined ? {} : { devicePath: c.devicePath }),
      ...(c.deviceMountPath === undefined ? {} : { deviceMountPath: c.deviceMountPath }),
    } as NewEvent);
  }
  if (opts.finished !== false) {
    events.push(
      failed === undefined
        ? { type: 'OperationFinished', tsMs, opId, outcome: 'ok' }
        : { type: 'OperationFinished', tsMs, opId, outcome: 'failed', error: failed },
    );
  }
  return events;
}

/** A StorageClass of `provisioner` (reclaim policy Delete, as the API server defaults it). */
export const storageClass = (
  name: string,
  mode: 'Immediate' | 'WaitForFirstConsumer',
  provisioner: string,
): StorageClass => ({
  apiVersion: 'storage.k8s.io/v1',
  kind: 'StorageClass',
  metadata: { name },
  provisioner,
  volumeBindingMode: mode,
  reclaimPolicy: 'Delete',
});

/** A Pending ReadWriteOnce claim of `className` in default, uid `uid-NAME`. */
export const pendingClaim = (
  name: string,
  className: string,
  storage = '1Gi',
): PersistentVolumeClaim => ({
  apiVersion: 'v1',
  kind: 'PersistentVolumeClaim',
  metadata: { name, namespace: 'default', uid: `uid-${name}` },
  spec: {
    storageClassName: className,
    accessModes: ['ReadWriteOnce'],
    resources: { requests: { storage } },
  },
  status: { phase: 'Pending' },
});
