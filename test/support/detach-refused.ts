/**
 * A detach refused as in use (S3, verifySafeToDetach): a controller attaches a pod's
 * volume, the pod is removed while the log is held (a full disk; an etcd commit in cluster
 * mode), and the node reports the volume in use again before the log lets go, so the
 * detach decided on the old report fails without a call.
 */
import assert from 'node:assert/strict';
import { ControllerManager } from '../../src/agent/controller-manager.js';
import type { NodeInUseCheck } from '../../src/execute/controller-executor.js';
import { VirtualClock } from '../../src/clock.js';
import { managedAnnotation } from '../../src/controller/index.js';
import { MemorySink } from '../../src/engine/sink.js';
import type { Node, Pod } from '../../src/events/k8s.js';
import { FakePlugin, type FakeCallRecord } from '../../src/plugins/fake.js';
import { caps } from '../../src/plugins/types.js';

/** A log whose commits can be held back, as a full disk or a slow etcd does. */
export class HeldSink extends MemorySink {
  private release: (() => void) | null = null;
  private held: Promise<void> | null = null;

  hold(): void {
    this.held = new Promise((resolve) => (this.release = resolve));
  }

  letGo(): void {
    this.release?.();
    this.held = null;
  }

  whenDurable(): Promise<void> | undefined {
    return this.held ?? undefined;
  }
}

const node = (volumesInUse: string[]): Node => ({
  apiVersion: 'v1',
  kind: 'Node',
  metadata: { name: 'node-1', annotations: { [managedAnnotation]: 'true' } },
  status: { conditions: [{ type: 'Ready', status: 'True' }], volumesInUse },
});
export const pod: Pod = {
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name: 'a', namespace: 'default', uid: 'uid-a' },
  spec: {
    nodeName: 'node-1',
    volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'claim-1' } }],
  },
};

export const settle = async () => {
  for (let i = 0; i < 50; i++) await new Promise<void>((resolve) => setImmediate(resolve));
};

/**
 * A pod's volume attached, the pod removed while the log is held, the node reporting the
 * volume in use again before the log lets go: the detach, decided on the old report, ends.
 */
export async function detachRefusedAsInUse(
  opts: {
    /** Called once the manager started: what else should watch it from the start. */
    readonly started?: (
      cm: ControllerManager,
      sink: HeldSink,
      clock: VirtualClock,
    ) => Promise<void>;
    /** The fresh read of the node's volumesInUse the detach makes (a mode's). */
    readonly nodeInUseCheck?: NodeInUseCheck;
    /**
     * false: the node's report naming the volume again never reaches the world (its write
     * landed where the node writes it, and the controller's watch has not brought it yet).
     */
    readonly worldHearsInUse?: false;
  } = {},
) {
  const clock = new VirtualClock(0);
  const journal: FakeCallRecord[] = [];
  const sink = new HeldSink();
  const cm = ControllerManager.create({
    plugins: [new FakePlugin({ caps: caps('fake.disk', { attachable: true }), clock, journal })],
    log: { sink, history: [] },
    clock,
    verifyAttachments: false,
    ...(opts.nodeInUseCheck === undefined ? {} : { nodeInUseCheck: opts.nodeInUseCheck }),
  });
  cm.start();
  await opts.started?.(cm, sink, clock);
  cm.inputs.upsertObject(node([]));
  cm.inputs.upsertObject({
    apiVersion: 'v1',
    kind: 'PersistentVolume',
    metadata: { name: 'pv-1' },
    spec: { accessModes: ['ReadWriteOnce'], csi: { driver: 'fake.disk', volumeHandle: 'disk-1' } },
  });
  cm.inputs.upsertObject({
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: { name: 'claim-1', namespace: 'default' },
    spec: { volumeName: 'pv-1' },
    status: { phase: 'Bound' },
  });
  cm.inputs.addPod(pod);
  await settle();
  cm.inputs.upsertObject(node([])); // the node's status after the attach: not mounted yet
  await settle();
  assert.deepEqual(
    journal.map((c) => c.call),
    ['attach'],
  );

  sink.hold();
  cm.inputs.removePod('uid-a');
  await settle();
  const started = sink.events.flatMap((e) =>
    e.type === 'OperationStarted' && e.op === 'detach' ? [e] : [],
  );
  assert.equal(started.length, 1, 'the detach was decided while the node reported nothing in use');
  // The node reports it in use again.
  if (opts.worldHearsInUse !== false) cm.inputs.upsertObject(node(['fake.disk/disk-1']));
  sink.letGo();
  await settle();
  return { cm, journal, sink, started, clock };
}
