/**
 * Where a CSI pod's time goes: a timestamp per stage of its disk volume, from the engine's
 * own events (append of OperationStarted, CallStarted, CallSucceeded, OperationFinished)
 * and from the transport (RPC sent, answer received), folded into the gaps between
 * consecutive stages. The bench prints each gap's p50 and p99, so a slow step shows by name.
 */
import { PerformanceObserver } from 'node:perf_hooks';
import type { CsiRpc } from '../../src/csi/proto.js';
import type { CsiTransport } from '../../src/csi/transport.js';
import type { VoleEvent } from '../../src/events/index.js';
import { quantile } from './util.js';

/** A stage's name: `<op>.<event>` for engine events, `rpc.<method>.sent|answer` for the wire. */
type Stage = string;

export class StageTrace {
  /** Per volume: stage → time (performance.now()). */
  private readonly byVolume = new Map<string, Map<Stage, number>>();
  private readonly podOf = new Map<string, string>();
  private readonly opOf = new Map<string, { op: string; volume: string }>();
  private readonly addedAt = new Map<string, number>();
  /**
   * @param keyOf a volume's key from its unique name; RPCs are keyed by their volume_id,
   * so for a CSI volume the key is its handle.
   */
  constructor(private readonly keyOf: (volume: string) => string) {}

  podAdded(uid: string, atMs: number): void {
    this.addedAt.set(uid, atMs);
  }

  /** An engine listener: records the stages of operations on the volumes `volumeOfInterest` picks. */
  event(event: VoleEvent, volumeOfInterest: (volume: string) => boolean): void {
    const now = performance.now();
    if (event.type === 'OperationStarted') {
      if (!volumeOfInterest(event.volume)) return;
      const volume = this.keyOf(event.volume);
      this.opOf.set(event.opId, { op: event.op, volume });
      if (event.pod !== undefined) this.podOf.set(volume, event.pod);
      this.mark(volume, `${event.op}.OperationStarted`, now);
      return;
    }
    if (!('opId' in event)) return;
    const op = this.opOf.get(event.opId as string);
    if (op === undefined) return;
    if (event.type === 'CallStarted' || event.type === 'CallSucceeded')
      this.mark(op.volume, `${event.call}.${event.type}`, now);
    else if (event.type === 'OperationFinished')
      this.mark(op.volume, `${op.op}.OperationFinished`, now);
  }

  /** The transport, with the moment each RPC is handed to gRPC and answered recorded. */
  wrap(transport: CsiTransport): CsiTransport {
    return {
      call: async <Res>(rpc: CsiRpc, request: object, opts: { deadlineMs: number }) => {
        const volume = (request as { volume_id?: string }).volume_id;
        if (volume !== undefined) this.mark(volume, `rpc.${rpc}.sent`, performance.now());
        const response = await transport.call<Res>(rpc, request, opts);
        if (volume !== undefined) this.mark(volume, `rpc.${rpc}.answer`, performance.now());
        return response;
      },
      close: () => transport.close(),
    };
  }

  private mark(volume: string, stage: Stage, atMs: number): void {
    let stages = this.byVolume.get(volume);
    if (stages === undefined) this.byVolume.set(volume, (stages = new Map()));
    if (!stages.has(stage)) stages.set(stage, atMs);
  }

  /** Each gap between consecutive stages (in time order per pod), its p50 and p99 in ms. */
  gaps(): { from: Stage; to: Stage; p50Ms: number; p99Ms: number; pods: number }[] {
    const samples = new Map<string, number[]>();
    const order: string[] = [];
    for (const [volume, stages] of this.byVolume) {
      const uid = this.podOf.get(volume);
      const added = uid === undefined ? undefined : this.addedAt.get(uid);
      if (added === undefined) continue;
      const points = [['pod added', added] as const, ...stages].sort((a, b) => a[1] - b[1]);
      for (let i = 1; i < points.length; i++) {
        const key = `${points[i - 1]![0]} → ${points[i]![0]}`;
        if (!samples.has(key)) {
          samples.set(key, []);
          order.push(key);
        }
        samples.get(key)!.push(points[i]![1] - points[i - 1]![1]);
      }
    }
    return order.map((key) => {
      const values = samples.get(key)!;
      const [from, to] = key.split(' → ') as [string, string];
      return {
        from,
        to,
        p50Ms: quantile(values, 0.5),
        p99Ms: quantile(values, 0.99),
        pods: values.length,
      };
    });
  }
}

/** The GC pauses of the main thread (ms each) while `watch` runs. */
export async function withGcPauses<T>(
  watch: () => Promise<T>,
): Promise<{ value: T; gc: { pausesMs: number[] } }> {
  const pausesMs: number[] = [];
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) pausesMs.push(entry.duration);
  });
  observer.observe({ entryTypes: ['gc'] });
  try {
    return { value: await watch(), gc: { pausesMs } };
  } finally {
    observer.disconnect();
  }
}
