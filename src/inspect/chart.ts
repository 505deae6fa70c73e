/**
 * The pair machines' statecharts, read from the xstate definitions themselves (not drawn by
 * hand): every StateNode under `machine.root` becomes a node, nested states stay nested,
 * and each entry of a node's `transitions` map becomes an edge. Guarded alternatives of an
 * event that lead to the same target share one edge.
 */
import type { AnyStateMachine } from 'xstate';
import { attachmentMachine, mountMachine } from '../../machines/index.js';
import type { Chart, ChartEdge, ChartNode, PairKind } from './protocol.js';

/** The slice of xstate's StateNode the walk reads. */
interface StateNodeLike {
  readonly id: string;
  readonly key: string;
  readonly states: Record<string, StateNodeLike>;
  readonly initial?: { readonly target?: readonly StateNodeLike[] } | undefined;
  readonly transitions: ReadonlyMap<
    string,
    readonly {
      readonly target?: readonly StateNodeLike[] | undefined;
      readonly guard?: unknown;
    }[]
  >;
}

function guardName(guard: unknown): string | null {
  if (guard === undefined || guard === null) return null;
  if (typeof guard === 'string') return guard;
  if (typeof guard === 'object' && 'type' in guard && typeof guard.type === 'string')
    return guard.type;
  return 'guard';
}

function chartOf(machine: AnyStateMachine, kind: PairKind): Chart {
  const root = machine.root as unknown as StateNodeLike;
  const nodes: ChartNode[] = [];
  const edges = new Map<string, { source: string; target: string; events: ChartEdge['events'] }>();
  const walk = (node: StateNodeLike, parent: string | null) => {
    const children = Object.values(node.states);
    const internal: string[] = [];
    for (const [event, transitions] of node.transitions) {
      for (const t of transitions) {
        const targets = t.target ?? [];
        if (targets.length === 0) {
          if (!internal.includes(event)) internal.push(event);
          continue;
        }
        for (const target of targets) {
          const key = `${node.id}→${target.id}`;
          const edge = edges.get(key) ?? { source: node.id, target: target.id, events: [] };
          edge.events.push({ event, guard: guardName(t.guard) });
          edges.set(key, edge);
        }
      }
    }
    if (parent !== null) {
      nodes.push({
        id: node.id,
        key: node.key,
        parent: parent === root.id ? null : parent,
        compound: children.length > 0,
        initial: node.initial?.target?.[0]?.id ?? null,
        internal,
      });
    }
    for (const child of children) walk(child, node.id);
  };
  walk(root, null);
  return {
    machine: kind,
    root: root.id,
    initial: root.initial?.target?.[0]?.id ?? null,
    nodes,
    edges: [...edges.values()].map((e, i) => ({ id: `e${i}`, ...e })),
  };
}

let cached: Record<PairKind, Chart> | undefined;

/** Both machines' charts (computed once: the definitions do not change while running). */
export function charts(): Record<PairKind, Chart> {
  cached ??= {
    attachment: chartOf(attachmentMachine, 'attachment'),
    mount: chartOf(mountMachine, 'mount'),
  };
  return cached;
}
