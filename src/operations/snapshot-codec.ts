/**
 * The snapshot codec's port: what a core's snapshot codec is (the Core interface's part,
 * src/engine/core.ts) and the serializer each core's codec is built on. Each core defines
 * its own codec beside its world (src/kubelet/snapshot-codec.ts,
 * src/controller/snapshot-codec.ts: its format number, which fields are written and how,
 * and how a decoded world is checked and made whole again); the bytes are V8's structured
 * clone, which the engine's adapter (src/engine/snapshot.ts) brings in through this port,
 * so the cores' folders stay pure (no node: import, no process, no timer). Types only.
 */
import type { OperationBook } from './types.js';

/** How a core's world is kept in the log's snapshots (a cache: undefined = replay). */
export interface SnapshotCodec<W> {
  readonly format: number;
  encode(world: W): Buffer;
  decode(data: Buffer, format: number): W | undefined;
}

/** Gives the event loop a turn between two slices (a macrotask: timers and I/O run). */
export type YieldTurn = () => Promise<void>;

/** How a sliced encode went: its slices (turns given back between them) and the longest one. */
export interface SliceStats {
  readonly slices: number;
  readonly maxSliceMs: number;
  readonly totalMs: number;
}

/** A codec that can also encode and decode in slices, giving the event loop turns. */
export interface SlicedCodec<W> extends SnapshotCodec<W> {
  encodeSliced(world: W, yieldTurn?: YieldTurn): Promise<{ data: Buffer; stats: SliceStats }>;
  decodeSliced(data: Buffer, format: number, yieldTurn?: YieldTurn): Promise<W | undefined>;
}

/**
 * The large maps of a world, by field, written a slice of entries at a time in this
 * order: `maps` hold immutable records (a Map, or a store read as one: the cluster
 * objects, read back as a Map that `revive` makes a store again), `sets` Sets the fold
 * changes in place (copied when the encode starts); `derived` are not written at all
 * (indexes that `revive` builds again from the records). `companions` names, for a record,
 * the entries of other maps (among `shared`) that hold objects it holds too: they go in the
 * same slice, so structured clone writes those objects once and reads them back shared.
 */
export interface SlicedFields<W> {
  readonly maps: readonly (keyof W & string)[];
  readonly sets: readonly (keyof W & string)[];
  readonly derived: readonly (keyof W & string)[];
  readonly shared: readonly (keyof W & string)[];
  readonly companions: (
    name: keyof W & string,
    value: unknown,
  ) => Iterable<readonly [keyof W & string, unknown]>;
}

/**
 * A decoded world made whole: its shape checked and an empty dirty set given (the dirty
 * set is not written: a loaded world has nothing to plan yet); undefined when the value is
 * not this core's world of this format, and the log is replayed instead.
 */
export type Revive<W extends OperationBook> = (world: Omit<W, 'dirty'>) => W | undefined;

/**
 * The serializer a core's codec is built on (src/engine/snapshot.ts: V8's structured
 * clone). `format` names the shape written: a snapshot of another format, or written by
 * another V8, is not read.
 */
export interface WorldSerializer {
  /** The whole world in one structured clone. */
  whole<W extends OperationBook>(format: number, revive: Revive<W>): SnapshotCodec<W>;
  /** The world's small fields first, then its large maps a slice of entries at a time. */
  sliced<W extends OperationBook>(
    format: number,
    fields: SlicedFields<W>,
    revive: Revive<W>,
  ): SlicedCodec<W>;
}
