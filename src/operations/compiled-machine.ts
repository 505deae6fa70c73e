/**
 * The fold's fast path through the pair machines (docs/performance.md: xstate's `transition()` costs
 * ~34 µs per event, 18× a hand reducer). At load time each machine definition is compiled
 * into a table (atomic state, event type) → candidate transitions, in xstate's priority
 * order (the state's own transitions first, then its ancestors'), whose guards and assign
 * actions are the machine's own implementations. The table is therefore derived from the
 * definition, never written by hand; test/machines/*.unit.test.ts walks every path of every
 * machine through both this and xstate's `transition()` and demands identical states.
 *
 * Supported subset (asserted at compile time): named guards, named `assign` actions,
 * single targets, no entry/exit actions, no `always`, no delayed transitions.
 */
import type { AnyStateMachine, AnyStateNode, StateValue } from 'xstate';
import { assert, fail } from '../assert.js';

/** A pair's machine state: `value` is the dotted path of its atomic state. */
export interface PairState<C> {
  readonly value: string;
  readonly context: C;
}

type Assignment = (args: { context: unknown; event: unknown }, params: unknown) => unknown;
type GuardFn = (args: { context: unknown; event: unknown }, params: unknown) => boolean;

interface Candidate {
  readonly guard: GuardFn | undefined;
  readonly assignments: readonly Assignment[];
  /** Atomic target path, or undefined for a targetless (context-only) transition. */
  readonly target: string | undefined;
}

export interface CompiledMachine<C, E extends { type: string }> {
  readonly id: string;
  readonly initial: PairState<C>;
  /** All atomic state paths, e.g. `attached.deviceMounted`. */
  readonly atomicStates: readonly string[];
  /**
   * The next state, or undefined when the state does not accept the event (no candidate
   * transition, or every guard false) — the same answer as `snapshot.can(event)` false.
   */
  transition(state: PairState<C>, event: E): PairState<C> | undefined;
}

function atomicPath(node: AnyStateNode): string {
  let current = node;
  while (current.type === 'compound') {
    const initialTargets = current.initial.target;
    assert(initialTargets.length === 1, () => `${current.id}: exactly one initial child expected`);
    current = initialTargets[0]!;
  }
  assert(
    current.type === 'atomic',
    () => `${current.id}: only atomic and compound states supported`,
  );
  return current.path.join('.');
}

function resolveGuard(machine: AnyStateMachine, guard: unknown, where: string) {
  if (guard === undefined) return undefined;
  assert(typeof guard === 'string', () => `${where}: only named guards are supported`);
  const fn = (machine.implementations.guards as Record<string, unknown>)[guard];
  assert(typeof fn === 'function', () => `${where}: guard ${guard} has no implementation`);
  return fn as GuardFn;
}

function resolveAssignment(machine: AnyStateMachine, action: unknown, where: string): Assignment {
  assert(typeof action === 'string', () => `${where}: only named actions are supported`);
  const impl = (machine.implementations.actions as Record<string, { assignment?: unknown }>)[
    action
  ];
  assert(
    impl !== undefined && impl.assignment !== undefined,
    () => `${where}: ${action} must be assign`,
  );
  const assignment = impl.assignment;
  if (typeof assignment === 'function') return assignment as Assignment;
  // An object assignment: each key is a value or a function of { context, event }.
  const entries = Object.entries(assignment as Record<string, unknown>);
  if (entries.every(([, value]) => typeof value !== 'function')) {
    // Constants only (most of them): one frozen partial, merged without a copy per step.
    const constant = Object.freeze(Object.fromEntries(entries));
    return () => constant;
  }
  return (args, params) => {
    const partial: Record<string, unknown> = {};
    for (const [key, value] of entries) {
      partial[key] = typeof value === 'function' ? (value as Assignment)(args, params) : value;
    }
    return partial;
  };
}

function collectNodes(node: AnyStateNode, out: AnyStateNode[]): AnyStateNode[] {
  out.push(node);
  for (const child of Object.values(node.states)) collectNodes(child, out);
  return out;
}

function compileCandidates(machine: AnyStateMachine, atomic: AnyStateNode) {
  const table = new Map<string, Candidate[]>();
  // xstate selects the deepest state's transitions first, then its ancestors'.
  for (let node: AnyStateNode | undefined = atomic; node; node = node.parent) {
    for (const [eventType, definitions] of node.transitions) {
      const list = table.get(eventType) ?? [];
      if (!table.has(eventType)) table.set(eventType, list);
      for (const definition of definitions) {
        const where = `${node.id} on ${eventType}`;
        assert((definition.target?.length ?? 0) <= 1, () => `${where}: one target at most`);
        const targetNode = definition.target?.[0];
        // xstate's can() answers false for a transition with neither target nor actions.
        assert(targetNode !== undefined || definition.actions.length > 0, () => `${where}: empty`);
        list.push({
          guard: resolveGuard(machine, definition.guard, where),
          assignments: definition.actions.map((a: unknown) => resolveAssignment(machine, a, where)),
          target: targetNode === undefined ? undefined : atomicPath(targetNode),
        });
      }
    }
  }
  return table;
}

/**
 * `copy`: the context copied as one literal. A spread (`{ ...context }`) makes an object
 * with room for four fields in itself and the rest in a separate property array: for the
 * attachment's six fields, 24 bytes more a record than the literal.
 */
export function compileMachine<C extends object, E extends { type: string }>(
  machine: AnyStateMachine,
  copy: (context: C) => C = (context) => ({ ...context }),
): CompiledMachine<C, E> {
  const nodes = collectNodes(machine.root, []);
  for (const node of nodes) {
    assert(
      node.entry.length === 0 && node.exit.length === 0,
      () => `${node.id}: no entry/exit actions`,
    );
    assert(node.always === undefined, () => `${node.id}: no eventless transitions`);
    assert(node.after.length === 0, () => `${node.id}: no delayed transitions (STYLE.md §2)`);
  }
  const tables = new Map<string, Map<string, Candidate[]>>();
  for (const node of nodes) {
    if (node.type === 'atomic') tables.set(node.path.join('.'), compileCandidates(machine, node));
  }
  const context = machine.config.context as C;
  assert(
    typeof context === 'object' && context !== null,
    () => `${machine.id}: static context needed`,
  );

  function transition(state: PairState<C>, event: E): PairState<C> | undefined {
    const table = tables.get(state.value);
    if (table === undefined) fail(`${machine.id}: unknown state ${state.value}`);
    const candidates = table.get(event.type);
    if (candidates === undefined) return undefined;
    const args = { context: state.context as unknown, event: event as unknown };
    for (const candidate of candidates) {
      if (candidate.guard !== undefined && !candidate.guard(args, undefined)) continue;
      // One fresh context per transition; assignments apply in order, each seeing the last.
      let next = state.context;
      if (candidate.assignments.length > 0) {
        const fresh = copy(state.context);
        args.context = fresh;
        for (const assignment of candidate.assignments) {
          Object.assign(fresh, assignment(args, undefined));
        }
        next = fresh;
      }
      return { value: candidate.target ?? state.value, context: next };
    }
    return undefined;
  }

  return {
    id: machine.id,
    initial: { value: atomicPath(machine.root), context },
    atomicStates: [...tables.keys()],
    transition,
  };
}

/** `attached.deviceMounted` → `{ attached: 'deviceMounted' }` (xstate's StateValue). */
export function toStateValue(path: string): StateValue {
  const parts = path.split('.');
  let value: StateValue = parts[parts.length - 1]!;
  for (let i = parts.length - 2; i >= 0; i--) value = { [parts[i]!]: value };
  return value;
}

/** xstate's StateValue → dotted path of the (single) atomic state. */
export function fromStateValue(value: StateValue): string {
  if (typeof value === 'string') return value;
  const entries = Object.entries(value);
  assert(entries.length === 1, 'pair machines have no parallel regions');
  const [key, child] = entries[0]!;
  return `${key}.${fromStateValue(child as StateValue)}`;
}
