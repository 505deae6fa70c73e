/**
 * World snapshots: a core's world at a seq, serialized with V8's structured clone (Maps
 * and Sets natively, far faster to read back than JSON: restart targets 200 ms on a
 * 1,000,000-event log). A snapshot is a cache: one written by another V8 version, of
 * another format (another core's), or that does not decode, is ignored and the log
 * replayed instead. The dirty set is not kept: a loaded world has nothing to plan yet.
 *
 * The controller's world (286 MiB of snapshot at 150,000 pods, 2.5 s to encode in one
 * call) is written in slices instead (`slicedCloneCodec`): one V8 serializer, fed the
 * world's small fields first and then its large maps a slice of entries at a time, so an
 * encode can give the event loop a turn between slices (a leader's lease keepalives run
 * there) and a decode can too. One serializer for the whole stream keeps structured
 * clone's object identity (a spec shared by a pod, its desired and its actual attachment
 * is written once and read back shared). The world goes on changing between slices: the
 * encode fixes what it writes when it starts — the large maps' entries (their records
 * are immutable, replaced rather than changed) and copies of the Sets that the fold
 * changes in place — so the snapshot is the world at the seq it started at.
 */
import { deserialize, serialize } from 'node:v8';
import { assert } from '../assert.js';
import { ClusterObjects } from '../desired/objects.js';
import type {
  Revive,
  SlicedCodec,
  SlicedFields,
  SliceStats,
  SnapshotCodec,
  WorldSerializer,
  YieldTurn,
} from '../operations/snapshot-codec.js';
import type { OperationBook } from '../operations/types.js';
import { Compactor } from './compact.js';

interface Envelope<W> {
  readonly v8: string;
  readonly world: Omit<W, 'dirty'>;
}

/**
 * A structured-clone codec for one core's world. `format` names the shape written (a
 * snapshot of another format is not read: the log is replayed instead); `revive` checks
 * the decoded value's shape and gives it an empty dirty set (undefined: not this core's
 * world).
 */
export function structuredCloneCodec<W extends OperationBook>(
  format: number,
  revive: Revive<W>,
): SnapshotCodec<W> {
  return {
    format,
    encode(world: W): Buffer {
      const { dirty: _dirty, ...rest } = world;
      const envelope: Envelope<W> = { v8: process.versions.v8, world: rest };
      return serialize(envelope);
    },
    decode(data: Buffer, given: number): W | undefined {
      if (given !== format) return undefined;
      try {
        const envelope: Envelope<W> = deserialize(data);
        if (envelope.v8 !== process.versions.v8) return undefined;
        return revive(envelope.world);
      } catch {
        return undefined;
      }
    },
  };
}

const nextTurn: YieldTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Entries per slice: a fixed count (not a time budget), so a simulated run stays one run byte for byte. */
export const sliceEntries = 500;
/** Bytes copied per slice when the frames are joined into one buffer. */
const joinBytes = 2 * 2 ** 20;

interface Head<W> {
  readonly v8: string;
  readonly world: Partial<W>;
  readonly maps: readonly string[];
}

/** One slice: entries of one or more maps, as parallel key and value lists. */
type Slice = Record<string, [unknown[], unknown[]]>;

type Step = 'slice' | 'done';

/** A map's entries as they are now: two flat arrays (no pair allocated per entry). */
interface Entries {
  readonly name: string;
  readonly keys: readonly unknown[];
  readonly values: readonly unknown[];
}

interface Fixed<W> {
  readonly head: Head<W>;
  readonly entries: readonly Entries[];
  /** The shared maps as they were, for companions' lookups. */
  readonly shared: ReadonlyMap<string, ReadonlyMap<unknown, unknown>>;
}

/**
 * What the encode fixes when it starts: the small fields whole, the large maps' keys and
 * values (records are replaced, never changed: pointers suffice), copies of the Sets.
 */
function fixWorld<W extends OperationBook>(world: W, fields: SlicedFields<W>): Fixed<W> {
  const { dirty: _dirty, ...rest } = world;
  const small: Record<string, unknown> = { ...rest };
  for (const name of fields.derived) delete small[name];
  const names = [...fields.maps, ...fields.sets];
  const shared = new Map<string, ReadonlyMap<unknown, unknown>>();
  const entries = names.map((name): Entries => {
    const map = world[name];
    assert(
      map instanceof Map || map instanceof ClusterObjects,
      () => `snapshot: world.${name} is not a Map`,
    );
    delete small[name];
    const keys = [...(map as ReadonlyMap<unknown, unknown>).keys()];
    const values = [...(map as ReadonlyMap<unknown, unknown>).values()];
    if (fields.sets.includes(name))
      for (let i = 0; i < values.length; i++) values[i] = new Set(values[i] as Set<unknown>);
    if (fields.shared.includes(name)) shared.set(name, new Map(map as Map<unknown, unknown>));
    return { name, keys, values };
  });
  const head = { v8: process.versions.v8, world: small as Partial<W>, maps: names };
  return { head, entries, shared };
}

/** One slice of `list` from `from`, with the companions of its records not written yet. */
function slice<W extends OperationBook>(
  fixed: Fixed<W>,
  fields: SlicedFields<W>,
  list: Entries,
  from: number,
  written: ReadonlyMap<string, Set<unknown>>,
): Slice {
  const out: Slice = {};
  const add = (name: string, key: unknown, value: unknown) => {
    const lists = (out[name] ??= [[], []]);
    lists[0].push(key);
    lists[1].push(value);
  };
  const own = written.get(list.name);
  for (let i = from; i < Math.min(list.keys.length, from + sliceEntries); i++) {
    const key = list.keys[i];
    if (own?.has(key) === true) continue; // written beside a record that shares with it
    add(list.name, key, list.values[i]);
    for (const [name, companion] of fields.companions(
      list.name as keyof W & string,
      list.values[i],
    )) {
      const value = fixed.shared.get(name)?.get(companion);
      const seen = written.get(name);
      if (value === undefined || seen === undefined || seen.has(companion)) continue;
      seen.add(companion);
      add(name, companion, value);
    }
  }
  return out;
}

/** Joins the frames into one buffer, each after its length, `joinBytes` a slice. */
function* join(frames: readonly Buffer[], out: { data?: Buffer }): Generator<Step> {
  const data = Buffer.allocUnsafe(frames.reduce((sum, f) => sum + 4 + f.length, 0));
  let offset = 0;
  let sinceTurn = 0;
  for (const f of frames) {
    if (sinceTurn >= joinBytes) {
      sinceTurn = 0;
      yield 'slice';
    }
    data.writeUInt32LE(f.length, offset);
    f.copy(data, offset + 4);
    offset += 4 + f.length;
    sinceTurn += f.length;
  }
  out.data = data;
}

/**
 * The encode, a slice per step: the first fixes the world (fixWorld) and writes its small
 * fields; each next one up to `sliceEntries` records (and their companions); then the
 * frames are joined. Each frame is its own structured clone, length first.
 */
function* writeSlices<W extends OperationBook>(
  world: W,
  fields: SlicedFields<W>,
  out: { data?: Buffer },
): Generator<Step> {
  const fixed = fixWorld(world, fields);
  const frames = [serialize(fixed.head)];
  const written = new Map(fields.shared.map((name) => [name as string, new Set<unknown>()]));
  for (const list of fixed.entries)
    for (let from = 0; from < list.keys.length; from += sliceEntries) {
      yield 'slice';
      frames.push(serialize(slice(fixed, fields, list, from, written)));
    }
  yield 'slice';
  yield* join(frames, out);
  return 'done';
}

function* readSlices<W>(data: Buffer): Generator<Step, Partial<W> | undefined> {
  let offset = 0;
  const next = (): unknown => {
    const length = data.readUInt32LE(offset);
    const body = data.subarray(offset + 4, offset + 4 + length);
    assert(body.length === length, 'snapshot: a frame cut short');
    offset += 4 + length;
    return deserialize(body);
  };
  const head = next() as Head<W>;
  if (head.v8 !== process.versions.v8) return undefined;
  const compactor = new Compactor();
  const world: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(head.world)) world[name] = compactor.value(value);
  const maps = new Map(head.maps.map((name) => [name, new Map<unknown, unknown>()]));
  for (const [name, map] of maps) world[name] = map;
  while (offset < data.length) {
    yield 'slice';
    compactor.frame();
    for (const [name, [keys, values]] of Object.entries(next() as Slice)) {
      const map = maps.get(name);
      assert(map !== undefined && keys.length === values.length, 'snapshot: a slice of no map');
      for (let i = 0; i < keys.length; i++)
        map.set(compactor.value(keys[i]), compactor.value(values[i]));
    }
  }
  return world as Partial<W>;
}

/** Runs a slice generator to its end, timing each slice and giving a turn between two. */
async function drive<R>(
  steps: Generator<Step, R>,
  yieldTurn: YieldTurn,
): Promise<{ result: R; stats: SliceStats }> {
  const started = performance.now();
  let slices = 0;
  let maxSliceMs = 0;
  for (;;) {
    const sliceStarted = performance.now();
    const step = steps.next();
    maxSliceMs = Math.max(maxSliceMs, performance.now() - sliceStarted);
    slices++;
    if (step.done === true) {
      const totalMs = performance.now() - started;
      return { result: step.value, stats: { slices, maxSliceMs, totalMs } };
    }
    await yieldTurn();
  }
}

function driveSync<R>(steps: Generator<Step, R>): R {
  for (;;) {
    const step = steps.next();
    if (step.done === true) return step.value;
  }
}

/**
 * A structured-clone codec written in slices (see the top of this file): the same bytes
 * whether encoded in one call or in slices. `fields` names the world's large maps; a
 * snapshot of another format is not read (undefined: the log is replayed instead).
 */
export function slicedCloneCodec<W extends OperationBook>(
  format: number,
  fields: SlicedFields<W>,
  revive: Revive<W>,
): SlicedCodec<W> {
  const reviveRead = (world: Partial<W> | undefined): W | undefined => {
    if (world === undefined) return undefined;
    for (const name of [...fields.maps, ...fields.sets])
      if (!(world[name] instanceof Map)) return undefined;
    return revive(world as Omit<W, 'dirty'>);
  };
  return {
    format,
    encode(world: W): Buffer {
      const out: { data?: Buffer } = {};
      driveSync(writeSlices(world, fields, out));
      return out.data!;
    },
    async encodeSliced(world: W, yieldTurn: YieldTurn = nextTurn) {
      const out: { data?: Buffer } = {};
      // The world is fixed in the first slice, before any turn is given back.
      const { stats } = await drive(writeSlices(world, fields, out), yieldTurn);
      return { data: out.data!, stats };
    },
    decode(data: Buffer, given: number): W | undefined {
      if (given !== format) return undefined;
      try {
        return reviveRead(driveSync(readSlices<W>(data)));
      } catch {
        return undefined;
      }
    },
    async decodeSliced(data: Buffer, given: number, yieldTurn: YieldTurn = nextTurn) {
      if (given !== format) return undefined;
      try {
        return reviveRead((await drive(readSlices<W>(data), yieldTurn)).result);
      } catch {
        return undefined;
      }
    },
  };
}

/**
 * The serializer port's adapter (src/operations/snapshot-codec.ts): each core builds its
 * codec on it (src/kubelet/snapshot-codec.ts, src/controller/snapshot-codec.ts), and the
 * engine hands it to them (src/engine/cores.ts).
 */
export const v8Serializer: WorldSerializer = {
  whole: structuredCloneCodec,
  sliced: slicedCloneCodec,
};
