/// <reference lib="dom" />
/**
 * The inspector page: the pair list (left), the selected pair's statechart and details
 * (right), the log's timeline with a scrubber and the selected event (bottom). It reads
 * the JSON API only, follows the log through Server-Sent Events, and writes nothing.
 * This file lays the page out and runs its data flow; the panels draw themselves in
 * pair-list.ts, pair-panel.ts, timeline.ts, nodes.ts and storage.ts from the state in state.ts.
 */
import type {
  CauseStep,
  EventSummary,
  HeadUpdate,
  Meta,
  Transition,
  VerdictPayload,
  WorldPayload,
} from '../protocol.js';
import { produce } from 'immer';
import { clear, getJson, h } from './dom.js';
import { renderNodes } from './nodes.js';
import { renderStorage } from './storage.js';
import { renderList, renderStateOptions } from './pair-list.js';
import { renderPair } from './pair-panel.js';
import { app, type Navigation, ui } from './state.js';
import { renderVerdict } from './verdict.js';
import {
  renderEvent,
  renderEvents,
  renderHeader,
  renderMarks,
  renderMoment,
  renderStatus,
} from './timeline.js';

/** What a click on a pair or an event asks for (the functions below, hoisted). */
const nav: Navigation = { selectEvent, selectPair };

// ---------------------------------------------------------------- skeleton

function filterInput(key: 'volume' | 'pod' | 'node', placeholder: string): HTMLInputElement {
  return h('input', {
    type: 'search',
    placeholder,
    'aria-label': `filter by ${key}`,
    'data-testid': `filter-${key}`,
    oninput: (e: Event) => {
      app.filters[key] = (e.target as HTMLInputElement).value.trim();
      renderList(nav);
    },
  });
}

ui.stateSelect.addEventListener('change', (e: Event) => {
  app.filters.state = (e.target as HTMLSelectElement).value;
  renderList(nav);
});

function step(delta: number) {
  moveTo(Math.max(app.meta?.firstSeq ?? 0, Math.min(app.head, app.at + delta)));
}

document.body.append(
  h(
    'header',
    {},
    h('span', { class: 'brand' }, h('span', { class: 'logo' }), 'vole inspector'),
    ui.file,
    ui.node,
    h('span', { class: 'spacer' }),
    ui.headInfo,
    ui.status,
  ),
  ui.problem,
  h(
    'main',
    {},
    h(
      'aside',
      { class: 'left' },
      h(
        'div',
        { class: 'filters' },
        filterInput('volume', 'volume'),
        filterInput('pod', 'pod'),
        filterInput('node', 'node'),
        ui.stateSelect,
        h(
          'label',
          { class: 'check' },
          h('input', {
            type: 'checkbox',
            'data-testid': 'filter-problems',
            onchange: (e: Event) => {
              app.filters.problems = (e.target as HTMLInputElement).checked;
              renderList(nav);
            },
          }),
          'uncertain or failing only',
        ),
      ),
      ui.counts,
      ui.list,
      ui.verdict,
      ui.nodes,
      ui.storage,
    ),
    h('section', { class: 'right' }, ui.pairHead, ui.chart, ui.details),
  ),
  h(
    'footer',
    {},
    h(
      'div',
      { class: 'scrub' },
      h(
        'button',
        { type: 'button', title: 'first event', onclick: () => moveTo(app.meta?.firstSeq ?? 0) },
        '|◀',
      ),
      h('button', { type: 'button', title: 'previous event', onclick: () => step(-1) }, '◀'),
      h('div', { class: 'track' }, ui.range, ui.marks, ui.verdictMarks),
      h('button', { type: 'button', title: 'next event', onclick: () => step(1) }, '▶'),
      ui.liveButton,
      ui.moment,
    ),
    h('div', { class: 'lower' }, ui.events, ui.event),
  ),
);

ui.liveButton.addEventListener('click', () => {
  app.live = true;
  moveTo(app.head);
});
ui.range.addEventListener('input', () => moveTo(Number(ui.range.value)));
document.addEventListener('keydown', (e) => {
  if (e.target instanceof HTMLInputElement && e.target.type !== 'range') return;
  if (e.key === 'ArrowLeft' && e.target !== ui.range) step(-1);
  if (e.key === 'ArrowRight' && e.target !== ui.range) step(1);
});

// ---------------------------------------------------------------- data flow

function showProblem(message: string | null) {
  ui.problem.hidden = message === null;
  ui.problem.textContent = message ?? '';
}

let worldRequest = 0;
let worldTimer: ReturnType<typeof setTimeout> | undefined;

/** Shows the world at `seq`: one request at a time, the latest position wins. */
function moveTo(seq: number) {
  app.at = seq;
  app.live = seq >= app.head;
  ui.range.value = String(seq);
  renderMoment();
  clearTimeout(worldTimer);
  worldTimer = setTimeout(() => void loadWorld(seq), 30);
}

async function loadWorld(seq: number) {
  const request = ++worldRequest;
  try {
    const world = await getJson<WorldPayload>(`/api/world?at=${seq}`);
    if (request !== worldRequest) return;
    app.world = world;
    showProblem(null);
    renderWorld();
    await loadEventsAround(seq);
  } catch (error) {
    showProblem(`could not read the world at seq ${seq}: ${(error as Error).message}`);
  }
}

async function loadEventsAround(seq: number, force = false) {
  const first = app.events[0]?.seq ?? Infinity;
  const last = app.events[app.events.length - 1]?.seq ?? -Infinity;
  const inside = seq - 8 >= first && (seq + 8 <= last || last >= app.head);
  if (!force && inside) {
    renderEvents(nav);
    return;
  }
  const from = Math.max(1, seq - 60);
  const to = Math.min(app.head, seq + 60);
  app.events = await getJson<EventSummary[]>(`/api/events?from=${from}&to=${to}`);
  renderEvents(nav);
}

async function selectEvent(seq: number, move = true) {
  app.selectedEvent = seq;
  if (move) moveTo(seq);
  renderEvents(nav);
  clear(ui.event, h('p', { class: 'muted' }, `loading seq ${seq}…`));
  try {
    const [event, chain] = await Promise.all([
      getJson<Record<string, unknown>>(`/api/event?seq=${seq}`),
      getJson<CauseStep[]>(`/api/explain?seq=${seq}`),
    ]);
    if (app.selectedEvent !== seq) return;
    renderEvent(nav, event, chain);
  } catch (error) {
    clear(ui.event, h('p', { class: 'error' }, (error as Error).message));
  }
}

async function selectPair(id: string) {
  app.selectedPair = id;
  renderList(nav);
  renderPair(nav);
  try {
    const transitions = await getJson<Transition[]>(`/api/history?pair=${encodeURIComponent(id)}`);
    if (app.selectedPair !== id) return;
    app.history = transitions;
    app.historyFor = id;
    renderPair(nav);
  } catch (error) {
    showProblem((error as Error).message);
  }
}

/** The judge's verdict at the head: the timeline's marks and the verdict panel. */
async function loadVerdict() {
  try {
    app.verdict = await getJson<VerdictPayload>('/api/verdict');
    renderVerdict(nav);
    renderEvents(nav);
  } catch (error) {
    showProblem(`could not judge the log: ${(error as Error).message}`);
  }
}

let verdictTimer: ReturnType<typeof setTimeout> | undefined;

/** Judges the log again after it grew, at most once a second. */
function scheduleVerdictRefresh() {
  if (verdictTimer !== undefined) return;
  verdictTimer = setTimeout(() => {
    verdictTimer = undefined;
    void loadVerdict();
  }, 1000);
}

let historyTimer: ReturnType<typeof setTimeout> | undefined;

/** Refreshes the selected pair's transitions after the log grew, at most once a second. */
function scheduleHistoryRefresh() {
  if (historyTimer !== undefined || app.selectedPair === null) return;
  historyTimer = setTimeout(() => {
    historyTimer = undefined;
    if (app.selectedPair !== null) void selectPair(app.selectedPair);
  }, 1000);
}

function connect() {
  const source = new EventSource('/api/stream');
  source.addEventListener('open', () => {
    app.connected = true;
    renderStatus();
  });
  source.addEventListener('error', () => {
    app.connected = false;
    renderStatus();
  });
  source.addEventListener('problem', (e) =>
    showProblem(
      `reading the log: ${JSON.parse((e as MessageEvent<string>).data).message as string}`,
    ),
  );
  source.addEventListener('head', (e) =>
    onHead(JSON.parse((e as MessageEvent<string>).data) as HeadUpdate),
  );
  source.addEventListener('hello', (e) => {
    const { head } = JSON.parse((e as MessageEvent<string>).data) as { head: number };
    if (head !== app.head) void refreshHead();
  });
}

/** After a reconnect the log may have grown while the page was away. */
async function refreshHead() {
  const meta = await getJson<Meta>('/api/meta');
  app.meta = meta;
  app.head = meta.head;
  renderHeader();
  renderMarks();
  if (app.live) moveTo(app.head);
  else renderMoment();
}

function onHead(update: HeadUpdate) {
  if (app.meta === undefined) return;
  const wasLive = app.live;
  const previousHead = app.head;
  app.head = update.head;
  app.meta = produce(app.meta, (meta) => {
    meta.head = update.head;
    meta.lastTsMs = update.lastTsMs;
    meta.marks.push(...update.marks);
  });
  ui.range.max = String(app.head);
  renderHeader();
  renderMarks();
  scheduleVerdictRefresh();
  // Extend the event list only when it reached the old head (no gap in the list).
  const last = app.events[app.events.length - 1]?.seq ?? 0;
  if (last >= previousHead)
    app.events = [...app.events, ...update.events.filter((e) => e.seq > last)].slice(-400);
  else if (wasLive) void loadEventsAround(update.head, true);
  if (wasLive) {
    app.at = update.head;
    app.live = true;
    ui.range.value = String(update.head);
    app.world = update.world;
    renderWorld();
    renderEvents(nav);
    scheduleHistoryRefresh();
  } else {
    renderMoment();
    renderEvents(nav);
  }
}

function renderWorld() {
  renderMoment();
  renderStateOptions();
  renderList(nav);
  renderNodes(ui.nodes, app.world);
  renderStorage(ui.storage, app.world);
  renderPair(nav);
}

async function start() {
  renderPair(nav);
  clear(
    ui.event,
    h(
      'p',
      { class: 'hint' },
      'Click an event to see its payload and the chain of causes that led to it.',
    ),
  );
  try {
    const meta = await getJson<Meta>('/api/meta');
    app.meta = meta;
    app.head = meta.head;
    app.at = meta.head;
    renderHeader();
    renderMarks();
    ui.range.value = String(meta.head);
    await loadWorld(meta.head);
    await loadVerdict();
    const first = app.world?.pairs.find((p) => p.uncertain || p.failing) ?? app.world?.pairs[0];
    if (first !== undefined) await selectPair(first.id);
  } catch (error) {
    showProblem(`could not load the log: ${(error as Error).message}`);
  }
  connect();
}

void start();
