/**
 * The fast lane through the event schemas, for reading and appending (docs/performance.md: replay must
 * reach half of the scan + JSON.parse ceiling, and zod's parse of every event cost a third
 * of it).
 *
 * At load time each zod schema is compiled into a plain predicate, derived from the
 * schema's own definition (never written by hand, as the pair machines' fold tables are)
 * and generated as source text run through the Function constructor, as zod's own JIT
 * does (a tree of closures with keyed loads cost 0.8 µs an event, more than JSON.parse).
 * It answers true only when zod would accept the value and return an equal one (so a value
 * with a key the schema does not name is false: zod would strip it), and only for plain
 * objects, arrays and JSON primitives, whose JSON round trip gives the same value back. A
 * false answer is no verdict: the caller asks zod, which says what is wrong. A schema that
 * uses anything outside the supported subset compiles to undefined, and zod does all the
 * work for it.
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
  readonly keyType?: Schema;
  readonly valueType?: Schema;
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

/** Thrown inside the generator for a construct outside the subset. */
class Unsupported extends Error {}

/**
 * Source text of a JS condition on `value` (a variable name) for a zod number check.
 * Bounds come from the schema definition and are checked to be finite numbers first.
 */
function numberCondition(def: CheckDef, value: string): string {
  switch (def.check) {
    case 'number_format':
      if (def.format === 'safeint') return `Number.isSafeInteger(${value})`;
      throw new Unsupported(`number format ${def.format}`);
    case 'greater_than':
      return `${value} ${def.inclusive === true ? '>=' : '>'} ${bound(def.value)}`;
    case 'less_than':
      return `${value} ${def.inclusive === true ? '<=' : '<'} ${bound(def.value)}`;
    default:
      throw new Unsupported(`number check ${def.check}`);
  }
}

function lengthCondition(def: CheckDef, length: string): string {
  switch (def.check) {
    case 'min_length':
      return `${length} >= ${bound(def.minimum)}`;
    case 'max_length':
      return `${length} <= ${bound(def.maximum)}`;
    default:
      throw new Unsupported(`length check ${def.check}`);
  }
}

function bound(value: unknown): string {
  if (typeof value !== 'number' || !Number.isFinite(value)) throw new Unsupported('bound');
  return String(value);
}

/** A JS literal for a string or finite number (JSON.stringify quotes and escapes). */
function literal(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  throw new Unsupported('literal of another type');
}

/** Generates the statements of predicates, one function per object or array schema. */
class Generator {
  private readonly functions: string[] = [];

  /** A JS condition, true when `value` passes `schema`. */
  condition(schema: Schema, value: string): string {
    const def = schema._zod.def;
    const checks = (def.checks ?? []).map((c) => c._zod.def);
    const and = (parts: string[]) => parts.map((p) => `(${p})`).join(' && ');
    switch (def.type) {
      case 'string':
        // zod counts string length in UTF-16 code units, as .length does.
        return and([
          `typeof ${value} === 'string'`,
          ...checks.map((c) => lengthCondition(c, `${value}.length`)),
        ]);
      case 'number':
        // zod 4 rejects NaN and ±Infinity for every z.number().
        return and([
          `typeof ${value} === 'number'`,
          `Number.isFinite(${value})`,
          ...checks.map((c) => numberCondition(c, value)),
        ]);
      case 'boolean':
        if (checks.length > 0) throw new Unsupported('boolean checks');
        return `typeof ${value} === 'boolean'`;
      case 'literal':
        return (def.values ?? []).map((v) => `${value} === ${literal(v)}`).join(' || ') || 'false';
      case 'enum':
        return (
          Object.values(def.entries ?? {})
            .map((v) => `${value} === ${literal(v)}`)
            .join(' || ') || 'false'
        );
      case 'optional':
        if (def.innerType === undefined) throw new Unsupported('optional without inner type');
        return `${value} === undefined || (${this.condition(def.innerType, value)})`;
      case 'array':
      case 'object':
      case 'record':
        return `${this.function(schema)}(${value})`;
      default:
        throw new Unsupported(`zod type ${def.type}`);
    }
  }

  /** Declares a function for a schema (objects and arrays get their own); returns its name. */
  function(schema: Schema): string {
    const def = schema._zod.def;
    const checks = (def.checks ?? []).map((c) => c._zod.def);
    const name = `check${this.functions.length}`;
    this.functions.push(''); // reserve the slot: nested schemas get later names
    const body: string[] = [];
    if (def.type === 'array') {
      if (def.element === undefined) throw new Unsupported('array without element');
      body.push(
        // Plain arrays only: a subclass may serialize differently.
        'if (!Array.isArray(v) || Object.getPrototypeOf(v) !== Array.prototype) return false;',
        ...checks.map((c) => `if (!(${lengthCondition(c, 'v.length')})) return false;`),
        'for (let i = 0; i < v.length; i++) {',
        '  const item = v[i];',
        `  if (!(${this.condition(def.element, 'item')})) return false;`,
        '}',
        'return true;',
      );
    } else if (def.type === 'record') {
      body.push(...this.recordBody(def, checks));
    } else if (def.type !== 'object') {
      body.push(`return ${this.condition(schema, 'v')};`);
    } else {
      if (def.catchall !== undefined) throw new Unsupported('object with a catchall');
      if (checks.length > 0) throw new Unsupported('object checks');
      const shape = def.shape ?? {};
      body.push(
        // Plain objects only: a class instance may serialize differently (toJSON).
        "if (typeof v !== 'object' || v === null) return false;",
        'if (Object.getPrototypeOf(v) !== Object.prototype) return false;',
        'let named = 0;',
      );
      Object.keys(shape).forEach((key, i) => {
        const field = `f${i}`;
        body.push(
          `const ${field} = v[${JSON.stringify(key)}];`,
          `if (!(${this.condition(shape[key]!, field)})) return false;`,
          `if (${field} !== undefined) named++;`,
        );
      });
      // A key the schema does not name would be stripped by zod (and a named key holding
      // undefined is counted as unknown): no verdict here.
      body.push('let keys = 0;', 'for (const _ in v) keys++;', 'return keys === named;');
    }
    this.functions[Number(name.slice('check'.length))] =
      `function ${name}(v) {\n  ${body.join('\n  ')}\n}`;
    return name;
  }

  /**
   * A record of string keys (z.record(z.string(), V)): a plain object whose every key is
   * kept and every value passes V. `__proto__` is no verdict: zod's copy of the record
   * would set a prototype with it.
   */
  private recordBody(def: Def, checks: readonly CheckDef[]): string[] {
    const key = def.keyType?._zod.def;
    if (key?.type !== 'string' || (key.checks ?? []).length > 0 || checks.length > 0)
      throw new Unsupported('record other than of plain string keys');
    if (def.valueType === undefined) throw new Unsupported('record without a value type');
    return [
      "if (typeof v !== 'object' || v === null) return false;",
      'if (Object.getPrototypeOf(v) !== Object.prototype) return false;',
      'for (const k in v) {',
      "  if (k === '__proto__' || !Object.prototype.hasOwnProperty.call(v, k)) return false;",
      '  const item = v[k];',
      `  if (!(${this.condition(def.valueType, 'item')})) return false;`,
      '}',
      'return true;',
    ];
  }

  /** The predicate for `schema`, compiled once with the Function constructor. */
  build(schema: Schema): FastCheck {
    const top = this.function(schema);
    const source = `'use strict';\n${this.functions.join('\n')}\nreturn ${top};`;
    try {
      return new Function(source)() as FastCheck;
    } catch (error) {
      // Code generation disallowed (node --disallow-code-generation-from-strings): zod alone.
      if (error instanceof EvalError) throw new Unsupported('code generation disallowed');
      throw error;
    }
  }
}

/** The schema's predicate, or undefined when it uses a construct outside the subset. */
export function compileFastCheck(schema: z.ZodType): FastCheck | undefined {
  try {
    return new Generator().build(schema as unknown as Schema);
  } catch (error) {
    if (error instanceof Unsupported) return undefined;
    throw error;
  }
}
