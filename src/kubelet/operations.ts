/** The operations the planner returns as data and the executor runs (docs/style.md rule 1). */
import type {
  Decision,
  OperationKind,
  OperationStep,
  OpKey,
  ProvisionRequest,
} from '../events/index.js';
import type { NodeName, Seq, UniquePodName, UniqueVolumeName } from '../ids.js';

interface OperationBase {
  readonly volume: UniqueVolumeName;
  readonly key: OpKey;
  /** The seq of the event that led to this decision (docs/design.md: why did it detach?). */
  readonly cause: Seq;
}

/** The provisioner's and the resizer's operations (src/kubelet/plan-provision.ts). */
export type StorageOperation = OperationBase &
  (
    | {
        readonly op: 'provision';
        readonly provision: ProvisionRequest;
        /** Why provisioning fails before CreateVolume (a reserved parameter key). */
        readonly refused?: string;
      }
    | { readonly op: 'deleteVolume'; readonly pv: string }
    | { readonly op: 'controllerExpand'; readonly pv: string; readonly sizeBytes: number }
  );

export type StorageOperationKind = StorageOperation['op'];

export type VolumeOperation = OperationBase & {
  readonly op: Exclude<OperationKind, 'mount' | 'unmount' | 'unmountDevice' | StorageOperationKind>;
  readonly node: NodeName;
  /** verifyControllerAttached: the devicePath node.status.volumesAttached lists. */
  readonly devicePath?: string;
  /** expand: the sizes and paths the expansion acts on, as the world had them. */
  readonly expansion?: Expansion;
  /** attach: the planner's refusal to call the plugin, and why (max_volumes_per_node). */
  readonly refused?: string;
  /** attach: the pods whose mounts it intends (OperationStarted's mountsIntended). */
  readonly mountsIntended?: readonly UniquePodName[];
};

export interface Expansion {
  readonly oldSizeBytes: number;
  readonly newSizeBytes: number;
  readonly devicePath: string;
  readonly deviceMountPath: string;
}

/** behaviour K4.7 / K4.10: the calls of a mount (or a Block volume's map), and their inputs. */
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
  /** The owner of service-account token files (FsUserFrom): the pod's one runAsUser. */
  readonly fsUser: number | null;
  /** The expand step's sizes (behaviour K4.7 step 12). */
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

export type Operation =
  VolumeOperation | MountOperation | UnmountOperation | UnmountDeviceOperation | StorageOperation;

export function operationPod(op: Operation): UniquePodName | null {
  return op.op === 'mount' || op.op === 'unmount' ? op.pod : null;
}

export function describeOperation(op: Operation): string {
  const pod = operationPod(op);
  const steps = 'steps' in op ? ` [${op.steps.join(' ')}]` : '';
  if (op.op === 'provision') return `provision ${op.volume} for claim ${claimOf(op.provision)}`;
  if (op.op === 'deleteVolume') return `deleteVolume ${op.volume} (PersistentVolume ${op.pv})`;
  if (op.op === 'controllerExpand')
    return `controllerExpand ${op.volume} to ${op.sizeBytes} bytes (PersistentVolume ${op.pv})`;
  return pod === null
    ? `${op.op} ${op.volume}${steps}`
    : `${op.op} ${op.volume} for pod ${pod}${steps}`;
}

function claimOf(request: ProvisionRequest): string {
  return `${request.claim.namespace}/${request.claim.name}`;
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
    ...('mountsIntended' in op && op.mountsIntended !== undefined
      ? { mountsIntended: [...op.mountsIntended] }
      : {}),
    ...(op.op === 'provision' ? { provision: op.provision } : {}),
    ...('pv' in op ? { pv: op.pv } : {}),
    ...(op.op === 'controllerExpand' ? { sizeBytes: op.sizeBytes } : {}),
    cause: op.cause,
  };
}
