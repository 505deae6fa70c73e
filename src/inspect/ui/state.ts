/// <reference lib="dom" />
/**
 * The inspector page's state: what it shows (the moment, the world there, the selection,
 * the filters), the page's fixed elements, and what a click on a pair or an event asks the
 * data flow (main.ts) to do.
 */
import type {
  EventSummary,
  Meta,
  PairKind,
  Transition,
  VerdictPayload,
  WorldPayload,
} from '../protocol.js';
import type { DrawnChart } from './chart.js';
import { h } from './dom.js';

export interface Filters {
  volume: string;
  pod: string;
  node: string;
  state: string;
  problems: boolean;
}

export const app = {
  meta: undefined as Meta | undefined,
  head: 0,
  at: 0,
  live: true,
  world: undefined as WorldPayload | undefined,
  selectedPair: null as string | null,
  selectedEvent: null as number | null,
  history: [] as Transition[],
  historyFor: null as string | null,
  events: [] as EventSummary[],
  filters: { volume: '', pod: '', node: '', state: '', problems: false } as Filters,
  charts: new Map<PairKind, Promise<DrawnChart>>(),
  connected: false,
  /** The judge's verdict at the head (a cluster's log). */
  verdict: undefined as VerdictPayload | undefined,
};

/** Every state of both machines, once their charts are loaded (the state filter's options). */
export const knownStates = new Set<string>();

/** What a click asks for: main.ts, which owns the data flow, answers it. */
export interface Navigation {
  selectEvent(seq: number): Promise<void>;
  selectPair(id: string): Promise<void>;
}

// ---------------------------------------------------------------- skeleton

export const ui = {
  file: h('span', { class: 'file' }),
  node: h('span', { class: 'muted' }),
  status: h('span', { class: 'status', 'data-testid': 'status' }),
  headInfo: h('span', { class: 'muted', 'data-testid': 'head' }),
  counts: h('div', { class: 'counts' }),
  list: h('ul', { class: 'pairs', 'data-testid': 'pairs' }),
  nodes: h('div', { class: 'controller-side', 'data-testid': 'controller-side', hidden: true }),
  // Closed to one line until asked for: the pair list keeps the room.
  storage: h('details', { class: 'storage-side', 'data-testid': 'storage', hidden: true }),
  pairHead: h('div', { class: 'pair-head' }),
  chart: h('div', { class: 'chart-box', 'data-testid': 'chart' }),
  details: h('div', { class: 'details' }),
  range: h('input', {
    type: 'range',
    min: 0,
    max: 0,
    value: 0,
    step: 1,
    'aria-label': 'moment (seq)',
    'data-testid': 'scrubber',
  }),
  marks: h('div', { class: 'marks' }),
  verdictMarks: h('div', { class: 'verdict-marks', 'data-testid': 'verdict-marks' }),
  // One line until opened, and opened by itself when a rule was broken: the pairs keep the room.
  verdict: h('details', { class: 'verdict-side', 'data-testid': 'verdict', hidden: true }),
  moment: h('span', { class: 'moment', 'data-testid': 'moment' }),
  liveButton: h(
    'button',
    { class: 'live', type: 'button', title: 'follow the log as it grows' },
    'live',
  ),
  events: h('div', { class: 'events', 'data-testid': 'events' }),
  event: h('div', { class: 'event-detail', 'data-testid': 'event-detail' }),
  problem: h('div', { class: 'problem', hidden: true }),
  stateSelect: h('select', { 'aria-label': 'filter by state', 'data-testid': 'filter-state' }),
};
