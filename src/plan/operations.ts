/** The operations the planner returns as data and the executor runs (STYLE.md §1). */
import type { Decision, OperationKind, OperationStep, OpKey } from '../events/index.js';
import type { NodeName, Seq, UniquePodName, UniqueVolumeName } from '../ids.js';

interface OperationBase {
  readonly volume: UniqueVolumeName;
  readonly key: OpKey;
  /** The seq of the event that led to this decision (DESIGN.md: why did it detach?). */
  readonly cause: Seq;
}

export type VolumeOperation = OperationBase & {
  readonly op: Exclude<OperationKind, 'mount' | 'unmount' | 'unmountDevice'>;
  readonly node: NodeName;
  /** verifyControllerAttached: the devicePath node.status.volumesAttached lists. */
  readonly devicePath?: string;
  /** expand: the sizes and paths the expansion acts on, as the world had them. */
  readonly expansion?: Expansion;
  /** attach: the planner's refusal to call the plugin, and why (max_volumes_per_node). */
  readonly refused?: string;
};

export interface Expansion {
  readonly oldSizeBytes: number;
  readonly newSizeBytes: number;
  readonly devicePath: string;
  readonly deviceMountPath: string;
}

/** spec §4.7 / §4.10: the calls of a mount (or a Block volume's map), and their inputs. */
export type MountStep = Extract<
  OperationStep,
  'waitForAttach' | 'mountDevice' | 'setUp' | 'expand' | 'setUpDevice' | 'map'
>;

export type MountOperation = OperationBase & {
  readonly op: 'mount';
  readonly pod: UniquePodName;
  readonly remount: boolean;
  /** In order; empty when the mount is refused (see `refusal`). */
  readonly steps: readonly MountStep[];
  /** The devicePath the attachment has (WaitForAttach's input, else the one used). */
  readonly devicePath: string;
  /** The device's global mount path when it is already mounted (no mountDevice step). */
  readonly deviceMountPath: string;
  readonly fsGroup: number | null;
  /** The expand step's sizes (spec §4.7 step 12). */
  readonly expansion?: { readonly oldSizeBytes: number; readonly newSizeBytes: number };
  /** Why the mount fails before any call (a ReadWriteOncePod volume in use elsewhere). */
  readonly refusal?: string;
};

export type UnmountOperation = OperationBase & {
  readonly op: 'unmount';
  readonly pod: UniquePodName;
  readonly steps: readonly ['tearDown'] | readonly ['unmap'];
};

export type UnmountDeviceOperation = OperationBase & {
  readonly op: 'unmountDevice';
  readonly node: NodeName;
  readonly steps: readonly ['unmountDevice'] | readonly ['tearDownDevice'];
};

export type Operation = VolumeOperation | MountOperation | UnmountOperation | UnmountDeviceOperation;

export function operationPod(op: Operation): UniquePodName | null {
  return op.op === 'mount' || op.op === 'unmount' ? op.pod : null;
}

export function describeOperation(op: Operation): string {
  const pod = operationPod(op);
  const steps = 'steps' in op ? ` [${op.steps.join(' ')}]` : '';
  return pod === null
    ? `${op.op} ${op.volume}${steps}`
    : `${op.op} ${op.volume} for pod ${pod}${steps}`;
}

/** What OperationStarted records of a kubelet operation. */
export function kubeletDecision(op: Operation): Decision {
  const pod = operationPod(op);
  return {
    op: op.op,
    key: op.key,
    volume: op.volume,
    ...(pod === null ? {} : { pod }),
    ...('node' in op ? { node: op.node } : {}),
    ...(op.op === 'mount' ? { remount: op.remount } : {}),
    ...('steps' in op ? { steps: [...op.steps] } : {}),
    ...('refused' in op && op.refused !== undefined ? { refused: op.refused } : {}),
    cause: op.cause,
  };
}
