/// <reference lib="dom" />
/**
 * The inspector page: the pair list (left), the selected pair's statechart and details
 * (right), the log's timeline with a scrubber and the selected event (bottom). It reads
 * the JSON API only, follows the log through Server-Sent Events, and writes nothing.
 */
import type {
  CauseStep,
  Chart,
  EventSummary,
  HeadUpdate,
  Meta,
  PairKind,
  PairRow,
  Transition,
  WorldPayload,
} from '../protocol.js';
import { produce } from 'immer';
import { type DrawnChart, layoutChart } from './chart.js';
import { clear, formatTime, getJson, h, stateTone } from './dom.js';
import { renderNodes } from './nodes.js';

interface Filters {
  volume: string;
  pod: string;
  node: string;
  state: string;
  problems: boolean;
}

const app = {
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
};

/** Every state of both machines, once their charts are loaded (the state filter's options). */
const knownStates = new Set<string>();

// ---------------------------------------------------------------- skeleton

const ui = {
  file: h('span', { class: 'file' }),
  node: h('span', { class: 'muted' }),
  status: h('span', { class: 'status', 'data-testid': 'status' }),
  headInfo: h('span', { class: 'muted', 'data-testid': 'head' }),
  counts: h('div', { class: 'counts' }),
  list: h('ul', { class: 'pairs', 'data-testid': 'pairs' }),
  nodes: h('div', { class: 'controller-side', 'data-testid': 'controller-side', hidden: true }),
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
  moment: h('span', { class: 'moment', 'data-testid': 'moment' }),
  liveButton: h(
    'button',
    { class: 'live', type: 'button', title: 'follow the log as it grows' },
    'live',
  ),
  events: h('div', { class: 'events', 'data-testid': 'events' }),
  event: h('div', { class: 'event-detail', 'data-testid': 'event-detail' }),
  problem: h('div', { class: 'problem', hidden: true }),
};

function filterInput(key: 'volume' | 'pod' | 'node', placeholder: string): HTMLInputElement {
  return h('input', {
    type: 'search',
    placeholder,
    'aria-label': `filter by ${key}`,
    'data-testid': `filter-${key}`,
    oninput: (e: Event) => {
      app.filters[key] = (e.target as HTMLInputElement).value.trim();
      renderList();
    },
  });
}

const stateSelect = h('select', {
  'aria-label': 'filter by state',
  'data-testid': 'filter-state',
  onchange: (e: Event) => {
    app.filters.state = (e.target as HTMLSelectElement).value;
    renderList();
  },
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
        stateSelect,
        h(
          'label',
          { class: 'check' },
          h('input', {
            type: 'checkbox',
            'data-testid': 'filter-problems',
            onchange: (e: Event) => {
              app.filters.problems = (e.target as HTMLInputElement).checked;
              renderList();
            },
          }),
          'uncertain or failing only',
        ),
      ),
      ui.counts,
      ui.list,
      ui.nodes,
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
      h('div', { class: 'track' }, ui.range, ui.marks),
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
    renderEvents();
    return;
  }
  const from = Math.max(1, seq - 60);
  const to = Math.min(app.head, seq + 60);
  app.events = await getJson<EventSummary[]>(`/api/events?from=${from}&to=${to}`);
  renderEvents();
}

async function selectEvent(seq: number, move = true) {
  app.selectedEvent = seq;
  if (move) moveTo(seq);
  renderEvents();
  clear(ui.event, h('p', { class: 'muted' }, `loading seq ${seq}…`));
  try {
    const [event, chain] = await Promise.all([
      getJson<Record<string, unknown>>(`/api/event?seq=${seq}`),
      getJson<CauseStep[]>(`/api/explain?seq=${seq}`),
    ]);
    if (app.selectedEvent !== seq) return;
    renderEvent(event, chain);
  } catch (error) {
    clear(ui.event, h('p', { class: 'error' }, (error as Error).message));
  }
}

async function selectPair(id: string) {
  app.selectedPair = id;
  renderList();
  renderPair();
  try {
    const transitions = await getJson<Transition[]>(`/api/history?pair=${encodeURIComponent(id)}`);
    if (app.selectedPair !== id) return;
    app.history = transitions;
    app.historyFor = id;
    renderPair();
  } catch (error) {
    showProblem((error as Error).message);
  }
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
    renderEvents();
    scheduleHistoryRefresh();
  } else {
    renderMoment();
    renderEvents();
  }
}

// ---------------------------------------------------------------- rendering

function renderStatus() {
  ui.status.className = `status ${app.connected ? 'on' : 'off'}`;
  ui.status.textContent = app.connected ? (app.live ? 'live' : 'paused') : 'reconnecting…';
  ui.liveButton.classList.toggle('on', app.live);
}

function renderHeader() {
  const meta = app.meta;
  if (meta === undefined) return;
  ui.file.textContent = meta.file;
  document.title = `${meta.file} — vole inspector`;
  ui.node.textContent = `node ${meta.node || '?'}${meta.version === '' ? '' : ` · vole ${meta.version}`}`;
  ui.headInfo.textContent = `${app.head} events`;
  ui.range.min = String(Math.min(meta.firstSeq, app.head));
  ui.range.max = String(app.head);
  renderStatus();
}

function renderMoment() {
  const meta = app.meta;
  if (meta === undefined) return;
  const ts = app.world !== undefined && app.world.seq === app.at ? app.world.view.tsMs : undefined;
  ui.moment.textContent = `seq ${app.at} / ${app.head}${ts === undefined ? '' : `  ${formatTime(ts, meta.firstTsMs, true)}`}`;
  renderStatus();
}

function renderMarks() {
  const meta = app.meta;
  if (meta === undefined) return;
  const span = Math.max(1, app.head - meta.firstSeq);
  const buckets = new Map<number, string>();
  for (const m of meta.marks) {
    const pct = Math.round(((m.seq - meta.firstSeq) / span) * 400) / 4;
    if (buckets.get(pct) !== 'failure') buckets.set(pct, m.tone);
  }
  clear(
    ui.marks,
    ...[...buckets].map(([pct, tone]) => {
      const mark = h('span', { class: `mark ${tone}` });
      mark.style.left = `${pct}%`;
      return mark;
    }),
  );
}

function pairLabel(p: PairRow): string {
  return p.kind === 'attachment'
    ? `${p.volume} @ ${p.node}`
    : `${p.volume} × ${p.podName ?? p.pod ?? '?'}`;
}

function visiblePairs(): PairRow[] {
  const f = app.filters;
  const has = (text: string | null, needle: string) =>
    needle === '' || (text ?? '').toLowerCase().includes(needle.toLowerCase());
  return (app.world?.pairs ?? []).filter(
    (p) =>
      has(p.volume, f.volume) &&
      (f.pod === '' || (p.kind === 'mount' && (has(p.pod, f.pod) || has(p.podName, f.pod)))) &&
      has(p.node, f.node) &&
      (f.state === '' || p.state === f.state || p.state.startsWith(`${f.state}.`)) &&
      (!f.problems || p.uncertain || p.failing),
  );
}

function renderStateOptions() {
  const states = new Set<string>();
  for (const p of app.world?.pairs ?? []) states.add(p.state);
  for (const s of knownStates) states.add(s);
  const current = app.filters.state;
  clear(
    stateSelect,
    h('option', { value: '' }, 'any state'),
    ...[...states].sort().map((s) => h('option', { value: s, selected: s === current }, s)),
  );
}

function renderList() {
  const pairs = visiblePairs();
  const all = app.world?.pairs ?? [];
  const uncertain = all.filter((p) => p.uncertain).length;
  const failing = all.filter((p) => p.failing).length;
  clear(
    ui.counts,
    h(
      'span',
      {},
      `${pairs.length === all.length ? all.length : `${pairs.length} of ${all.length}`} pairs`,
    ),
    uncertain > 0 ? h('span', { class: 'badge uncertain' }, `${uncertain} uncertain`) : null,
    failing > 0 ? h('span', { class: 'badge failing' }, `${failing} failing`) : null,
  );
  if (all.length === 0) {
    clear(
      ui.list,
      h('li', { class: 'empty' }, app.at === 0 ? 'the log is empty' : 'no pairs at this moment'),
    );
    return;
  }
  clear(
    ui.list,
    ...pairs.map((p) => {
      const tone = stateTone(p.state);
      const li = h(
        'li',
        {
          class: `pair ${p.kind}${p.uncertain ? ' is-uncertain' : ''}${p.failing ? ' is-failing' : ''}${p.present ? '' : ' gone'}${p.id === app.selectedPair ? ' selected' : ''}`,
          'data-pair': p.id,
          tabindex: 0,
          role: 'button',
          onclick: () => void selectPair(p.id),
          onkeydown: (e: Event) => {
            if ((e as KeyboardEvent).key === 'Enter') void selectPair(p.id);
          },
        },
        h('span', { class: 'kind', title: p.kind }, p.kind === 'attachment' ? 'A' : 'M'),
        h(
          'span',
          { class: 'names' },
          h('span', { class: 'volume' }, p.volume),
          h(
            'span',
            { class: 'sub' },
            p.kind === 'attachment'
              ? `node ${p.node}`
              : `pod ${p.podName ?? p.pod}${p.outerVolumeSpecName === '' ? '' : ` · ${p.outerVolumeSpecName}`}`,
          ),
        ),
        h(
          'span',
          { class: 'right-col' },
          h('span', { class: `state-badge ${tone}`, 'data-testid': 'pair-state' }, p.state),
          p.failing
            ? h('span', { class: 'flag failing', title: p.lastError ?? 'backoff' }, 'failing')
            : null,
        ),
      );
      return li;
    }),
  );
}

function renderWorld() {
  renderMoment();
  renderStateOptions();
  renderList();
  renderNodes(ui.nodes, app.world);
  renderPair();
}

function field(name: string, value: Node | string | number | null | undefined) {
  return [
    h('dt', {}, name),
    h(
      'dd',
      {},
      value === null || value === undefined || value === ''
        ? h('span', { class: 'muted' }, '—')
        : value,
    ),
  ];
}

let chartToken = 0;

async function drawChart(kind: PairKind): Promise<DrawnChart> {
  let drawn = app.charts.get(kind);
  if (drawn === undefined) {
    drawn = getJson<Chart>(`/api/chart?machine=${kind}`).then((chart) => {
      for (const n of chart.nodes) knownStates.add(n.id.slice(chart.root.length + 1));
      return layoutChart(chart);
    });
    app.charts.set(kind, drawn);
  }
  return drawn;
}

function renderNoPair() {
  clear(
    ui.pairHead,
    h(
      'h2',
      { class: 'muted' },
      app.selectedPair === null ? 'Select a pair' : 'This pair does not exist yet at this moment',
    ),
  );
  clear(
    ui.chart,
    h(
      'p',
      { class: 'hint' },
      'Pick an attachment (volume × node) or a mount (volume × pod) on the left to see its statechart, its state at the chosen moment, and its history.',
    ),
  );
  clear(ui.details);
}

function renderPairHead(pair: PairRow) {
  clear(
    ui.pairHead,
    h('span', { class: `kind big ${pair.kind}` }, pair.kind),
    h('h2', {}, pairLabel(pair)),
    h(
      'span',
      { class: `state-badge ${stateTone(pair.state)}`, 'data-testid': 'selected-state' },
      pair.state,
    ),
    pair.uncertain ? h('span', { class: 'flag uncertain' }, 'uncertain: may exist') : null,
    pair.failing ? h('span', { class: 'flag failing' }, 'failing') : null,
  );
}

/** What `state` may take next: each event once, with the states it may lead to. */
function nextList(drawn: DrawnChart, state: string): HTMLElement {
  const byEvent = new Map<string, { targets: Set<string>; guards: string[] }>();
  for (const t of drawn.next(state)) {
    const entry = byEvent.get(t.event) ?? { targets: new Set(), guards: [] };
    entry.targets.add(t.target);
    entry.guards.push(`${t.guard ?? 'otherwise'} → ${t.target}`);
    byEvent.set(t.event, entry);
  }
  if (byEvent.size === 0) return h('span', { class: 'muted' }, 'nothing');
  return h(
    'ul',
    { class: 'next', 'data-testid': 'next' },
    ...[...byEvent].map(([event, { targets, guards }]) =>
      h(
        'li',
        { title: guards.join('\n') }, // guards in the tooltip
        h('span', { class: 'event' }, event),
        '→',
        ...[...targets].map((target) =>
          h(
            'span',
            { class: `state-badge small ${stateTone(target)}` },
            target.split('.').pop() ?? target,
          ),
        ),
      ),
    ),
  );
}

/** The statechart with the current state lit; fills `nextEl` in once it is drawn. */
function renderChart(pair: PairRow, lastTransition: Transition | undefined, nextEl: HTMLElement) {
  const token = ++chartToken;
  void drawChart(pair.kind).then(
    (drawn) => {
      if (token !== chartToken) return;
      drawn.highlight(
        pair.state,
        lastTransition === undefined ? null : { from: lastTransition.from, to: lastTransition.to },
      );
      if (ui.chart.firstChild !== drawn.svg) clear(ui.chart, drawn.svg);
      nextEl.replaceWith(nextList(drawn, pair.state));
      renderStateOptions();
    },
    (error: unknown) =>
      clear(ui.chart, h('p', { class: 'error' }, `statechart: ${(error as Error).message}`)),
  );
}

/** A link that selects the event at `seq`. */
function seqLink(seq: number, text: string, attrs: Record<string, string | number> = {}) {
  return h(
    'a',
    {
      href: '#',
      ...attrs,
      onclick: (e: Event) => {
        e.preventDefault();
        void selectEvent(seq);
      },
    },
    text,
  );
}

function contextFields(pair: PairRow): HTMLElement[] {
  return pair.kind === 'attachment'
    ? [...field('devicePath', pair.devicePath), ...field('deviceMountPath', pair.deviceMountPath)]
    : [
        ...field('pod', `${pair.podName ?? ''} (${pair.pod ?? ''})`),
        ...field('outer volume name', pair.outerVolumeSpecName),
        ...field('remount required', pair.remountRequired ? 'yes' : 'no'),
      ];
}

function operationsList(pair: PairRow): HTMLElement | string {
  if (pair.operations.length === 0) return 'none';
  return h(
    'ul',
    { class: 'plain' },
    ...pair.operations.map((o) =>
      h(
        'li',
        {},
        seqLink(o.startedSeq, o.opId),
        ` ${o.op}${o.call === null ? '' : ` — in ${o.call}`}`,
      ),
    ),
  );
}

function backoffsList(pair: PairRow): HTMLElement | string {
  if (pair.backoffs.length === 0) return 'none';
  return h(
    'ul',
    { class: 'plain' },
    ...pair.backoffs.map((b) =>
      h(
        'li',
        {},
        `${b.op}: retry at ${formatTime(b.retryAtMs, app.meta?.firstTsMs ?? 0)} (${b.durationMs} ms)`,
        b.lastError === null ? null : h('div', { class: 'error' }, b.lastError),
      ),
    ),
  );
}

function transitionsList(transitions: Transition[], lastTransition: Transition | undefined) {
  return h(
    'ol',
    { class: 'transitions', 'data-testid': 'transitions' },
    ...transitions.map((t) =>
      h(
        'li',
        { class: `${t.seq > app.at ? 'future' : ''}${t === lastTransition ? ' current' : ''}` },
        seqLink(t.seq, `#${t.seq}`, { class: 'seq' }),
        h(
          'span',
          { class: 'tr' },
          h('span', { class: `state-badge small ${stateTone(t.from)}` }, t.from),
          ' → ',
          h('span', { class: `state-badge small ${stateTone(t.to)}` }, t.to),
        ),
        h('span', { class: 'because' }, t.because),
      ),
    ),
  );
}

function renderPair() {
  const pair = app.world?.pairs.find((p) => p.id === app.selectedPair);
  if (app.selectedPair === null || pair === undefined) {
    renderNoPair();
    return;
  }
  renderPairHead(pair);
  const lastTransition = [...app.history]
    .reverse()
    .find((t) => t.seq <= app.at && app.historyFor === pair.id);
  const nextEl = h('span', { class: 'muted' }, '…');
  renderChart(pair, lastTransition, nextEl);
  const transitions = app.historyFor === pair.id ? app.history : [];
  const list = transitionsList(transitions, lastTransition);
  clear(
    ui.details,
    h(
      'div',
      { class: 'card' },
      h('h3', {}, 'Now'),
      h(
        'dl',
        {},
        ...field('state', pair.state),
        ...contextFields(pair),
        ...field('operations', operationsList(pair)),
        ...field('backoff', backoffsList(pair)),
        ...field('why', h('pre', { class: 'why', 'data-testid': 'why' }, pair.why ?? 'not held')),
        ...field('first seen', `seq ${pair.firstSeq}`),
        ...field('may take', nextEl),
      ),
    ),
    h(
      'div',
      { class: 'card grow' },
      h('h3', {}, `Transitions${transitions.length === 0 ? '' : ` (${transitions.length})`}`),
      transitions.length === 0
        ? h('p', { class: 'muted' }, app.historyFor === pair.id ? 'none yet' : 'loading…')
        : list,
    ),
  );
  list.querySelector('.current')?.scrollIntoView({ block: 'nearest' });
}

function renderEvents() {
  const meta = app.meta;
  clear(
    ui.events,
    h(
      'table',
      {},
      h(
        'tbody',
        {},
        ...app.events.map((e) =>
          h(
            'tr',
            {
              class: `tone-${e.tone}${e.seq === app.at ? ' at' : ''}${e.seq > app.at ? ' future' : ''}${e.seq === app.selectedEvent ? ' selected' : ''}`,
              'data-seq': e.seq,
              onclick: () => void selectEvent(e.seq),
            },
            h('td', { class: 'seq' }, `#${e.seq}`),
            h('td', { class: 'time' }, formatTime(e.tsMs, meta?.firstTsMs ?? 0)),
            h('td', { class: 'type' }, e.type),
            h('td', { class: 'what' }, e.what),
          ),
        ),
      ),
    ),
  );
  const row = ui.events.querySelector('tr.at');
  if (row !== null) {
    const box = ui.events.getBoundingClientRect();
    const r = row.getBoundingClientRect();
    if (r.top < box.top || r.bottom > box.bottom)
      ui.events.scrollTop += r.top - box.top - box.height / 2;
  }
}

function renderEvent(event: Record<string, unknown>, chain: CauseStep[]) {
  const { seq, tsMs, type, ...payload } = event;
  clear(
    ui.event,
    h(
      'h3',
      {},
      `#${String(seq)} ${String(type)}`,
      h(
        'span',
        { class: 'muted' },
        `  ${formatTime(Number(tsMs), app.meta?.firstTsMs ?? 0, true)}`,
      ),
    ),
    h(
      'div',
      { class: 'causes', 'data-testid': 'causes' },
      h('h4', {}, 'Chain of causes'),
      h(
        'ol',
        {},
        ...chain.map((stepItem, i) =>
          h(
            'li',
            {},
            i === 0
              ? h('strong', {}, `#${stepItem.seq}`)
              : seqLink(stepItem.seq, `#${stepItem.seq}`, { 'data-cause': stepItem.seq }),
            ` ${stepItem.what}`,
            stepItem.link === null ? null : h('span', { class: 'link' }, `; ${stepItem.link}`),
          ),
        ),
      ),
    ),
    h('h4', {}, 'Payload'),
    h('pre', { class: 'payload' }, JSON.stringify(payload, null, 2)),
  );
}

// ---------------------------------------------------------------- start

async function start() {
  renderPair();
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
    const first = app.world?.pairs.find((p) => p.uncertain || p.failing) ?? app.world?.pairs[0];
    if (first !== undefined) await selectPair(first.id);
  } catch (error) {
    showProblem(`could not load the log: ${(error as Error).message}`);
  }
  connect();
}

void start();
