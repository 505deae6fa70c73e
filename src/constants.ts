/**
 * Every tunable number of the engine, once, with the reason for its value.
 * Relations between them are checked when this module loads.
 */
import { assert } from './assert.js';

/** behaviour K5.5 initialDurationBeforeRetry: first retry half a second after a failure. */
export const backoffMsInitial = 500;
/** behaviour K5.5 maxDurationBeforeRetry: 2 min 2 s, the kubelet's cap on exponential backoff. */
export const backoffMsMax = 2 * 60_000 + 2_000;
/** behaviour K5.5: the wait doubles after each consecutive failure. */
export const backoffFactor = 2;

/** behaviour K2.5 podAttachAndMountTimeout: how long WaitForAttachAndMount waits by default. */
export const podAttachAndMountTimeoutMs = 2 * 60_000 + 3_000;
/** behaviour K2.5 podAttachAndMountRetryInterval: the poll period of WaitForAttachAndMount. */
export const podAttachAndMountRetryIntervalMs = 300;
/** behaviour K3.1 waitForAttachTimeout: passed to plugins' WaitForAttach and bounds that call. */
export const waitForAttachTimeoutMs = 10 * 60_000;
/**
 * Upper bound of one plugin call (other than waitForAttach). A call that has not answered
 * by then is recorded as an uncertain failure: it may still take effect in the background.
 * Two minutes is the CSI sidecars' default timeout order of magnitude.
 */
export const callTimeoutMsDefault = 2 * 60_000;

/**
 * The deadline of one CSI RPC. The kubelet gives node calls two minutes; vole's is a little
 * shorter than its own call timeout, so a driver that does not answer shows as the gRPC
 * DEADLINE_EXCEEDED it is (uncertain), recorded with its RPC, not as a bare timeout.
 */
export const csiRpcDeadlineMs = 110_000;

/** Limits (docs/style.md rule 7): each one is asserted or applies backpressure when hit. */
/** Operations the executor runs at once; further planned ones wait for the next tick. */
export const operationsInFlightMax = 4096;
/** Events one group-commit transaction writes at most; a larger buffer is split. */
export const appendBatchEventsMax = 4096;
/** Volumes one planner tick looks at (a few operations each at most); the rest wait a tick. */
export const planOperationsMax = 1024;
/**
 * Distinct volume traits kept for sharing (src/operations/volume-traits.ts): a few per
 * plugin and PV shape in practice, more where sizes vary by volume. Past it the table
 * starts again: specs keep the traits they hold, equal new ones are made again.
 */
export const volumeTraitsMax = 4096;
/**
 * Distinct small values the controller keeps shared (src/controller/shared-values.ts: a
 * claim's status, a pod's volume of no claim); past it the table starts again.
 */
export const sharedValuesMax = 4096;
/** The longest JSON of a value kept shared: longer ones are rarely equal. */
export const sharedValueJsonCharsMax = 512;
/**
 * A snapshot is written after this many events since the last one. A restart folds at
 * most this many events after loading it, in a fresh process before the JIT has warmed up:
 * 90–190 ms for 10,000 on the benchmark machine, 120–230 ms to the first plan in all (it
 * measured 634 ms at 50,000 behind). Every snapshot is kept (time travel), so a shorter
 * interval costs snapshot storage: 3.4 MB each for a 1,000-pod world.
 */
export const snapshotEveryEvents = 10_000;

/** The log file's schema version (PRAGMA user_version); see src/log/schema.ts. */
export const logSchemaVersion = 3;
/** Marks an SQLite file as a vole log (PRAGMA application_id; 'VOLE' in ASCII). */
export const logApplicationId = 0x564f4c45;

/** Kubernetes mode: one API request's timeout (client-go's default for a kubelet is 10 s). */
export const kubeRequestTimeoutMs = 10_000;
/**
 * Kubernetes mode: the wait before an informer that stopped on an error lists and watches
 * again (client-go's reflector backs off from 800 ms; one fixed step keeps it simple).
 */
export const kubeInformerRetryMs = 1_000;
/**
 * Kubernetes mode: a claim, volume or VolumeAttachment the node may only get by name is
 * got again after 1 s while missing or not settled (not Bound, not attached), after 30 s
 * once settled (src/kube/named-gets.ts).
 */
export const kubeNamedGetPendingMs = 1_000;
export const kubeNamedGetSettledMs = 30_000;
/** Kubernetes mode: the wait before a failed status patch, CSINode write or Event is retried. */
export const kubeWriteRetryMs = 500;
/** Kubernetes mode: the node Lease's duration, the kubelet's --node-lease-duration-seconds. */
export const nodeLeaseDurationSeconds = 40;
/** The node Lease is renewed every quarter of its duration, as the kubelet renews it. */
export const nodeLeaseRenewMs = (nodeLeaseDurationSeconds * 1000) / 4;
/** The Ready condition is posted again this often, the kubelet's nodeStatusReportFrequency. */
export const nodeStatusReportMs = 5 * 60_000;
/**
 * The pods the Node says it holds (status.capacity and allocatable `pods`): the kubelet's
 * default maxPods, so a scheduler places pods on a vole node as on a kubelet's.
 */
export const nodePodsMax = 110;

assert(backoffMsInitial < backoffMsMax, 'backoffMsInitial must be below backoffMsMax');
assert(backoffFactor > 1, 'backoff must grow');
assert(
  podAttachAndMountRetryIntervalMs < podAttachAndMountTimeoutMs,
  'the retry interval must be shorter than the timeout',
);
assert(csiRpcDeadlineMs < callTimeoutMsDefault, 'a CSI deadline must end before the call timeout');
assert(planOperationsMax <= operationsInFlightMax, 'a tick must not plan more than can run');

/**
 * How long a statement waits for another connection's lock before failing with SQLITE_BUSY
 * (better-sqlite3's `timeout`). Five seconds rides out another process's commit or a WAL
 * checkpoint, and still reports a stuck lock while someone is watching.
 */
export const logBusyTimeoutMsDefault = 5_000;
