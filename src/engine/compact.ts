/**
 * A world read back from a snapshot, rebuilt as compactly as the world that wrote it.
 * V8's deserializer makes a string of its own for every occurrence of a string (a
 * 2,000-pod controller world read back held 8,003 `fake.disk` and 4,001
 * `PersistentVolumeClaim`) and gives every object room for four fields in itself plus a
 * separate property array, even an object of one field (56 bytes and 16 more where a
 * literal takes 32): a controller world read back took 1.75× the heap of the one written.
 *
 * `Compactor` copies what a frame of the snapshot decoded: each string replaced by the
 * first equal one it met (in any frame of the decode), each plain object by an object
 * literal of its exact keys (which holds its fields in itself, exactly as many as it
 * has), arrays, Maps and Sets by copies of their compacted members. An object met twice in one frame is copied once: structured clone kept the
 * sharing of one frame (a spec shared by a pod, its desired and its actual attachment),
 * and the copy keeps it too. Nothing else is shared across frames, as in the snapshot.
 */
/** Keys of an object too many for a literal of its own: such an object is kept as read. */
const literalKeysMax = 64;
/** Literals compiled (one per distinct key list); past it objects of new shapes are kept as read. */
const literalsMax = 1_024;

/** A shape's literal: its fields read from `o`, each compacted by `v`. */
type Literal = (
  o: Record<string, unknown>,
  v: (value: unknown) => unknown,
) => Record<string, unknown>;

/** A node of the key-list tree: the literal of the keys that lead to it (null: none). */
interface Shape {
  literal?: Literal | null;
  readonly next: Map<string, Shape>;
}

export class Compactor {
  /** Every string met, to itself: the copy a frame's equal strings are replaced by. */
  private readonly strings = new Map<string, string>();
  /** The literal of each key list met, by its keys in order (no string built an object). */
  private readonly shapes: Shape = { next: new Map() };
  private compiled = 0;
  /** This frame's objects, to their copies: shared in the frame, shared in the copy. */
  private readonly copies = new Map<object, unknown>();

  /** `value`, as the literals call it. */
  private readonly field = (value: unknown): unknown => this.value(value);

  /** Strings held for sharing (for tests and measurements). */
  get stringCount(): number {
    return this.strings.size;
  }

  /** A new frame: its objects are not the previous frame's (each frame is its own clone). */
  frame(): void {
    this.copies.clear();
  }

  /** The string equal to `s` this decode met first. */
  string(s: string): string {
    const known = this.strings.get(s);
    if (known !== undefined) return known;
    this.strings.set(s, s);
    return s;
  }

  /** `value` with its strings shared and its objects rebuilt compactly (see the top). */
  value<T>(value: T): T {
    if (typeof value === 'string') return this.string(value) as T;
    if (typeof value !== 'object' || value === null) return value;
    const seen = this.copies.get(value);
    if (seen !== undefined) return seen as T;
    const copy = this.copy(value);
    this.copies.set(value, copy);
    return copy as T;
  }

  private copy(value: object): unknown {
    if (Array.isArray(value)) return value.map((item: unknown) => this.value(item));
    if (value instanceof Map) {
      const map = new Map<unknown, unknown>();
      for (const [k, v] of value as Map<unknown, unknown>) map.set(this.value(k), this.value(v));
      return map;
    }
    if (value instanceof Set) {
      const set = new Set<unknown>();
      for (const item of value as Set<unknown>) set.add(this.value(item));
      return set;
    }
    if (Object.getPrototypeOf(value) !== Object.prototype) return value;
    return this.record(value as Record<string, unknown>);
  }

  /** A plain object as its shape's literal, its fields compacted. */
  private record(value: Record<string, unknown>): Record<string, unknown> {
    const keys = Object.keys(value);
    const literal = this.literal(keys);
    if (literal !== undefined) return literal(value, this.field);
    for (const key of keys) value[key] = this.value(value[key]);
    return value;
  }

  /**
   * The literal of `keys`: a function returning `{ "a": v(o["a"]), "b": v(o["b"]) }`, compiled
   * once a key list (each key its own literal site, so V8 sizes the object to its fields;
   * one copying function for every shape goes megamorphic and builds objects as the
   * deserializer does). None for a key `__proto__` (a literal's `__proto__` sets the
   * prototype), too many keys or shapes, or where code generation is disallowed (node
   * --disallow-code-generation-from-strings): the object is kept as read.
   */
  private literal(keys: readonly string[]): Literal | undefined {
    if (keys.length > literalKeysMax) return undefined;
    let shape = this.shapes;
    for (const key of keys) {
      let next = shape.next.get(key);
      if (next === undefined) {
        if (this.compiled >= literalsMax) return undefined;
        shape.next.set(key, (next = { next: new Map() }));
      }
      shape = next;
    }
    if (shape.literal !== undefined) return shape.literal ?? undefined;
    if (this.compiled >= literalsMax) return undefined;
    this.compiled++;
    shape.literal = compile(keys) ?? null;
    return shape.literal ?? undefined;
  }
}

/** The literal function of `keys` (see Compactor.literal), or none. */
function compile(keys: readonly string[]): Literal | undefined {
  if (keys.includes('__proto__')) return undefined;
  const fields = keys.map((k) => `${JSON.stringify(k)}: v(o[${JSON.stringify(k)}])`);
  try {
    return new Function('o', 'v', `'use strict';\nreturn { ${fields.join(', ')} };`) as Literal;
  } catch (error) {
    if (!(error instanceof EvalError)) throw error;
    return undefined;
  }
}
