/// <reference lib="dom" />
/**
 * The judge's verdict on a cluster's log, drawn on the timeline and in its panel: a red
 * mark over the scrubber at each event that broke a safety rule, an amber span under it
 * for each pod's wait (its title the condition that held the pod), and the panel listing
 * both, each a link to its event. Hidden for a kubelet's log, which is not judged.
 */
import type { VerdictPayload } from '../protocol.js';
import { clear, formatTime, h } from './dom.js';
import { app, type Navigation, ui } from './state.js';
import { seqLink } from './timeline.js';

/** Where `seq` sits on the scrubber, in percent. */
function place(seq: number): number {
  const first = app.meta?.firstSeq ?? 0;
  const span = Math.max(1, app.head - first);
  return Math.max(0, Math.min(100, ((seq - first) / span) * 100));
}

function drawOnTrack(nav: Navigation, verdict: VerdictPayload) {
  const marks = verdict.violations.map((v) => {
    const mark = h('span', {
      class: 'verdict-mark',
      'data-testid': 'verdict-mark',
      'data-seq': v.atSeq,
      title: `VIOLATION ${v.rule} at seq ${v.atSeq}: ${v.message}`,
      onclick: () => void nav.selectEvent(v.atSeq),
    });
    mark.style.left = `${place(v.atSeq)}%`;
    return mark;
  });
  const spans = verdict.waits.map((w) => {
    const left = place(w.waitedFromSeq);
    const span = h('span', {
      class: 'wait-span',
      'data-testid': 'wait-span',
      'data-pod': w.pod,
      title: w.text.join('\n'),
      onclick: () => void nav.selectEvent(w.waitedFromSeq),
    });
    span.style.left = `${left}%`;
    span.style.width = `${Math.max(0.5, place(w.endedAtSeq ?? app.head) - left)}%`;
    return span;
  });
  clear(ui.verdictMarks, ...spans, ...marks);
}

function panel(nav: Navigation, verdict: VerdictPayload) {
  const origin = app.meta?.firstTsMs ?? 0;
  const violations = verdict.violations.map((v) =>
    h(
      'li',
      { class: 'violation', 'data-testid': 'verdict-violation', 'data-seq': v.atSeq },
      seqLink(nav, v.atSeq, `#${v.atSeq}`),
      ` ${v.rule}: ${v.message}`,
    ),
  );
  const forced = verdict.forcedDetaches.map((f) =>
    h(
      'li',
      { class: 'forced' },
      seqLink(nav, f.atSeq, `#${f.atSeq}`),
      ` forced detach of ${f.volume} from ${f.node} (${f.reason === 'timeout' ? 'maxWaitForUnmountDuration passed' : 'out-of-service taint'})`,
    ),
  );
  const waits = verdict.waits.map((w) =>
    h(
      'li',
      { class: 'wait', 'data-testid': 'verdict-wait', 'data-pod': w.pod },
      seqLink(nav, w.waitedFromSeq, `#${w.waitedFromSeq}`),
      ` ${w.pod} waited ${formatTime(w.waitedFromTsMs, origin)}–${w.endedAtTsMs === null ? 'end' : formatTime(w.endedAtTsMs, origin)}`,
      h('div', { class: 'held', 'data-testid': 'verdict-held' }, w.text[1]?.trim() ?? ''),
    ),
  );
  return [
    h(
      'summary',
      { class: 'counts', 'data-testid': 'verdict-summary' },
      `verdict: ${verdict.violations.length} violation(s), ${verdict.forcedDetaches.length} forced detach(es), ${verdict.waits.length} wait(s)`,
    ),
    h('ul', { class: 'verdict' }, ...violations, ...forced, ...waits),
  ];
}

export function renderVerdict(nav: Navigation) {
  const verdict = app.verdict;
  ui.verdict.hidden = verdict === undefined || !verdict.judged;
  if (verdict === undefined || !verdict.judged) {
    clear(ui.verdictMarks);
    return;
  }
  drawOnTrack(nav, verdict);
  const broken = verdict.violations.length > 0;
  clear(ui.verdict, ...panel(nav, verdict));
  if (broken && !violationsShown) ui.verdict.open = true;
  violationsShown ||= broken;
}

/** Whether the panel was opened for violations once (after that, the reader decides). */
let violationsShown = false;
