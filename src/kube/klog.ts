/**
 * `vole import --kubelet-log NODE=FILE --controller-log FILE`: the volume operations a
 * kubelet or a kube-controller-manager wrote in its own klog text, as NodeOperationObserved
 * events. A line is `Lmmdd hh:mm:ss.uuuuuu PID file.go:N] MSG`, MSG either printf text or
 * the structured form `"msg" key="value" ...`. The messages are those Kubernetes builds
 * in pkg/volume/util/operationexecutor (GenerateMsgDetailed: `PREFIX for volume "SPEC"
 * (UniqueName: "U") pod "P" (UID: "X")`, or `from node "N"` / `on node "N"`), logged by
 * the kubelet's volumemanager reconciler (`operationExecutor.MountVolume started`), the
 * operation generator (`MountVolume.SetUp succeeded`), nestedpendingoperations for a
 * failure (`Operation for ... failed. No retries permitted until ... Error: DETAIL`) and
 * the attach/detach controller's reconciler (`attacherDetacher.AttachVolume started`).
 *
 * klog writes no year: the caller gives it. Pure: lines in, events and counts out.
 */
import type { NewEvent } from '../events/index.js';

/** A klog header and its message: the message unquoted, and the structured form's keys. */
export interface KlogLine {
  readonly severity: 'I' | 'W' | 'E' | 'F';
  readonly month: number;
  readonly day: number;
  /** hh:mm:ss.uuuuuu as written. */
  readonly time: string;
  readonly message: string;
  readonly keys: ReadonlyMap<string, string>;
}

const header = /^([IWEF])(\d{2})(\d{2}) (\d{2}:\d{2}:\d{2}\.\d{6})\s+\d+ [^\]\s]+:\d+\] (.*)$/;

/** A Go-quoted string at `at` (its `"` included): its text and where it ends. */
function quoted(s: string, at: number): { text: string; end: number } | undefined {
  let text = '';
  for (let i = at + 1; i < s.length; i++) {
    const c = s[i];
    if (c === '"') return { text, end: i + 1 };
    if (c !== '\\') {
      text += c;
      continue;
    }
    const n = s[++i];
    text += n === 'n' ? '\n' : n === 't' ? '\t' : (n ?? '');
  }
  return undefined;
}

/** A bare, bracketed (`[...]`, `{...}`) or quoted value at `at`, and where it ends. */
function valueAt(s: string, at: number): { text: string; end: number } | undefined {
  if (s[at] === '"') return quoted(s, at);
  let depth = 0;
  for (let i = at; i < s.length; i++) {
    const c = s[i];
    if (c === '"') {
      const q = quoted(s, i);
      if (q === undefined) return undefined;
      i = q.end - 1;
    } else if (c === '[' || c === '{') depth++;
    else if (c === ']' || c === '}') depth--;
    else if (c === ' ' && depth <= 0) return { text: s.slice(at, i), end: i };
  }
  return { text: s.slice(at), end: s.length };
}

/** The `key=value` pairs after a structured message; undefined if they do not parse. */
function keysOf(s: string): Map<string, string> | undefined {
  const keys = new Map<string, string>();
  let i = 0;
  while (i < s.length) {
    if (s[i] === ' ') {
      i++;
      continue;
    }
    const eq = s.indexOf('=', i);
    if (eq < 0) return undefined;
    const v = valueAt(s, eq + 1);
    if (v === undefined) return undefined;
    keys.set(s.slice(i, eq), v.text);
    i = v.end;
  }
  return keys;
}

/** One klog line, or undefined when it is none (no header, a broken quote). */
export function parseKlogLine(line: string): KlogLine | undefined {
  const m = header.exec(line.trimEnd());
  if (m === null) return undefined;
  const [, severity, month, day, time, body] = m as unknown as [
    string,
    string,
    string,
    string,
    string,
    string,
  ];
  let message = body;
  let keys = new Map<string, string>();
  if (body.startsWith('"')) {
    const q = quoted(body, 0);
    const rest = q === undefined ? undefined : keysOf(body.slice(q.end));
    if (q === undefined || rest === undefined) return undefined;
    message = q.text;
    keys = rest;
  }
  return {
    severity: severity as KlogLine['severity'],
    month: Number(month),
    day: Number(day),
    time,
    message: message.trimEnd(),
    keys,
  };
}

/** What one operation line says, before it is placed in time and on a node. */
export interface VolumeOperationLine {
  readonly operation: string;
  readonly outcome: 'started' | 'succeeded' | 'failed';
  readonly volume: string;
  readonly volumeSpecName?: string;
  readonly pod?: { uid?: string; namespace?: string; name?: string };
  readonly node?: string;
  readonly error?: string;
}

/** `PREFIX OUTCOME for volume "SPEC" DETAIL`: GenerateMsgDetailed's shape. */
const detailed =
  /^([A-Za-z]+(?:\.[A-Za-z]+)?) (started|succeeded|failed)(?: \(controllerAttachDetachEnabled (?:true|false)\))? for volume "((?:[^"\\]|\\.)*)" ?(.*)$/s;
const uniqueName = /\(UniqueName: "((?:[^"\\]|\\.)*)"\)/;
const podOf = /pod "((?:[^"\\]|\\.)*)" \(UID: "((?:[^"\\]|\\.)*)"\)/;
const nodeOf = /(?:from|on) node "((?:[^"\\]|\\.)*)"/;
const innerSpec = /InnerVolumeSpecName "((?:[^"\\]|\\.)*)"/;
/** nestedpendingoperations' (and exponentialbackoff's) failure line: the detail after `Error: `. */
const failedOperation = /^Operation for ".*" failed\. No retries permitted until .*? Error: (.*)$/s;
/** The kubelet's VerifyControllerAttachedVolume reports its success in these words. */
const controllerAttach = /^Controller attach succeeded for volume "((?:[^"\\]|\\.)*)" ?(.*)$/s;

/** A pod named by a structured line's `pod="ns/name"` key. */
function podKey(keys: ReadonlyMap<string, string>): { namespace?: string; name?: string } {
  const ref = keys.get('pod');
  if (ref === undefined) return {};
  const slash = ref.indexOf('/');
  return slash < 0 ? { name: ref } : { namespace: ref.slice(0, slash), name: ref.slice(slash + 1) };
}

/** The volume, pod and node a detailed message's tail names, and its error suffix. */
function detail(
  spec: string,
  tail: string,
  keys: ReadonlyMap<string, string>,
): Omit<VolumeOperationLine, 'operation' | 'outcome'> | undefined {
  const volume = uniqueName.exec(tail)?.[1] ?? (spec.includes('/') ? spec : undefined);
  if (volume === undefined) return undefined;
  const p = podOf.exec(tail);
  const inner = innerSpec.exec(tail)?.[1];
  const named = podKey(keys);
  const podName = p !== null && p[1] !== p[2] ? p[1] : named.name;
  const pod =
    p === null && named.name === undefined
      ? undefined
      : {
          ...(p === null ? {} : { uid: p[2] }),
          ...(named.namespace === undefined ? {} : { namespace: named.namespace }),
          ...(podName === undefined ? {} : { name: podName }),
        };
  const specName = inner ?? (spec !== volume && spec !== 'nil' ? spec : undefined);
  const colon = tail.indexOf(' : ');
  const error = keys.get('err') ?? (colon < 0 ? undefined : tail.slice(colon + 3).trim());
  const node = nodeOf.exec(tail)?.[1];
  return {
    volume,
    ...(specName === undefined ? {} : { volumeSpecName: specName }),
    ...(pod === undefined ? {} : { pod }),
    ...(node === undefined ? {} : { node }),
    ...(error === undefined || error === '' ? {} : { error: error.slice(0, 4096) }),
  };
}

/** The attach/detach controller's reconciler: `attacherDetacher.AttachVolume started` key=value. */
function controllerStart(line: KlogLine): VolumeOperationLine | undefined {
  const m = /^attacherDetacher\.(AttachVolume|DetachVolume) (started|failed to start)/.exec(
    line.message,
  );
  const volume = line.keys.get('volumeName');
  if (m === null || volume === undefined) return undefined;
  const node = line.keys.get('nodeName') ?? line.keys.get('node');
  const error = line.keys.get('err');
  return {
    operation: `attacherDetacher.${m[1]}`,
    outcome: m[2] === 'started' ? 'started' : 'failed',
    volume,
    ...(node === undefined ? {} : { node }),
    ...(error === undefined ? {} : { error }),
  };
}

/** The volume operation a klog line reports, or undefined when it reports none. */
export function volumeOperationOf(line: KlogLine): VolumeOperationLine | undefined {
  const started = controllerStart(line);
  if (started !== undefined) return started;
  const failure = failedOperation.exec(line.message);
  const message = failure === null ? line.message : (failure[1] ?? '');
  const attached = controllerAttach.exec(message);
  if (attached !== null) {
    const d = detail(attached[1] ?? '', attached[2] ?? '', line.keys);
    if (d === undefined) return undefined;
    return { operation: 'VerifyControllerAttachedVolume', outcome: 'succeeded', ...d };
  }
  const m = detailed.exec(message);
  if (m === null) return undefined;
  const [, operation = '', outcome = '', spec = '', tail = ''] = m;
  const d = detail(spec, tail, line.keys);
  if (d === undefined) return undefined;
  return { operation, outcome: outcome as VolumeOperationLine['outcome'], ...d };
}

export interface KlogImportCounts {
  /** Lines read (blank ones not counted). */
  lines: number;
  /** Lines that became a NodeOperationObserved. */
  used: number;
  /** klog lines about something else. */
  other: number;
  /** Lines that are no klog line (no header, a broken quote), with the first few. */
  unreadable: number;
  readonly problems: string[];
}

/** One log file of one component: its lines, and for a kubelet the node it ran on. */
export interface KlogSource {
  readonly component: 'kubelet' | 'kube-controller-manager';
  readonly file: string;
  readonly lines: readonly string[];
  /** The kubelet's node (NODE of --kubelet-log NODE=FILE). */
  readonly node?: string;
}

/**
 * The time of a klog line in a given year, as UTC (klog writes the local time with no zone
 * and no year). A line more than half a year after `startMs` belongs to the year before (a
 * log begun in December, read with the year of an audit log begun in January); one more
 * than half a year before it, to the year after.
 */
export function klogTime(
  line: KlogLine,
  year: number,
  startMs?: number,
): { ms: number; at: string } {
  const at = (y: number) =>
    `${String(y).padStart(4, '0')}-${String(line.month).padStart(2, '0')}-${String(line.day).padStart(2, '0')}T${line.time}Z`;
  let y = year;
  const half = 183 * 86_400_000;
  if (startMs !== undefined) {
    const ms = Date.parse(at(y));
    if (ms - startMs > half) y--;
    else if (startMs - ms > half) y++;
  }
  const stamp = at(y);
  return { ms: Math.floor(Date.parse(stamp)), at: stamp };
}

const problemsKept = 10;

/** The NodeOperationObserved events of one klog file, in its order; `counts` is filled in. */
export function klogEvents(
  source: KlogSource,
  year: number,
  counts: KlogImportCounts,
  startMs?: number,
): NewEvent[] {
  const events: NewEvent[] = [];
  source.lines.forEach((text, index) => {
    if (text.trim() === '') return;
    counts.lines++;
    const line = parseKlogLine(text);
    if (line === undefined) {
      counts.unreadable++;
      if (counts.problems.length < problemsKept)
        counts.problems.push(`${source.file}:${index + 1}: ${text.slice(0, 120)}`);
      return;
    }
    const op = volumeOperationOf(line);
    if (op === undefined) {
      counts.other++;
      return;
    }
    const time = klogTime(line, year, startMs);
    if (!Number.isFinite(time.ms) || time.ms < 0) {
      counts.unreadable++;
      if (counts.problems.length < problemsKept)
        counts.problems.push(`${source.file}:${index + 1}: no such time: ${text.slice(0, 120)}`);
      return;
    }
    counts.used++;
    const { node: named, ...rest } = op;
    events.push({
      tsMs: time.ms,
      type: 'NodeOperationObserved',
      component: source.component,
      node: source.node ?? named ?? '',
      ...rest,
      logged: { file: source.file, line: index + 1, at: time.at },
    });
  });
  return events;
}

/**
 * Merges runs of events each in time order into one: ties keep the runs' order (the audit
 * log first), and each run's own order is kept even where its times step back.
 */
export function mergeInTime(runs: readonly (readonly NewEvent[])[]): NewEvent[] {
  const at = runs.map(() => 0);
  const out: NewEvent[] = [];
  for (;;) {
    let best = -1;
    for (let r = 0; r < runs.length; r++) {
      const e = runs[r]?.[at[r] ?? 0];
      if (e === undefined) continue;
      const b = best < 0 ? undefined : runs[best]?.[at[best] ?? 0];
      if (b === undefined || e.tsMs < b.tsMs) best = r;
    }
    if (best < 0) return out;
    const i = at[best] ?? 0;
    const e = runs[best]?.[i];
    if (e !== undefined) out.push(e);
    at[best] = i + 1;
  }
}
