/**
 * Logs of a cluster as a recorder writes them (the objects the API server served, in
 * order), built event by event for `vole judge`'s tests: a CSI PersistentVolume, its
 * claim, two nodes, VolumeAttachments and pods.
 */
import type { VoleEvent } from '../../src/events/index.js';
import type { ClusterObject } from '../../src/events/k8s.js';

export const t0 = Date.parse('2026-12-01T12:00:00Z');
export const at = (clock: string) => Date.parse(`2026-12-01T${clock}Z`);
const driver = 'disk.csi.example.com';
export const uniqueOf = (pv: string) => `kubernetes.io/csi/${driver}^${pv}`;

/** A log under construction: each added event gets the next seq; returns that seq. */
export class Log {
  readonly events: VoleEvent[] = [];
  add(tsMs: number, event: Record<string, unknown>): number {
    const seq = this.events.length + 1;
    this.events.push({ ...event, seq, tsMs } as VoleEvent);
    return seq;
  }
  object(tsMs: number, object: ClusterObject): number {
    return this.add(tsMs, { type: 'ObjectUpserted', object });
  }
  removed(tsMs: number, kind: string, name: string): number {
    return this.add(tsMs, { type: 'ObjectRemoved', kind, name });
  }
  node(tsMs: number, name: string, o: { ready: boolean; inUse?: string[]; taint?: string }) {
    return this.object(tsMs, {
      kind: 'Node',
      metadata: { name },
      ...(o.taint === undefined
        ? {}
        : { spec: { taints: [{ key: o.taint, effect: 'NoExecute' }] } }),
      status: {
        conditions: [{ type: 'Ready', status: o.ready ? 'True' : 'Unknown' }],
        volumesInUse: (o.inUse ?? []).map(uniqueOf),
      },
    });
  }
  va(
    tsMs: number,
    name: string,
    pv: string,
    node: string,
    o: { attached: boolean; deleting?: boolean; error?: string },
  ) {
    return this.object(tsMs, {
      kind: 'VolumeAttachment',
      metadata: {
        name,
        ...(o.deleting === true ? { deletionTimestamp: new Date(tsMs).toISOString() } : {}),
      },
      spec: { attacher: driver, nodeName: node, source: { persistentVolumeName: pv } },
      status: {
        attached: o.attached,
        ...(o.error === undefined ? {} : { attachError: { message: o.error } }),
      },
    });
  }
  pod(
    tsMs: number,
    name: string,
    o: { node?: string; claim: string; deleting?: boolean; phase?: string },
  ) {
    return this.add(tsMs, {
      type: 'PodUpserted',
      pod: {
        metadata: {
          name,
          namespace: 'default',
          uid: `uid-${name}`,
          ...(o.deleting === true ? { deletionTimestamp: new Date(tsMs).toISOString() } : {}),
        },
        spec: {
          ...(o.node === undefined ? {} : { nodeName: o.node }),
          volumes: [{ name: 'data', persistentVolumeClaim: { claimName: o.claim } }],
        },
        ...(o.phase === undefined ? {} : { status: { phase: o.phase } }),
      },
    });
  }
  /** A Kubernetes Event about a pod or a claim, as the recorder logs it. */
  kubeEvent(
    tsMs: number,
    involved: { kind: string; name: string },
    e: { reason: string; message: string; component: string; host?: string },
  ): number {
    const time = new Date(tsMs).toISOString();
    return this.add(tsMs, {
      type: 'KubeEventObserved',
      namespace: 'default',
      name: `${involved.name}.${tsMs}`,
      eventType: 'Warning',
      involvedObject: { ...involved, namespace: 'default' },
      ...e,
      lastTimestamp: time,
      observed: { resourceVersion: String(this.events.length + 1), at: time, via: 'watch' },
    });
  }
  /** A CSI PV `pv` bound to claim `claim-<pv>`, and two Ready nodes. */
  cluster(pv: string, accessModes = ['ReadWriteOnce']): void {
    this.add(t0, {
      type: 'EngineStarted',
      plugins: [],
      version: 'test',
      mode: 'recorded',
      recorded: { source: 'api-server', origin: 'https://127.0.0.1:6443' },
    });
    this.object(t0, {
      kind: 'PersistentVolume',
      metadata: { name: pv },
      spec: { accessModes, csi: { driver, volumeHandle: pv } },
      status: { phase: 'Bound' },
    });
    this.object(t0, {
      kind: 'PersistentVolumeClaim',
      metadata: { name: `claim-${pv}`, namespace: 'default' },
      spec: { volumeName: pv, accessModes },
      status: { phase: 'Bound' },
    });
    this.node(t0, 'node-a', { ready: true });
    this.node(t0, 'node-b', { ready: true });
  }
}

/** A pod on node-a with the volume attached and mounted (in use) from 12:01:07. */
export function runningOnNodeA(log: Log, pv: string) {
  const pod = log.pod(at('12:01:00'), 'web-1', { node: 'node-a', claim: `claim-${pv}` });
  log.va(at('12:01:01'), 'csi-a', pv, 'node-a', { attached: false });
  const attached = log.va(at('12:01:07'), 'csi-a', pv, 'node-a', { attached: true });
  const inUse = log.node(at('12:02:10'), 'node-a', { ready: true, inUse: [pv] });
  return { pod, attached, inUse };
}

/**
 * node-a dies with web-1's RWO volume in use; web-1 is evicted and web-2 starts on node-b:
 * Multi-Attach until the forced detach 6 min after the eviction, then node-b's attach.
 */
export function nodeKilled(log: Log) {
  log.cluster('pvc-1');
  const a = runningOnNodeA(log, 'pvc-1');
  const notReady = log.node(at('12:02:40'), 'node-a', { ready: false, inUse: ['pvc-1'] });
  const evicted = log.pod(at('12:02:40'), 'web-1', {
    node: 'node-a',
    claim: 'claim-pvc-1',
    deleting: true,
  });
  const moved = log.pod(at('12:02:41'), 'web-2', { node: 'node-b', claim: 'claim-pvc-1' });
  const forced = log.va(at('12:08:41'), 'csi-a', 'pvc-1', 'node-a', {
    attached: true,
    deleting: true,
  });
  log.removed(at('12:08:45'), 'VolumeAttachment', 'csi-a');
  log.va(at('12:08:46'), 'csi-b', 'pvc-1', 'node-b', { attached: false });
  const attachedB = log.va(at('12:08:50'), 'csi-b', 'pvc-1', 'node-b', { attached: true });
  return { ...a, notReady, evicted, moved, forced, attachedB };
}
