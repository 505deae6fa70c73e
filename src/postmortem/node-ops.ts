/**
 * The node's own view in a recorded log: the volume operations the kubelets and the
 * kube-controller-manager wrote in their logs (NodeOperationObserved, `vole import
 * --kubelet-log/--controller-log`), as pair transitions for the timeline (`vole history`)
 * and as the operations on one pod's volumes (`vole why POD`). Pure.
 */
import type { EventOf, VoleEvent } from '../events/index.js';

export type NodeOperation = EventOf<'NodeOperationObserved'>;

/** A pair's move as a node's log shows it: history's Transition of an attachment or mount. */
export interface NodeTransition {
  readonly seq: number;
  readonly tsMs: number;
  readonly pair: 'attachment' | 'mount';
  readonly volume: string;
  readonly node: string;
  readonly pod: string | null;
  readonly from: string;
  readonly to: string;
  readonly because: string;
  readonly opId: null;
  readonly error: string | null;
}

/** Operations on one pod's volume (the kubelet's mount pair); the rest are the node's. */
const podLevel = new Set([
  'operationExecutor.MountVolume',
  'MountVolume.SetUp',
  'MapVolume.MapPodDevice',
  'operationExecutor.UnmountVolume',
  'UnmountVolume.TearDown',
  'UnmapVolume.UnmapPodDevice',
]);

function podRef(op: NodeOperation): string | undefined {
  const p = op.pod;
  if (p === undefined) return undefined;
  if (p.namespace !== undefined && p.name !== undefined) return `${p.namespace}/${p.name}`;
  return p.name ?? p.uid;
}

/** One operation in words: who, where, what, the pod, and the line it was read from. */
export function describeNodeOperation(op: NodeOperation): string {
  const pod = podRef(op);
  const spec = op.volumeSpecName === undefined ? '' : ` (${op.volumeSpecName})`;
  const where = op.node === '' ? '' : ` on ${op.node}`;
  return (
    `${op.component}${where}: ${op.operation} ${op.outcome} for ${op.volume}${spec}` +
    `${pod === undefined ? '' : ` pod ${pod}`}${op.error === undefined ? '' : `: ${op.error}`}` +
    ` [${op.logged.file}:${op.logged.line}]`
  );
}

/**
 * The state the node's log shows a pair in after an operation's start or success (a
 * failure goes back to the state before the start: NodeLogView keeps it).
 */
function nextState(op: NodeOperation, mount: boolean, was: string): string {
  const { operation: o, outcome } = op;
  const started = outcome === 'started';
  if (mount) {
    const tearing = /Unmount|Unmap/.test(o);
    if (started) return tearing ? 'unmounting' : 'mounting';
    return tearing ? 'unmounted' : 'mounted';
  }
  if (/AttachVolume|DetachVolume/.test(o)) {
    const detach = /DetachVolume/.test(o);
    if (started) return detach ? 'detaching' : 'attaching';
    return detach ? 'detached' : was.startsWith('attached.') ? was : 'attached';
  }
  if (started) return was;
  if (o === 'VerifyControllerAttachedVolume') return was.startsWith('attached') ? was : 'attached';
  if (o === 'MountVolume.MountDevice') return 'attached.deviceMounted';
  if (o === 'UnmountDevice' || o === 'UnmapDevice') return 'attached.deviceUnmounted';
  return was;
}

/**
 * The pairs as the nodes' logs show them, stepped by each NodeOperationObserved: every
 * operation is a transition of its pair (a failed one names its error, and may leave the
 * state as it was), so the timeline holds what the node did beside what the API showed.
 */
export class NodeLogView {
  private readonly states = new Map<string, string>();
  /** A pair's state before its operation in flight started: where a failure leaves it. */
  private readonly before = new Map<string, string>();

  /** Each pair the logs have shown: its component, kind, volume, node, pod and state now. */
  *pairs(): Generator<{
    component: string;
    pair: 'attachment' | 'mount';
    volume: string;
    node: string;
    pod: string | null;
    state: string;
  }> {
    for (const [key, state] of this.states) {
      const [component = '', mount, volume = '', node = '', pod = ''] = key.split('\0');
      const pair = mount === 'true' ? 'mount' : 'attachment';
      yield { component, pair, volume, node, pod: pair === 'mount' ? pod : null, state };
    }
  }

  step(event: VoleEvent, because: string): NodeTransition | undefined {
    if (event.type !== 'NodeOperationObserved') return undefined;
    const mount = podLevel.has(event.operation);
    const pod = mount ? (event.pod?.uid ?? podRef(event) ?? '') : null;
    // Each component has its own view: the controller's attach is not the kubelet's.
    const key = [event.component, mount, event.volume, event.node, pod ?? ''].join('\0');
    const from = this.states.get(key) ?? (mount ? 'unmounted' : 'detached');
    let to: string;
    if (event.outcome === 'failed') to = this.before.get(key) ?? from;
    else to = nextState(event, mount, from);
    if (event.outcome === 'started') this.before.set(key, from);
    else this.before.delete(key);
    this.states.set(key, to);
    return {
      seq: event.seq,
      tsMs: event.tsMs,
      pair: mount ? 'mount' : 'attachment',
      volume: event.volume,
      node: event.node,
      pod,
      from,
      to,
      because,
      opId: null,
      error: event.error ?? null,
    };
  }
}

/**
 * The node operations on a pod's volumes, up to the end of `events`: those naming the pod
 * (its UID, namespace/name, or name), and the node-level ones (attach, device mounts,
 * detach) of the same volumes on the same nodes.
 */
export function nodeOperationsOfPod(events: Iterable<VoleEvent>, subject: string): NodeOperation[] {
  const uids = new Set<string>([subject]);
  const refs = new Set<string>([subject]);
  const ops: NodeOperation[] = [];
  for (const event of events) {
    if (event.type === 'PodUpserted') {
      const { uid = '', name, namespace = 'default' } = event.pod.metadata;
      if (uid === subject || `${namespace}/${name}` === subject || name === subject) {
        uids.add(uid);
        refs.add(`${namespace}/${name}`);
      }
    } else if (event.type === 'NodeOperationObserved') ops.push(event);
  }
  const names = (op: NodeOperation) =>
    (op.pod?.uid !== undefined && uids.has(op.pod.uid)) ||
    (op.pod?.namespace !== undefined && refs.has(`${op.pod.namespace}/${op.pod.name ?? ''}`));
  const mine = new Set(ops.filter(names).map((op) => `${op.volume}\0${op.node}`));
  return ops.filter(
    (op) => names(op) || (op.pod?.uid === undefined && mine.has(`${op.volume}\0${op.node}`)),
  );
}
