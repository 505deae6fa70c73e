/// <reference lib="dom" />
/** The pair list on the left: the pairs at the moment that pass the filters, and the counts. */
import type { PairRow } from '../protocol.js';
import { clear, h, stateTone } from './dom.js';
import { app, knownStates, type Navigation, ui } from './state.js';

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

/** The state filter's options: the states at the moment and every state of both charts. */
export function renderStateOptions() {
  const states = new Set<string>();
  for (const p of app.world?.pairs ?? []) states.add(p.state);
  for (const s of knownStates) states.add(s);
  const current = app.filters.state;
  clear(
    ui.stateSelect,
    h('option', { value: '' }, 'any state'),
    ...[...states].sort().map((s) => h('option', { value: s, selected: s === current }, s)),
  );
}

export function renderList(nav: Navigation) {
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
          onclick: () => void nav.selectPair(p.id),
          onkeydown: (e: Event) => {
            if ((e as KeyboardEvent).key === 'Enter') void nav.selectPair(p.id);
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
