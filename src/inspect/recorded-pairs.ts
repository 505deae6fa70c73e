/**
 * The pairs of a recorded cluster, which no core decided: each VolumeAttachment as the API
 * server showed it (attaching until status.attached, detaching once deleted, its
 * attachError), and each attachment and mount the nodes' own logs showed
 * (NodeOperationObserved, `vole import --kubelet-log/--controller-log`). A VolumeAttachment
 * is the API's word on an attachment; the logs add the ones it never had (volumes the
 * kubelet attaches or that need no attach) and every mount.
 */
import type { VoleEvent } from '../events/index.js';
import { NodeLogView, RecordedFacts } from '../postmortem/index.js';
import type { PairRow } from './protocol.js';

type Seen = Pick<PairRow, 'kind' | 'volume' | 'node' | 'pod' | 'state' | 'firstSeq'> & {
  readonly lastError: string | null;
};

function row(seen: Seen, podNames: ReadonlyMap<string, string>): PairRow {
  const id = `${seen.kind}|${seen.volume}|${seen.pod ?? seen.node}`;
  return {
    id,
    ...seen,
    podName: seen.pod === null ? null : (podNames.get(seen.pod) ?? null),
    present: true,
    uncertain: false,
    failing: seen.lastError !== null,
    devicePath: '',
    deviceMountPath: '',
    outerVolumeSpecName: '',
    remountRequired: false,
    operations: [],
    backoffs: [],
  };
}

/** The pairs at the end of `events` (a recorded log read up to the moment shown). */
export function recordedPairs(events: Iterable<VoleEvent>): PairRow[] {
  const facts = new RecordedFacts();
  const logs = new NodeLogView();
  const firstSeen = new Map<string, number>();
  const podNames = new Map<string, string>();
  for (const event of events) {
    facts.apply(event);
    const t = logs.step(event, '');
    if (t !== undefined) {
      const key = `${t.pair}|${t.volume}|${t.pod ?? t.node}`;
      if (!firstSeen.has(key)) firstSeen.set(key, event.seq);
    }
    if (event.type === 'PodUpserted' && event.pod.metadata.uid !== undefined) {
      const { uid, namespace = 'default', name } = event.pod.metadata;
      podNames.set(uid, `${namespace}/${name}`);
    }
  }
  const rows = new Map<string, PairRow>();
  for (const va of facts.attachments.values()) {
    const volume = facts.uniqueNameOf(va.pv) ?? va.pv;
    const state = va.deleting !== null ? 'detaching' : va.attached ? 'attached' : 'attaching';
    const seen = { kind: 'attachment' as const, volume, node: va.node, pod: null, state };
    const r = row({ ...seen, firstSeq: va.since.seq, lastError: va.attachError }, podNames);
    rows.set(r.id, r);
  }
  for (const p of logs.pairs()) {
    const key = `${p.pair}|${p.volume}|${p.pod ?? p.node}`;
    if (rows.has(key)) continue;
    const seen = { kind: p.pair, volume: p.volume, node: p.node, pod: p.pod, state: p.state };
    rows.set(key, row({ ...seen, firstSeq: firstSeen.get(key) ?? 0, lastError: null }, podNames));
  }
  return [...rows.values()].sort(
    (x, y) =>
      x.volume.localeCompare(y.volume) ||
      (x.kind === y.kind ? 0 : x.kind === 'attachment' ? -1 : 1) ||
      (x.pod ?? '').localeCompare(y.pod ?? '') ||
      x.node.localeCompare(y.node),
  );
}
