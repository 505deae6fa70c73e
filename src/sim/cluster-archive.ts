/**
 * Every row the controller log ever held in the simulated store, by seq, taken from the
 * store's changes as they commit (the harness's view, not a client's): compaction deletes
 * segments from the store, never from here. A seq written twice with different rows is an
 * event lost, at once; the checks compare each term's view and the store's log with it.
 */
import type { ClusterKeys } from '../cluster/keys.js';
import { eventCodec, type VoleEvent } from '../events/index.js';
import { decodeRow } from '../log/codec.js';
import type { EventRow } from '../log/statements.js';
import type { StoreChange } from './store-sim.js';

const partOf = /\+(\d{4})\/(\d{4})$/;

/** The rows a segment value holds (one JSON row a line). */
function segmentRows(value: string): string[] {
  return value.split('\n');
}

/** A row's seq: its first column (`[seq,tsMs,…]`), read without parsing the row. */
function seqOfRow(row: string): number {
  const seq = Number(row.slice(1, row.indexOf(',')));
  if (!Number.isSafeInteger(seq)) throw new Error(`not a log row: ${row.slice(0, 40)}`);
  return seq;
}

export function decodeLogRow(row: string): VoleEvent {
  return decodeRow(eventCodec, JSON.parse(row) as EventRow);
}

export class LogArchive {
  readonly rows = new Map<number, string>();
  /** The rows from seq 1 hold no gap up to this seq. */
  private contiguous = 0;
  /** Rows in parts, by the key of their first part: the parts seen so far. */
  private readonly parts = new Map<string, string[]>();

  constructor(
    private readonly keys: ClusterKeys,
    private readonly fail: (message: string) => void,
  ) {}

  take(change: StoreChange): void {
    if (change.kv === undefined || !change.key.startsWith(this.keys.log.segments)) return;
    const value = change.kv.value.toString();
    const part = partOf.exec(change.key);
    if (part === null) {
      for (const row of segmentRows(value)) this.record(row);
      return;
    }
    const base = change.key.slice(0, part.index);
    const seen = Number(part[1]) === 0 ? [] : (this.parts.get(base) ?? []);
    seen.push(value);
    if (seen.length < Number(part[2])) return void this.parts.set(base, seen);
    this.parts.delete(base);
    this.record(seen.join(''));
  }

  private record(row: string): void {
    const seq = seqOfRow(row);
    const before = this.rows.get(seq);
    if (before !== undefined && before !== row)
      this.fail(
        `the controller log's seq ${seq} was written twice, differently: an event was lost`,
      );
    if (before !== undefined) return;
    this.rows.set(seq, row);
    while (this.rows.has(this.contiguous + 1)) this.contiguous++;
  }

  /** How far the rows from seq 1 go without a gap. */
  get head(): number {
    return this.contiguous;
  }

  /** The rows from seq 1 while they have no gap. */
  get prefix(): string[] {
    const out: string[] = [];
    for (let seq = 1; seq <= this.contiguous; seq++) out.push(this.rows.get(seq)!);
    return out;
  }
}
