/**
 * The benchmark's yardstick for the fold: the attachment and mount machines of machines/
 * written out by hand as switch statements over plain objects, folding the same VoleEvents
 * into the same pair states (value + context) as src/kubelet/fold.ts.
 *
 * It does what the pair machines need and no more: it tracks running operations (which
 * pair a call acts on) and the desired (volume, pod) entries (the spec a setUp starts
 * with), resolving the volume sources the benchmark's logs use (PVC → PV → CSI, inline
 * CSI, emptyDir, hostPath, configMap, secret). It does not keep pods' errors, operation
 * records, backoff, causes or the dirty set, and it does not re-resolve pods when an
 * object they use changes later (the benchmark's logs never do that). `compareWithWorld`
 * checks that its pair states equal the real fold's.
 */
import { isDeepStrictEqual } from 'node:util';
import type { AttachmentContext, MountContext } from '../../machines/index.js';
import { attachmentInitialContext, mountInitialContext } from '../../machines/index.js';
import type { CallError, VoleEvent } from '../../src/events/index.js';
import type { World } from '../../src/kubelet/types.js';
import { podEntries } from '../../src/kubelet/by-pod.js';

export interface HandPair<C> {
  readonly value: string;
  readonly context: C;
}
type A = HandPair<AttachmentContext>;
type M = HandPair<MountContext>;

interface DesiredEntry {
  readonly outerVolumeSpecName: string;
  readonly volumeGidValue: string;
  readonly claimSizeBytes: number;
  readonly requiresRemount: boolean;
}

interface RunningOp {
  readonly volume: string;
  readonly pod: string | null;
  readonly startedSeq: number;
  readonly spec: DesiredEntry | null;
}

interface Caps {
  readonly attachable: boolean;
  readonly deviceMountable: boolean;
  readonly requiresRemount: boolean;
}

export interface HandState {
  seq: number;
  plugins: Map<string, Caps>;
  objects: Map<string, unknown>;
  /** volume → pod → what a setUp of that pod starts with (insertion order as the DSW's). */
  desired: Map<string, Map<string, DesiredEntry>>;
  /** pod → the volumes its last resolution desired. */
  podVolumes: Map<string, string[]>;
  running: Map<string, RunningOp>;
  attachments: Map<string, A>;
  mounts: Map<string, Map<string, M>>;
}

export function handInitial(): HandState {
  return {
    seq: 0,
    plugins: new Map(),
    objects: new Map(),
    desired: new Map(),
    podVolumes: new Map(),
    running: new Map(),
    attachments: new Map(),
    mounts: new Map(),
  };
}

// ---------------------------------------------------------------- the attachment machine

type AEvent =
  | { type: 'ATTACH_START' | 'DETACH_START' | 'DETACH_OK' | 'FORGET' | 'UNMOUNT_DEVICE_START' }
  | { type: 'UNMOUNT_DEVICE_OK' | 'UNMOUNT_DEVICE_FAIL' | 'EXPANSION_IN_USE_ERROR' | 'CRASH' }
  | { type: 'OBSERVED_DETACHED' | 'OBSERVED_DEVICE_UNMOUNTED' }
  | { type: 'ATTACH_OK' | 'VERIFY_OK'; devicePath: string }
  | { type: 'ATTACH_FAIL' | 'DETACH_FAIL'; uncertain: boolean }
  | { type: 'MOUNT_DEVICE_START'; deviceMountPath: string }
  | { type: 'MOUNT_DEVICE_OK'; deviceMountPath: string; devicePath: string }
  | { type: 'MOUNT_DEVICE_FAIL'; errorKind: CallError['kind'] }
  | { type: 'RESIZED' | 'CLAIM_SIZE_KNOWN'; sizeBytes: number };

const initialAttachment: A = { value: 'detached', context: attachmentInitialContext };

function to(value: string, context: AttachmentContext, patch?: Partial<AttachmentContext>): A {
  return { value, context: patch === undefined ? { ...context } : { ...context, ...patch } };
}

/** The attachment machine by hand; undefined when the state does not accept the event. */
export function stepAttachmentByHand(s: A, e: AEvent): A | undefined {
  const c = s.context;
  switch (s.value) {
    case 'detached':
      if (e.type === 'ATTACH_START') return to('attaching', c, { callFrom: 'detached' });
      if (e.type === 'VERIFY_OK')
        return to('attached.deviceUnmounted', c, { devicePath: e.devicePath, callFrom: null });
      return undefined;
    case 'attaching':
      switch (e.type) {
        case 'ATTACH_OK':
          return to('attached.deviceUnmounted', c, { devicePath: e.devicePath, callFrom: null });
        case 'ATTACH_FAIL':
          if (e.uncertain || c.callFrom === 'attachUncertain')
            return to('attachUncertain', c, { callFrom: null });
          return to('detached', c, { callFrom: null });
        case 'CRASH':
          return to('attachUncertain', c, { callFrom: null });
        default:
          return undefined;
      }
    case 'attachUncertain':
      switch (e.type) {
        case 'ATTACH_START':
          return to('attaching', c, { callFrom: 'attachUncertain' });
        case 'VERIFY_OK':
          return to('attached.deviceUnmounted', c, { devicePath: e.devicePath, callFrom: null });
        case 'DETACH_START':
          return to('detaching', c, { callFrom: 'attachUncertain' });
        case 'FORGET':
        case 'OBSERVED_DETACHED':
          return to('detached', c);
        default:
          return undefined;
      }
    case 'detaching':
      switch (e.type) {
        case 'DETACH_OK':
          return to('detached', c, { callFrom: null });
        case 'DETACH_FAIL':
          if (e.uncertain) return to('attachUncertain', c, { callFrom: null });
          if (c.callFrom === 'attached')
            return to('attached.deviceUnmounted', c, { callFrom: null });
          return to('attachUncertain', c, { callFrom: null });
        case 'CRASH':
          return to('attachUncertain', c, { callFrom: null });
        default:
          return undefined;
      }
    default:
      return stepAttachedByHand(s, e);
  }
}

/** The `attached` compound state: the child's transitions first, then the parent's. */
function stepAttachedByHand(s: A, e: AEvent): A | undefined {
  const c = s.context;
  let next: A | undefined;
  switch (s.value) {
    case 'attached.deviceUnmounted':
      if (e.type === 'MOUNT_DEVICE_START')
        next = to('attached.deviceMounting', c, {
          deviceFrom: 'deviceUnmounted',
          deviceMountPath: e.deviceMountPath,
        });
      else if (e.type === 'DETACH_START') next = to('detaching', c, { callFrom: 'attached' });
      else if (e.type === 'FORGET') next = to('detached', c);
      break;
    case 'attached.deviceMounting':
      if (e.type === 'MOUNT_DEVICE_OK') {
        next = to('attached.deviceMounted', c, {
          deviceMountPath: e.deviceMountPath,
          devicePath: e.devicePath === '' ? c.devicePath : e.devicePath,
          deviceFrom: null,
        });
      } else if (e.type === 'MOUNT_DEVICE_FAIL') {
        if (e.errorKind === 'uncertain')
          next = to('attached.deviceUncertain', c, { deviceFrom: null });
        else if (e.errorKind === 'final')
          next = to('attached.deviceUnmounted', c, { deviceMountPath: '', deviceFrom: null });
        else if (c.deviceFrom === 'deviceUncertain')
          next = to('attached.deviceUncertain', c, { deviceFrom: null });
        else next = to('attached.deviceUnmounted', c, { deviceMountPath: '', deviceFrom: null });
      } else if (e.type === 'CRASH') {
        next = to('attached.deviceUncertain', c, { deviceFrom: null });
      }
      break;
    case 'attached.deviceMounted':
      if (e.type === 'UNMOUNT_DEVICE_START') next = to('attached.deviceUnmounting', c);
      break;
    case 'attached.deviceUnmounting':
      if (e.type === 'UNMOUNT_DEVICE_OK')
        next = to('attached.deviceUnmounted', c, { deviceMountPath: '', deviceFrom: null });
      else if (e.type === 'UNMOUNT_DEVICE_FAIL' || e.type === 'CRASH')
        next = to('attached.deviceUncertain', c);
      break;
    case 'attached.deviceUncertain':
      if (e.type === 'MOUNT_DEVICE_START')
        next = to('attached.deviceMounting', c, {
          deviceFrom: 'deviceUncertain',
          deviceMountPath: e.deviceMountPath,
        });
      else if (e.type === 'UNMOUNT_DEVICE_START') next = to('attached.deviceUnmounting', c);
      else if (e.type === 'OBSERVED_DEVICE_UNMOUNTED')
        next = to('attached.deviceUnmounted', c, { deviceMountPath: '', deviceFrom: null });
      break;
    default:
      throw new Error(`hand reducer: unknown attachment state ${s.value}`);
  }
  if (next !== undefined) return next;
  switch (e.type) {
    case 'RESIZED':
      return to(s.value, c, { sizeBytes: e.sizeBytes });
    case 'CLAIM_SIZE_KNOWN':
      return to(s.value, c, c.sizeBytes === 0 ? { sizeBytes: e.sizeBytes } : undefined);
    case 'EXPANSION_IN_USE_ERROR':
      return to(s.value, c, { inUseExpansionError: true });
    default:
      return undefined;
  }
}

// ---------------------------------------------------------------- the mount machine

type MEvent =
  | { type: 'SETUP_START'; outerVolumeSpecName: string; volumeGidValue: string }
  | { type: 'SETUP_FAIL'; errorKind: CallError['kind'] }
  | {
      type:
        'SETUP_OK' | 'TEARDOWN_START' | 'TEARDOWN_OK' | 'TEARDOWN_FAIL' | 'EXPAND_IN_MOUNT_FAIL';
    }
  | { type: 'REMOUNT_REQUIRED' | 'CRASH' | 'OBSERVED_UNMOUNTED' };

const initialMount: M = { value: 'unmounted', context: mountInitialContext };

function mto(value: string, context: MountContext, patch?: Partial<MountContext>): M {
  return { value, context: patch === undefined ? { ...context } : { ...context, ...patch } };
}

/** The mount machine by hand; undefined when the state does not accept the event. */
export function stepMountByHand(s: M, e: MEvent): M | undefined {
  const c = s.context;
  switch (s.value) {
    case 'unmounted':
      if (e.type === 'SETUP_START') {
        return mto('mounting', c, {
          mountFrom: 'unmounted',
          outerVolumeSpecName: e.outerVolumeSpecName,
          volumeGidValue: e.volumeGidValue,
        });
      }
      return undefined;
    case 'mounting':
      switch (e.type) {
        case 'SETUP_OK':
          return mto('mounted', c, { remountRequired: false, mountFrom: null });
        case 'SETUP_FAIL':
          if (c.mountFrom === 'mounted') return mto('mounted', c, { mountFrom: null });
          if (c.mountFrom === 'mountUncertain' && e.errorKind !== 'final')
            return mto('mountUncertain', c, { mountFrom: null });
          if (e.errorKind === 'uncertain') return mto('mountUncertain', c, { mountFrom: null });
          return mto('unmounted', c, { mountFrom: null });
        case 'CRASH':
          return mto('mountUncertain', c, { mountFrom: null });
        default:
          return undefined;
      }
    case 'mounted':
      switch (e.type) {
        case 'SETUP_START':
          return mto('mounting', c, {
            mountFrom: 'mounted',
            outerVolumeSpecName: e.outerVolumeSpecName,
            volumeGidValue: e.volumeGidValue,
          });
        case 'TEARDOWN_START':
          return mto('unmounting', c);
        case 'EXPAND_IN_MOUNT_FAIL':
          return mto('mountUncertain', c);
        case 'REMOUNT_REQUIRED':
          return mto('mounted', c, { remountRequired: true });
        default:
          return undefined;
      }
    case 'unmounting':
      if (e.type === 'TEARDOWN_OK') return mto('unmounted', c);
      if (e.type === 'TEARDOWN_FAIL' || e.type === 'CRASH') return mto('mountUncertain', c);
      return undefined;
    case 'mountUncertain':
      switch (e.type) {
        case 'SETUP_START':
          return mto('mounting', c, {
            mountFrom: 'mountUncertain',
            outerVolumeSpecName: e.outerVolumeSpecName,
            volumeGidValue: e.volumeGidValue,
          });
        case 'TEARDOWN_START':
          return mto('unmounting', c);
        case 'OBSERVED_UNMOUNTED':
          return mto('unmounted', c);
        default:
          return undefined;
      }
    default:
      throw new Error(`hand reducer: unknown mount state ${s.value}`);
  }
}

// ---------------------------------------------------------------- applying events

function attach(h: HandState, volume: string, e: AEvent, observation = false): void {
  const current = h.attachments.get(volume) ?? initialAttachment;
  const next = stepAttachmentByHand(current, e);
  if (next === undefined) {
    if (observation) return;
    throw new Error(
      `hand reducer: attachment ${volume}: ${e.type} not accepted in ${current.value} (seq ${h.seq})`,
    );
  }
  if (next.value === 'detached') h.attachments.delete(volume);
  else h.attachments.set(volume, next);
}

function mount(h: HandState, volume: string, pod: string, e: MEvent, observation = false): void {
  let byPod = h.mounts.get(volume);
  const current = byPod?.get(pod) ?? initialMount;
  const next = stepMountByHand(current, e);
  if (next === undefined) {
    if (observation) return;
    throw new Error(
      `hand reducer: mount ${volume} × ${pod}: ${e.type} not accepted in ${current.value} (seq ${h.seq})`,
    );
  }
  if (next.value === 'unmounted') {
    byPod?.delete(pod);
    if (byPod?.size === 0) h.mounts.delete(volume);
    return;
  }
  if (byPod === undefined) h.mounts.set(volume, (byPod = new Map()));
  byPod.set(pod, next);
}

type PodOf = Extract<VoleEvent, { type: 'PodUpserted' }>['pod'];
type PodVolume = NonNullable<PodOf['spec']['volumes']>[number];

function parseBytes(quantity: string | undefined): number {
  if (quantity === undefined) return 0;
  const match = /^(\d+)(Ki|Mi|Gi|Ti|k|M|G|T)?$/.exec(quantity);
  if (match === null) return 0;
  const units: Record<string, number> = {
    Ki: 1024,
    Mi: 1024 ** 2,
    Gi: 1024 ** 3,
    Ti: 1024 ** 4,
    k: 1e3,
    M: 1e6,
    G: 1e9,
    T: 1e12,
  };
  return Number(match[1]) * (match[2] === undefined ? 1 : units[match[2]]!);
}

/** The unique volume name and setUp spec of one pod volume; undefined when unresolvable. */
function resolveByHand(
  h: HandState,
  pod: PodOf,
  v: PodVolume,
): { volume: string; entry: DesiredEntry } | undefined {
  const uid = pod.metadata.uid ?? '';
  const namespace = pod.metadata.namespace ?? 'default';
  let plugin: string;
  let handle: string | undefined;
  let inner = v.name;
  let inline = true;
  let gid = '';
  let claimSizeBytes = 0;
  if (v.persistentVolumeClaim !== undefined) {
    const pvc = h.objects.get(
      `PersistentVolumeClaim/${namespace}/${v.persistentVolumeClaim.claimName}`,
    ) as
      | {
          spec: { volumeName?: string };
          status?: { phase?: string; capacity?: { storage?: string } };
        }
      | undefined;
    const pvName = pvc?.spec.volumeName;
    if (
      pvName === undefined ||
      pvName === '' ||
      (pvc?.status?.phase !== undefined && pvc.status.phase !== 'Bound')
    )
      return undefined;
    const pv = h.objects.get(`PersistentVolume//${pvName}`) as
      | {
          metadata: { name: string; annotations?: Record<string, string> };
          spec: { csi?: { driver: string; volumeHandle?: string } };
        }
      | undefined;
    if (pv?.spec.csi === undefined) return undefined;
    plugin = pv.spec.csi.driver;
    handle = pv.spec.csi.volumeHandle ?? '';
    inner = pv.metadata.name;
    inline = false;
    gid = pv.metadata.annotations?.['pv.beta.kubernetes.io/gid'] ?? '';
    claimSizeBytes = parseBytes(pvc?.status?.capacity?.storage);
  } else if (v.csi !== undefined) {
    plugin = v.csi.driver;
    handle = v.csi.volumeHandle ?? v.name;
  } else if (v.emptyDir !== undefined) {
    plugin = 'kubernetes.io/empty-dir';
  } else if (v.hostPath !== undefined) {
    plugin = 'kubernetes.io/host-path';
  } else if (v.configMap !== undefined) {
    plugin = 'kubernetes.io/configmap';
  } else if (v.secret !== undefined) {
    plugin = 'kubernetes.io/secret';
  } else {
    return undefined;
  }
  const caps = h.plugins.get(plugin);
  if (caps === undefined) return undefined;
  const shared = !inline && (caps.attachable || caps.deviceMountable);
  const volume = shared ? `${plugin}/${handle ?? inner}` : `${plugin}/${uid}-${inner}`;
  return {
    volume,
    entry: {
      outerVolumeSpecName: v.name,
      volumeGidValue: gid,
      claimSizeBytes,
      requiresRemount: caps.requiresRemount,
    },
  };
}

function removePod(h: HandState, uid: string): void {
  for (const volume of h.podVolumes.get(uid) ?? []) {
    const pods = h.desired.get(volume);
    pods?.delete(uid);
    if (pods?.size === 0) h.desired.delete(volume);
  }
  h.podVolumes.delete(uid);
}

function upsertPod(h: HandState, pod: PodOf, reprocessed: boolean): void {
  const uid = pod.metadata.uid ?? '';
  removePod(h, uid);
  const volumes: string[] = [];
  let allResolved = true;
  const declared = pod.spec.volumes ?? [];
  const containers = pod.spec.containers;
  const used =
    containers === undefined
      ? undefined
      : new Set(
          containers.flatMap((c) => [
            ...(c.volumeMounts ?? []).map((m) => m.name),
            ...(c.volumeDevices ?? []).map((d) => d.name),
          ]),
        );
  for (const v of declared) {
    if (used !== undefined && !used.has(v.name)) continue;
    const resolved = resolveByHand(h, pod, v);
    if (resolved === undefined) {
      allResolved = false;
      continue;
    }
    let pods = h.desired.get(resolved.volume);
    if (pods === undefined) h.desired.set(resolved.volume, (pods = new Map()));
    pods.set(uid, resolved.entry);
    volumes.push(resolved.volume);
    if (reprocessed && resolved.entry.requiresRemount) {
      const m = h.mounts.get(resolved.volume)?.get(uid);
      if (m?.value === 'mounted') mount(h, resolved.volume, uid, { type: 'REMOUNT_REQUIRED' });
    }
  }
  h.podVolumes.set(uid, volumes);
  void allResolved;
}

function objectKeyOf(kind: string, name: string, namespace: string | undefined): string {
  return `${kind}/${kind === 'PersistentVolumeClaim' ? (namespace ?? 'default') : ''}/${name}`;
}

function runningOf(h: HandState, opId: string): RunningOp {
  const op = h.running.get(opId);
  if (op === undefined)
    throw new Error(`hand reducer: operation ${opId} is not running (seq ${h.seq})`);
  return op;
}

/** Folds one event (in place, like the real fold's index maps). */
export function handFold(h: HandState, e: VoleEvent): HandState {
  if (e.seq !== h.seq + 1) throw new Error(`hand reducer: seq ${e.seq} after ${h.seq}`);
  h.seq = e.seq;
  switch (e.type) {
    case 'EngineStarted': {
      const ops = [...h.running.values()].sort((a, b) => a.startedSeq - b.startedSeq);
      for (const op of ops) {
        attach(h, op.volume, { type: 'CRASH' }, true);
        if (op.pod !== null) mount(h, op.volume, op.pod, { type: 'CRASH' }, true);
      }
      h.running.clear();
      h.plugins = new Map(e.plugins.map((p) => [p.name, p]));
      return h;
    }
    case 'ObjectUpserted': {
      const o = e.object;
      h.objects.set(
        objectKeyOf(o.kind, o.metadata.name, (o.metadata as { namespace?: string }).namespace),
        o,
      );
      return h;
    }
    case 'ObjectRemoved':
      h.objects.delete(objectKeyOf(e.kind, e.name, e.namespace));
      return h;
    case 'PodUpserted':
      upsertPod(h, e.pod, true);
      return h;
    case 'PodRemoved':
      removePod(h, e.uid);
      return h;
    case 'HostObserved':
      for (const a of e.attachments) {
        if (a.attached === false) attach(h, a.volume, { type: 'OBSERVED_DETACHED' }, true);
        if (a.deviceMounted === false)
          attach(h, a.volume, { type: 'OBSERVED_DEVICE_UNMOUNTED' }, true);
      }
      for (const m of e.mounts)
        if (!m.mounted) mount(h, m.volume, m.pod, { type: 'OBSERVED_UNMOUNTED' }, true);
      return h;
    case 'OperationStarted': {
      const pods = h.desired.get(e.volume);
      const pod = e.pod ?? null;
      const spec =
        pods === undefined
          ? null
          : pod !== null
            ? (pods.get(pod) ?? null)
            : (pods.values().next().value ?? null);
      h.running.set(e.opId, { volume: e.volume, pod, startedSeq: e.seq, spec });
      return h;
    }
    case 'CallStarted': {
      const op = runningOf(h, e.opId);
      switch (e.call) {
        case 'attach':
          attach(h, op.volume, { type: 'ATTACH_START' });
          break;
        case 'detach':
          attach(h, op.volume, { type: 'DETACH_START' });
          break;
        case 'mountDevice':
          attach(h, op.volume, {
            type: 'MOUNT_DEVICE_START',
            deviceMountPath: e.deviceMountPath ?? '',
          });
          break;
        case 'unmountDevice':
          attach(h, op.volume, { type: 'UNMOUNT_DEVICE_START' });
          break;
        case 'setUp':
          mount(h, op.volume, op.pod!, {
            type: 'SETUP_START',
            outerVolumeSpecName: op.spec!.outerVolumeSpecName,
            volumeGidValue: op.spec!.volumeGidValue,
          });
          break;
        case 'tearDown':
          mount(h, op.volume, op.pod!, { type: 'TEARDOWN_START' });
          break;
        default:
          break;
      }
      return h;
    }
    case 'CallSucceeded': {
      const op = runningOf(h, e.opId);
      switch (e.call) {
        case 'attach':
        case 'verifyControllerAttached': {
          const devicePath = e.devicePath ?? '';
          attach(
            h,
            op.volume,
            e.call === 'attach'
              ? { type: 'ATTACH_OK', devicePath }
              : { type: 'VERIFY_OK', devicePath },
          );
          const claimSizeBytes = op.spec?.claimSizeBytes ?? 0;
          if (claimSizeBytes > 0)
            attach(h, op.volume, { type: 'CLAIM_SIZE_KNOWN', sizeBytes: claimSizeBytes });
          break;
        }
        case 'detach':
          attach(h, op.volume, { type: 'DETACH_OK' });
          break;
        case 'markDetached':
          attach(h, op.volume, { type: 'FORGET' });
          break;
        case 'mountDevice':
          attach(h, op.volume, {
            type: 'MOUNT_DEVICE_OK',
            deviceMountPath: e.deviceMountPath ?? '',
            devicePath: e.devicePath ?? '',
          });
          break;
        case 'unmountDevice':
          attach(h, op.volume, { type: 'UNMOUNT_DEVICE_OK' });
          break;
        case 'setUp':
          mount(h, op.volume, op.pod!, { type: 'SETUP_OK' });
          break;
        case 'tearDown':
          mount(h, op.volume, op.pod!, { type: 'TEARDOWN_OK' });
          break;
        case 'nodeExpand':
          attach(h, op.volume, { type: 'RESIZED', sizeBytes: e.sizeBytes ?? 0 });
          break;
        default:
          break;
      }
      return h;
    }
    case 'CallFailed': {
      const op = runningOf(h, e.opId);
      const kind = e.error.kind;
      switch (e.call) {
        case 'attach':
          attach(h, op.volume, { type: 'ATTACH_FAIL', uncertain: kind === 'uncertain' });
          break;
        case 'detach':
          attach(h, op.volume, { type: 'DETACH_FAIL', uncertain: kind === 'uncertain' });
          break;
        case 'mountDevice':
          attach(h, op.volume, { type: 'MOUNT_DEVICE_FAIL', errorKind: kind });
          break;
        case 'unmountDevice':
          attach(h, op.volume, { type: 'UNMOUNT_DEVICE_FAIL' });
          break;
        case 'setUp':
          mount(h, op.volume, op.pod!, { type: 'SETUP_FAIL', errorKind: kind });
          break;
        case 'tearDown':
          mount(h, op.volume, op.pod!, { type: 'TEARDOWN_FAIL' });
          break;
        case 'nodeExpand':
          if (e.error.failedPrecondition === true)
            attach(h, op.volume, { type: 'EXPANSION_IN_USE_ERROR' });
          break;
        default:
          break;
      }
      return h;
    }
    case 'OperationFinished':
      runningOf(h, e.opId);
      h.running.delete(e.opId);
      return h;
    default:
      // SourcesReady, ReportRaised, VolumesReportedInUse, NodeStatusObserved, the
      // controller's observations, and any event added later: no pair changes here. Should a
      // new event change pairs, compareWithWorld catches the difference.
      return h;
  }
}

/**
 * Differences between the hand reducer's pair states and the real world's (empty when
 * equal): every attachment and mount, value and context, compared deeply.
 */
export function compareWithWorld(h: HandState, world: World, limit = 5): string[] {
  const diffs: string[] = [];
  const add = (message: string) => {
    if (diffs.length < limit) diffs.push(message);
  };
  if (h.seq !== world.seq) add(`seq ${h.seq} vs ${world.seq}`);
  if (h.attachments.size !== world.attachments.size)
    add(`attachments: ${h.attachments.size} vs ${world.attachments.size}`);
  for (const [volume, record] of world.attachments) {
    const mine = h.attachments.get(volume);
    if (!isDeepStrictEqual(mine, { value: record.value, context: record.context })) {
      add(
        `attachment ${volume}: ${JSON.stringify(mine)} vs ${JSON.stringify({ value: record.value, context: record.context })}`,
      );
    }
  }
  let mounts = 0;
  for (const [volume, byPod] of world.mounts) {
    for (const record of podEntries(byPod)) {
      const pod = record.pod;
      mounts++;
      const mine = h.mounts.get(volume)?.get(pod);
      if (!isDeepStrictEqual(mine, { value: record.value, context: record.context })) {
        add(
          `mount ${volume} × ${pod}: ${JSON.stringify(mine)} vs ${JSON.stringify({ value: record.value, context: record.context })}`,
        );
      }
    }
  }
  const myMounts = [...h.mounts.values()].reduce((n, m) => n + m.size, 0);
  if (myMounts !== mounts) add(`mounts: ${myMounts} vs ${mounts}`);
  return diffs;
}
