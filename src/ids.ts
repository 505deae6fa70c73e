/**
 * Branded identifiers, so a pod UID is never passed where a volume name is expected.
 * The brands exist only in the type system; at run time they are plain strings/numbers.
 */
declare const brand: unique symbol;
type Brand<T, B extends string> = T & { readonly [brand]: B };

/** `<pluginName>/<volume name>` (behaviour K1.1), e.g. `fake.disk/disk-1`. */
export type UniqueVolumeName = Brand<string, 'UniqueVolumeName'>;
/** The pod UID (behaviour K0.4: UniquePodName = pod.UID). */
export type UniquePodName = Brand<string, 'UniquePodName'>;
export type NodeName = Brand<string, 'NodeName'>;
/** Operation id: `op-<seq of its OperationStarted event>`, unique within one log. */
export type OpId = Brand<string, 'OpId'>;
/** Position of an event in the log, starting at 1. */
export type Seq = Brand<number, 'Seq'>;

export const UniqueVolumeName = (s: string): UniqueVolumeName => s as UniqueVolumeName;
export const UniquePodName = (s: string): UniquePodName => s as UniquePodName;
export const NodeName = (s: string): NodeName => s as NodeName;
export const OpId = (s: string): OpId => s as OpId;
export const Seq = (n: number): Seq => n as Seq;
