/// <reference lib="dom" />
/**
 * Draws a pair machine's statechart (as /api/chart extracts it from the xstate definition)
 * as SVG, laid out by elkjs: compound states hold their children (ELK's INCLUDE_CHILDREN
 * hierarchy handling), each transition is an edge placed in the lowest common ancestor of
 * its ends, and a small dot marks each initial state. The layout is computed once per
 * machine; `highlight` then lights the current state, the transition that led there (with
 * its events) and, dashed, the ones it may take next. Other edges name their events on
 * hover: laying out all the labels of the attachment machine would double the chart's size.
 */
import * as elkModule from 'elkjs/lib/elk.bundled.js';
import type { ELK as ElkApi, ElkExtendedEdge, ElkNode } from 'elkjs/lib/elk-api.js';
import type { Chart, ChartEdge } from '../protocol.js';
import { s } from './dom.js';

const font = '13px ui-sans-serif, system-ui, -apple-system, "Segoe UI", Roboto, sans-serif';
const labelFont = '11px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace';
let measureCtx: CanvasRenderingContext2D | null | undefined;

function textWidth(text: string, f: string): number {
  measureCtx ??= document.createElement('canvas').getContext('2d');
  if (measureCtx === null) return text.length * 7.5;
  measureCtx.font = f;
  return measureCtx.measureText(text).width;
}

// elkjs is CommonJS: the bundler's namespace holds the constructor as `default`, and
// TypeScript's NodeNext view of the typings puts it one `default` deeper.
type ElkConstructor = new () => ElkApi;
const elkExports = elkModule as unknown as {
  default: ElkConstructor & { default?: ElkConstructor };
};
const ELK: ElkConstructor = elkExports.default.default ?? elkExports.default;

const initialSuffix = '#initial';
const labelLineHeight = 13;

/** The edge's label lines: each event once, guards left to the tooltip. */
function edgeLines(edge: ChartEdge): string[] {
  return [...new Set(edge.events.map((e) => e.event))];
}

function ancestors(chart: Chart, id: string): string[] {
  const byId = new Map(chart.nodes.map((n) => [n.id, n]));
  const out: string[] = [];
  let parent = byId.get(id)?.parent ?? null;
  while (parent !== null) {
    out.push(parent);
    parent = byId.get(parent)?.parent ?? null;
  }
  out.push(chart.root);
  return out;
}

interface Box {
  x: number;
  y: number;
  w: number;
  h: number;
}

const overlaps = (a: Box, b: Box) =>
  a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;

/**
 * Where an edge's label goes: beside one of its segments (longest first, above or below a
 * horizontal one, right or left of a vertical one), at the first spot that covers no state
 * and no label placed before; the longest segment when every spot is taken.
 */
function placeLabel(
  points: { x: number; y: number }[],
  w: number,
  h: number,
  obstacles: Box[],
  ends: Box[],
): Box {
  const segments = points
    .slice(1)
    .map((b, i) => ({ a: points[i]!, b }))
    .sort(
      (s1, s2) =>
        Math.abs(s2.a.x - s2.b.x) +
        Math.abs(s2.a.y - s2.b.y) -
        (Math.abs(s1.a.x - s1.b.x) + Math.abs(s1.a.y - s1.b.y)),
    );
  const candidates: Box[] = [];
  for (const { a, b } of segments) {
    const mx = (a.x + b.x) / 2;
    const my = (a.y + b.y) / 2;
    if (Math.abs(a.y - b.y) < 1)
      candidates.push({ x: mx - w / 2, y: my - h - 2, w, h }, { x: mx - w / 2, y: my + 2, w, h });
    else
      candidates.push({ x: mx + 4, y: my - h / 2, w, h }, { x: mx - w - 4, y: my - h / 2, w, h });
  }
  // Short transitions between neighbours: above or below one of their ends instead.
  for (const e of ends) {
    candidates.push(
      { x: e.x + e.w / 2 - w / 2, y: e.y - h - 3, w, h },
      { x: e.x + e.w / 2 - w / 2, y: e.y + e.h + 3, w, h },
    );
  }
  return (
    candidates.find((c) => !obstacles.some((o) => overlaps(c, o))) ??
    candidates[0] ?? { x: 0, y: 0, w, h }
  );
}

function edgeLabel(lines: string[], box: Box): SVGGElement {
  const text = s('text', { class: 'edge-label', x: box.x + 4, y: box.y + 12 });
  lines.forEach((line, i) =>
    text.append(s('tspan', { x: box.x + 4, dy: i === 0 ? 0 : labelLineHeight }, line)),
  );
  return s(
    'g',
    { class: 'label' },
    s('rect', { class: 'label-bg', x: box.x, y: box.y, width: box.w, height: box.h, rx: 4 }),
    text,
  );
}

export interface NextTransition {
  readonly event: string;
  readonly guard: string | null;
  /** The target's state value, e.g. `attached.deviceMounted`. */
  readonly target: string;
}

export interface DrawnChart {
  readonly svg: SVGSVGElement;
  /** The transitions `state` may take: its own and its ancestors', in definition order. */
  next(state: string): NextTransition[];
  /**
   * Lights `state` (a state value such as `attached.deviceMounting`) and the transition
   * from→to.
   */
  highlight(state: string | null, last: { from: string; to: string } | null): void;
}

function isBackEdge(edge: ChartEdge, order: ReadonlyMap<string, number>): boolean {
  return (order.get(edge.target) ?? 0) < (order.get(edge.source) ?? 0);
}

/** Text widths in px, for node and label sizes (a canvas in the page). */
type Measure = (text: string, font: string) => number;

const rootLayoutOptions: Record<string, string> = {
  'elk.algorithm': 'layered',
  'elk.hierarchyHandling': 'INCLUDE_CHILDREN',
  'elk.edgeRouting': 'ORTHOGONAL',
  'elk.layered.spacing.nodeNodeBetweenLayers': '34',
  'elk.spacing.nodeNode': '20',
  'elk.spacing.edgeNode': '12',
  'elk.spacing.edgeEdge': '8',
  'elk.layered.nodePlacement.strategy': 'NETWORK_SIMPLEX',
  'elk.layered.considerModelOrder.strategy': 'NODES_AND_EDGES',
  'elk.padding': '[top=12,left=12,bottom=12,right=12]',
};

/** A state as an ELK node: a compound one holds its children, an atomic one fits its name. */
function elkNodeOf(node: Chart['nodes'][number], measure: Measure): ElkNode {
  return node.compound
    ? {
        id: node.id,
        labels: [{ text: node.key }],
        layoutOptions: { 'elk.padding': '[top=32,left=12,bottom=12,right=12]' },
        children: [],
        edges: [],
      }
    : {
        id: node.id,
        width: Math.ceil(measure(node.key, font)) + 24,
        height: 32,
        labels: [{ text: node.key }],
      };
}

/** Initial-state dots, one per container that has an initial child. */
function addInitialDots(chart: Chart, elkNodes: ReadonlyMap<string, ElkNode>): void {
  const initials: { container: string; target: string }[] = [];
  if (chart.initial !== null) initials.push({ container: chart.root, target: chart.initial });
  for (const node of chart.nodes)
    if (node.compound && node.initial !== null)
      initials.push({ container: node.id, target: node.initial });
  for (const { container, target } of initials) {
    const c = elkNodes.get(container)!;
    const id = `${container}${initialSuffix}`;
    c.children!.unshift({ id, width: 10, height: 10 });
    c.edges!.push({ id: `${id}→`, sources: [id], targets: [target] });
  }
}

/**
 * Each transition in the lowest common ancestor of its ends. The machines list their states
 * in lifecycle order (detached, attaching, attached, …): a transition to an earlier state is
 * laid out reversed (and drawn back the right way), so the layers follow the lifecycle
 * instead of a cycle-breaking heuristic's choice.
 */
function addTransitions(chart: Chart, elkNodes: ReadonlyMap<string, ElkNode>): void {
  const order = new Map(chart.nodes.map((n, i) => [n.id, i]));
  for (const edge of chart.edges) {
    const sourceUp = [edge.source, ...ancestors(chart, edge.source)];
    const targetUp = new Set(ancestors(chart, edge.target));
    const container = sourceUp.find((a) => a !== edge.source && targetUp.has(a)) ?? chart.root;
    const back = isBackEdge(edge, order);
    elkNodes.get(container)!.edges!.push({
      id: edge.id,
      sources: [back ? edge.target : edge.source],
      targets: [back ? edge.source : edge.target],
    });
  }
}

/** The ELK graph of a chart: nested nodes, edges in their lowest common ancestor, initial dots. */
function elkGraph(chart: Chart, measure: Measure, direction: 'RIGHT' | 'DOWN' = 'RIGHT'): ElkNode {
  const root: ElkNode = {
    id: chart.root,
    layoutOptions: { ...rootLayoutOptions, 'elk.direction': direction },
    children: [],
    edges: [],
  };
  const elkNodes = new Map<string, ElkNode>([[chart.root, root]]);
  for (const node of chart.nodes) elkNodes.set(node.id, elkNodeOf(node, measure));
  for (const node of chart.nodes) {
    const parent = elkNodes.get(node.parent ?? chart.root)!;
    parent.children!.push(elkNodes.get(node.id)!);
  }
  addInitialDots(chart, elkNodes);
  addTransitions(chart, elkNodes);
  return root;
}

type Point = { x: number; y: number };
type PlacedEdge = { edge: ElkExtendedEdge; container: string };

/** The laid-out graph in absolute positions (ELK gives each relative to its container). */
function absolutePositions(laid: ElkNode) {
  const origin = new Map<string, Point>();
  const boxes = new Map<string, Box>();
  const edges: PlacedEdge[] = [];
  const visit = (n: ElkNode, ox: number, oy: number) => {
    const x = ox + (n.x ?? 0);
    const y = oy + (n.y ?? 0);
    origin.set(n.id, { x, y });
    boxes.set(n.id, { x, y, w: n.width ?? 0, h: n.height ?? 0 });
    for (const e of n.edges ?? []) edges.push({ edge: e, container: e.container ?? n.id });
    for (const c of n.children ?? []) visit(c, x, y);
  };
  visit(laid, 0, 0);
  return { origin, boxes, edges };
}

function arrowMarker(id: string, pathClass: string): SVGElement {
  return s(
    'marker',
    {
      id,
      viewBox: '0 0 10 10',
      refX: 9,
      refY: 5,
      markerWidth: 7,
      markerHeight: 7,
      orient: 'auto-start-reverse',
    },
    s('path', { d: 'M 0 0 L 10 5 L 0 10 z', class: pathClass }),
  );
}

function chartSvg(chart: Chart, laid: ElkNode): SVGSVGElement {
  const width = Math.ceil(laid.width ?? 400);
  const height = Math.ceil(laid.height ?? 200);
  const svg = s('svg', {
    class: 'chart',
    viewBox: `0 0 ${width} ${height}`,
    width,
    height,
    role: 'img',
    'aria-label': `statechart of the ${chart.machine} machine`,
  });
  svg.append(
    s(
      'defs',
      {},
      arrowMarker(`arrow-${chart.machine}`, 'arrowhead'),
      arrowMarker(`arrow-${chart.machine}-lit`, 'arrowhead lit'),
    ),
  );
  return svg;
}

/** The drawing's layers, bottom to top: compound states, transitions, atomic states, labels. */
interface Layers {
  readonly compounds: SVGGElement;
  readonly edges: SVGGElement;
  readonly nodes: SVGGElement;
  readonly labels: SVGGElement;
}

function stateElement(node: Chart['nodes'][number], box: Box): SVGGElement {
  const tone = node.key.includes('Uncertain') ? ' uncertain' : '';
  const g = s(
    'g',
    { class: `state${node.compound ? ' compound' : ''}${tone}`, 'data-state': node.id },
    s(
      'title',
      {},
      node.internal.length > 0
        ? `${node.key}\nalso handles: ${node.internal.join(', ')}`
        : node.key,
    ),
    s('rect', { x: box.x, y: box.y, width: box.w, height: box.h, rx: node.compound ? 12 : 9 }),
    s(
      'text',
      node.compound
        ? { x: box.x + 12, y: box.y + 20, class: 'compound-label' }
        : { x: box.x + box.w / 2, y: box.y + box.h / 2 + 4.5, 'text-anchor': 'middle' },
      node.key,
    ),
  );
  if (node.compound && node.internal.length > 0) {
    g.append(
      s(
        'text',
        { x: box.x + box.w - 12, y: box.y + 20, 'text-anchor': 'end', class: 'internal' },
        `+ ${node.internal.length} internal`,
      ),
    );
  }
  return g;
}

/** Draws every state; returns them by id, and the boxes labels must not cover. */
function drawStates(chart: Chart, boxes: ReadonlyMap<string, Box>, layers: Layers) {
  const stateEls = new Map<string, SVGGElement>();
  const obstacles: Box[] = [];
  const chartNodes = new Map(chart.nodes.map((n) => [n.id, n]));
  for (const [id, box] of boxes) {
    if (id === chart.root) continue;
    if (id.endsWith(initialSuffix)) {
      layers.nodes.append(
        s('circle', { class: 'initial', cx: box.x + box.w / 2, cy: box.y + box.h / 2, r: 4.5 }),
      );
      obstacles.push(box);
      continue;
    }
    const node = chartNodes.get(id)!;
    const g = stateElement(node, box);
    stateEls.set(id, g);
    if (node.compound) {
      layers.compounds.append(g);
      obstacles.push({ x: box.x, y: box.y, w: box.w, h: 28 }); // its title
    } else {
      layers.nodes.append(g);
      obstacles.push(box);
    }
  }
  return { stateEls, obstacles };
}

/** An edge's path (with a wider invisible one to hover when it is a transition); its points. */
function edgePaths(chart: Chart, placed: PlacedEdge, origin: Point, back: boolean, hit: boolean) {
  const g = s('g', { class: hit ? 'edge' : 'edge initial-edge', 'data-edge': placed.edge.id });
  const all: Point[] = [];
  for (const section of placed.edge.sections ?? []) {
    const points = [section.startPoint, ...(section.bendPoints ?? []), section.endPoint].map(
      (p) => ({ x: p.x + origin.x, y: p.y + origin.y }),
    );
    if (back) points.reverse();
    all.push(...points);
    const d = points
      .map((p, i) => `${i === 0 ? 'M' : 'L'} ${p.x.toFixed(1)} ${p.y.toFixed(1)}`)
      .join(' ');
    if (hit) g.append(s('path', { d, class: 'hit' }));
    g.append(s('path', { d, class: 'line', 'marker-end': `url(#arrow-${chart.machine})` }));
  }
  return { g, points: all };
}

/** A transition's tooltip and label (shown when lit or hovered), placed off states and labels. */
function transitionLabel(
  info: ChartEdge,
  g: SVGGElement,
  points: Point[],
  boxes: ReadonlyMap<string, Box>,
  obstacles: Box[],
): SVGGElement {
  g.prepend(
    s(
      'title',
      {},
      info.events.map((e) => `${e.event}${e.guard === null ? '' : ` [${e.guard}]`}`).join('\n'),
    ),
  );
  const lines = edgeLines(info);
  // Only the lit and the hovered transitions show their label, so labels avoid states only.
  const ends = [boxes.get(info.target), boxes.get(info.source)].filter((b) => b !== undefined);
  const box = placeLabel(
    points,
    Math.ceil(Math.max(...lines.map((l) => textWidth(l, labelFont)))) + 8,
    lines.length * labelLineHeight + 4,
    obstacles,
    ends,
  );
  const label = edgeLabel(lines, box);
  label.setAttribute('data-edge', info.id);
  const hover = (on: boolean) => () => {
    for (const el of [g, label]) el.classList.toggle('hover', on);
  };
  g.addEventListener('mouseenter', hover(true));
  g.addEventListener('mouseleave', hover(false));
  return label;
}

/** Draws every edge; returns each transition's path group and label by edge id. */
function drawEdges(
  chart: Chart,
  positions: ReturnType<typeof absolutePositions>,
  obstacles: Box[],
  layers: Layers,
): Map<string, [SVGGElement, SVGGElement]> {
  const edgeEls = new Map<string, [SVGGElement, SVGGElement]>();
  const chartEdges = new Map(chart.edges.map((e) => [e.id, e]));
  const order = new Map(chart.nodes.map((n, i) => [n.id, i]));
  for (const placed of positions.edges) {
    const origin = positions.origin.get(placed.container) ?? { x: 0, y: 0 };
    const info = chartEdges.get(placed.edge.id);
    const back = info !== undefined && isBackEdge(info, order);
    const { g, points } = edgePaths(chart, placed, origin, back, info !== undefined);
    layers.edges.append(g);
    if (info === undefined) continue;
    const label = transitionLabel(info, g, points, positions.boxes, obstacles);
    layers.labels.append(label);
    edgeEls.set(info.id, [g, label]);
  }
  return edgeEls;
}

/** The most specific transition whose ends contain the two states (values such as `attached`). */
function transitionBetween(chart: Chart, fromValue: string, toValue: string) {
  const from = `${chart.root}.${fromValue}`;
  const to = `${chart.root}.${toValue}`;
  const fromUp = new Set([from, ...ancestors(chart, from)]);
  const toUp = new Set([to, ...ancestors(chart, to)]);
  return chart.edges
    .filter((e) => fromUp.has(e.source) && toUp.has(e.target))
    .sort((a, b) => b.source.length + b.target.length - (a.source.length + a.target.length))[0];
}

/** `next` and `highlight` over the drawn states and transitions. */
function interactions(
  chart: Chart,
  stateEls: ReadonlyMap<string, SVGGElement>,
  edgeEls: ReadonlyMap<string, [SVGGElement, SVGGElement]>,
): Omit<DrawnChart, 'svg'> {
  const idOf = (value: string) => `${chart.root}.${value}`;
  const setMarker = (el: SVGGElement, lit: boolean) => {
    for (const p of Array.from(el.querySelectorAll('path.line')))
      p.setAttribute('marker-end', `url(#arrow-${chart.machine}${lit ? '-lit' : ''})`);
  };
  const mark = (id: string, cls: 'lit' | 'next') => {
    const els = edgeEls.get(id) ?? [];
    for (const el of els) el.classList.add(cls);
    if (cls === 'lit' && els[0] !== undefined) {
      setMarker(els[0], true);
      els[0].parentNode?.append(els[0]); // on top of the other transitions
    }
  };
  return {
    next(state) {
      const id = idOf(state);
      const from = new Set([id, ...ancestors(chart, id)]);
      return chart.edges
        .filter((e) => from.has(e.source))
        .flatMap((e) =>
          e.events.map((ev) => ({
            event: ev.event,
            guard: ev.guard,
            target: e.target.slice(chart.root.length + 1),
          })),
        );
    },
    highlight(state, last) {
      for (const el of stateEls.values()) el.classList.remove('current', 'active');
      for (const [g, label] of edgeEls.values()) {
        g.classList.remove('lit', 'next');
        label.classList.remove('lit', 'next');
        setMarker(g, false);
      }
      if (state !== null) {
        const id = idOf(state);
        stateEls.get(id)?.classList.add('current');
        const up = ancestors(chart, id);
        for (const a of up) stateEls.get(a)?.classList.add('active');
        // What the state may do next: its transitions and its ancestors'.
        const from = new Set([id, ...up]);
        for (const e of chart.edges) if (from.has(e.source)) mark(e.id, 'next');
      }
      const edge = last === null ? undefined : transitionBetween(chart, last.from, last.to);
      if (edge !== undefined) mark(edge.id, 'lit');
    },
  };
}

export async function layoutChart(chart: Chart): Promise<DrawnChart> {
  const laid = await new ELK().layout(elkGraph(chart, textWidth));
  const positions = absolutePositions(laid);
  const svg = chartSvg(chart, laid);
  const layers: Layers = {
    compounds: s('g', { class: 'compounds' }),
    edges: s('g', { class: 'edges' }),
    nodes: s('g', { class: 'nodes' }),
    labels: s('g', { class: 'labels' }),
  };
  const { stateEls, obstacles } = drawStates(chart, positions.boxes, layers);
  const edgeEls = drawEdges(chart, positions, obstacles, layers);
  svg.append(layers.compounds, layers.edges, layers.nodes, layers.labels);
  return { svg, ...interactions(chart, stateEls, edgeEls) };
}
