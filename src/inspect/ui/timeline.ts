/// <reference lib="dom" />
/**
 * The log's side of the page: the header, the connection status, the scrubber's moment and
 * marks, the events around the moment and the selected event with its chain of causes.
 */
import type { CauseStep } from '../protocol.js';
import { clear, formatTime, h } from './dom.js';
import { app, type Navigation, ui } from './state.js';

export function renderStatus() {
  ui.status.className = `status ${app.connected ? 'on' : 'off'}`;
  ui.status.textContent = app.connected ? (app.live ? 'live' : 'paused') : 'reconnecting…';
  ui.liveButton.classList.toggle('on', app.live);
}

export function renderHeader() {
  const meta = app.meta;
  if (meta === undefined) return;
  ui.file.textContent = meta.file;
  document.title = `${meta.file} — vole inspector`;
  ui.node.textContent = `${meta.title}${meta.version === '' ? '' : ` · vole ${meta.version}`}`;
  ui.headInfo.textContent = `${app.head} events`;
  ui.range.min = String(Math.min(meta.firstSeq, app.head));
  ui.range.max = String(app.head);
  renderStatus();
}

export function renderMoment() {
  const meta = app.meta;
  if (meta === undefined) return;
  const ts = app.world !== undefined && app.world.seq === app.at ? app.world.view.tsMs : undefined;
  ui.moment.textContent = `seq ${app.at} / ${app.head}${ts === undefined ? '' : `  ${formatTime(ts, meta.firstTsMs, true)}`}`;
  renderStatus();
}

export function renderMarks() {
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

/** A link that selects the event at `seq`. */
export function seqLink(
  nav: Navigation,
  seq: number,
  text: string,
  attrs: Record<string, string | number> = {},
) {
  return h(
    'a',
    {
      href: '#',
      ...attrs,
      onclick: (e: Event) => {
        e.preventDefault();
        void nav.selectEvent(seq);
      },
    },
    text,
  );
}

export function renderEvents(nav: Navigation) {
  const meta = app.meta;
  // The events that broke a safety rule, as the verdict found them.
  const broke = new Set(app.verdict?.violations.map((v) => v.atSeq) ?? []);
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
              class: `tone-${e.tone}${e.seq === app.at ? ' at' : ''}${e.seq > app.at ? ' future' : ''}${e.seq === app.selectedEvent ? ' selected' : ''}${broke.has(e.seq) ? ' violation' : ''}`,
              'data-seq': e.seq,
              onclick: () => void nav.selectEvent(e.seq),
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

export function renderEvent(nav: Navigation, event: Record<string, unknown>, chain: CauseStep[]) {
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
              : seqLink(nav, stepItem.seq, `#${stepItem.seq}`, { 'data-cause': stepItem.seq }),
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
