/** The operations the planner returns as data and the executor runs (STYLE.md §1). */
import type { OperationKind, OpKey } from '../events/index.js';
import type { NodeName, Seq, UniquePodName, UniqueVolumeName } from '../ids.js';

interface OperationBase {
  readonly volume: UniqueVolumeName;
  readonly key: OpKey;
  /** The seq of the event that led to this decision (DESIGN.md: why did it detach?). */
  readonly cause: Seq;
}

export type VolumeOperation = OperationBase & {
  readonly op: Exclude<OperationKind, 'mount' | 'unmount'>;
  readonly node: NodeName;
};
export type MountOperation = OperationBase & {
  readonly op: 'mount';
  readonly pod: UniquePodName;
  readonly remount: boolean;
};
export type UnmountOperation = OperationBase & {
  readonly op: 'unmount';
  readonly pod: UniquePodName;
};

export type Operation = VolumeOperation | MountOperation | UnmountOperation;

export function operationPod(op: Operation): UniquePodName | null {
  return op.op === 'mount' || op.op === 'unmount' ? op.pod : null;
}

export function describeOperation(op: Operation): string {
  const pod = operationPod(op);
  return pod === null ? `${op.op} ${op.volume}` : `${op.op} ${op.volume} for pod ${pod}`;
}
