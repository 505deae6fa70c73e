/// <reference lib="dom" />
/**
 * The selected pair on the right: its statechart with the current state lit, what it may
 * take next, its state, operations and backoffs now, and its transitions.
 */
import type { Chart, PairKind, PairRow, Transition } from '../protocol.js';
import { type DrawnChart, layoutChart } from './chart.js';
import { clear, formatTime, getJson, h, stateTone } from './dom.js';
import { renderStateOptions } from './pair-list.js';
import { app, knownStates, type Navigation, ui } from './state.js';
import { seqLink } from './timeline.js';

function pairLabel(p: PairRow): string {
  return p.kind === 'attachment'
    ? `${p.volume} @ ${p.node}`
    : `${p.volume} × ${p.podName ?? p.pod ?? '?'}`;
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

function contextFields(pair: PairRow): HTMLElement[] {
  return pair.kind === 'attachment'
    ? [...field('devicePath', pair.devicePath), ...field('deviceMountPath', pair.deviceMountPath)]
    : [
        ...field('pod', `${pair.podName ?? ''} (${pair.pod ?? ''})`),
        ...field('outer volume name', pair.outerVolumeSpecName),
        ...field('remount required', pair.remountRequired ? 'yes' : 'no'),
      ];
}

function operationsList(nav: Navigation, pair: PairRow): HTMLElement | string {
  if (pair.operations.length === 0) return 'none';
  return h(
    'ul',
    { class: 'plain' },
    ...pair.operations.map((o) =>
      h(
        'li',
        {},
        seqLink(nav, o.startedSeq, o.opId),
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

function transitionsList(
  nav: Navigation,
  transitions: Transition[],
  lastTransition: Transition | undefined,
) {
  return h(
    'ol',
    { class: 'transitions', 'data-testid': 'transitions' },
    ...transitions.map((t) =>
      h(
        'li',
        { class: `${t.seq > app.at ? 'future' : ''}${t === lastTransition ? ' current' : ''}` },
        seqLink(nav, t.seq, `#${t.seq}`, { class: 'seq' }),
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

/** The selected pair at the moment, or a hint when none is selected or it does not exist yet. */
export function renderPair(nav: Navigation) {
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
  const list = transitionsList(nav, transitions, lastTransition);
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
        ...field('operations', operationsList(nav, pair)),
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
