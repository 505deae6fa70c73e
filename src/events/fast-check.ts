/**
 * The read path's fast lane through the event schemas (PERF.md: replay must reach half of
 * the scan + JSON.parse ceiling, and zod's parse of every event cost a third of it).
 *
 * At load time each zod schema is compiled into a plain predicate, derived from the
 * schema's own definition (never written by hand, as the pair machines' fold tables are):
 * true only when zod would accept the value and return an equal one (so a value with a key
 * the schema does not name is false: zod would strip it), and only for plain objects,
 * arrays and JSON primitives, whose JSON round trip gives the same value back. A false answer is no verdict:
 * the caller asks zod, which says what is wrong. A schema that uses anything outside the
 * supported subset compiles to undefined, and zod does all the work for it.
 *
 * test/events/fast-check.unit.test.ts checks, on valid events of every type and on
 * thousands of mutations of them, that true is only ever answered where zod agrees.
 */
import type { z } from 'zod';

export type FastCheck = (value: unknown) => boolean;

/** The parts of zod 4's internal definitions the compiler reads. */
interface Def {
  readonly type: string;
  readonly checks?: readonly { readonly _zod: { readonly def: CheckDef } }[];
  readonly shape?: Record<string, Schema>;
  readonly catchall?: unknown;
  readonly innerType?: Schema;
  readonly element?: Schema;
  readonly values?: readonly unknown[];
  readonly entries?: Record<string, unknown>;
}
interface CheckDef {
  readonly check: string;
  readonly format?: string;
  readonly value?: unknown;
  readonly inclusive?: boolean;
  readonly minimum?: number;
  readonly maximum?: number;
}
interface Schema {
  readonly _zod: { readonly def: Def };
}

/** Thrown inside the compiler for a construct outside the subset. */
class Unsupported extends Error {}

function numberCheck(def: CheckDef): (n: number) => boolean {
  switch (def.check) {
    case 'number_format':
      if (def.format === 'safeint') return (n) => Number.isSafeInteger(n);
      throw new Unsupported(`number format ${def.format}`);
    case 'greater_than': {
      const bound = def.value;
      if (typeof bound !== 'number') throw new Unsupported('non-numeric bound');
      return def.inclusive === true ? (n) => n >= bound : (n) => n > bound;
    }
    case 'less_than': {
      const bound = def.value;
      if (typeof bound !== 'number') throw new Unsupported('non-numeric bound');
      return def.inclusive === true ? (n) => n <= bound : (n) => n < bound;
    }
    default:
      throw new Unsupported(`number check ${def.check}`);
  }
}

function lengthCheck(def: CheckDef): (n: number) => boolean {
  switch (def.check) {
    case 'min_length': {
      const min = def.minimum ?? 0;
      return (n) => n >= min;
    }
    case 'max_length': {
      const max = def.maximum ?? Number.POSITIVE_INFINITY;
      return (n) => n <= max;
    }
    default:
      throw new Unsupported(`length check ${def.check}`);
  }
}

function all<T>(checks: readonly ((x: T) => boolean)[]): (x: T) => boolean {
  if (checks.length === 0) return () => true;
  if (checks.length === 1) return checks[0]!;
  return (x) => {
    for (const check of checks) if (!check(x)) return false;
    return true;
  };
}

function compile(schema: Schema): FastCheck {
  const def = schema._zod.def;
  const checks = (def.checks ?? []).map((c) => c._zod.def);
  switch (def.type) {
    case 'string': {
      // String lengths in zod count UTF-16 code units, as .length does.
      const ok = all(checks.map(lengthCheck));
      return (v) => typeof v === 'string' && ok(v.length);
    }
    case 'number': {
      // zod 4 rejects NaN and ±Infinity for every z.number().
      const ok = all(checks.map(numberCheck));
      return (v) => typeof v === 'number' && Number.isFinite(v) && ok(v);
    }
    case 'boolean':
      if (checks.length > 0) throw new Unsupported('boolean checks');
      return (v) => typeof v === 'boolean';
    case 'literal': {
      const values: readonly unknown[] = def.values ?? [];
      if (!values.every((x) => typeof x === 'string' || typeof x === 'number'))
        throw new Unsupported('literal of another type');
      const allowed = new Set<unknown>(values);
      return (v) => allowed.has(v);
    }
    case 'enum': {
      const values = new Set<unknown>(Object.values(def.entries ?? {}));
      return (v) => (typeof v === 'string' || typeof v === 'number') && values.has(v);
    }
    case 'optional': {
      if (def.innerType === undefined) throw new Unsupported('optional without inner type');
      const inner = compile(def.innerType);
      return (v) => v === undefined || inner(v);
    }
    case 'array': {
      if (def.element === undefined) throw new Unsupported('array without element');
      const element = compile(def.element);
      const ok = all(checks.map(lengthCheck));
      return (v) => {
        if (!Array.isArray(v) || Object.getPrototypeOf(v) !== Array.prototype) return false;
        if (!ok(v.length)) return false;
        for (const item of v) if (!element(item)) return false;
        return true;
      };
    }
    case 'object': {
      if (def.catchall !== undefined) throw new Unsupported('object with a catchall');
      if (checks.length > 0) throw new Unsupported('object checks');
      const shape = def.shape ?? {};
      const keys = Object.keys(shape);
      const fields = keys.map((key) => ({ key, check: compile(shape[key]!) }));
      const known = new Set(keys);
      return (v) => {
        // Plain objects only: a class instance may serialize differently (toJSON).
        if (typeof v !== 'object' || v === null || Object.getPrototypeOf(v) !== Object.prototype)
          return false;
        const record = v as Record<string, unknown>;
        for (const field of fields) if (!field.check(record[field.key])) return false;
        // A key the schema does not name would be stripped by zod: no verdict here.
        for (const key in record) if (!known.has(key)) return false;
        return true;
      };
    }
    default:
      throw new Unsupported(`zod type ${def.type}`);
  }
}

/** The schema's predicate, or undefined when it uses a construct outside the subset. */
export function compileFastCheck(schema: z.ZodType): FastCheck | undefined {
  try {
    return compile(schema as unknown as Schema);
  } catch (error) {
    if (error instanceof Unsupported) return undefined;
    throw error;
  }
}
