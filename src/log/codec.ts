/**
 * Events to rows and back. The codec (zod, in vole) validates an event when it is appended
 * and again when it is read back (docs/style.md rule 4); the store itself knows only the envelope.
 */
import { assert } from '../assert.js';
import type { EventRow } from './statements.js';

/** The fields the store reads itself; everything else goes to the `data` JSON column. */
export interface EventEnvelope {
  seq: number;
  tsMs: number;
  type: string;
}

/**
 * Validates an event object and returns it typed. Throws on an invalid event; the store
 * passes a throw through on append and wraps it in a LogReadError on read.
 */
export interface EventCodec<E extends EventEnvelope> {
  parse(raw: unknown): E;
  /**
   * Optional fast lane: true only when `raw` (plain objects, arrays and JSON primitives) is
   * a valid event exactly as it is, so that its JSON round trip reads back as the same
   * event. False is no verdict: the store then validates the round trip with `parse`.
   */
  accepts?(raw: unknown): boolean;
}

/**
 * The row for `event` at `seq`, validated in the form a reader will rebuild it (JSON round
 * trip included), so whatever append accepts reads back. Throws what the codec throws.
 */
export function encodeEvent<E extends EventEnvelope>(
  codec: EventCodec<E>,
  event: Omit<E, 'seq'>,
  seq: number,
): EventRow {
  // A stray seq on the input is dropped: the store assigns seqs.
  const { seq: _stray, tsMs, type, ...data } = event as Record<string, unknown>;
  assert(
    typeof tsMs === 'number' && Number.isSafeInteger(tsMs),
    () => `append: event for seq ${seq} has tsMs ${String(tsMs)}; it must be an integer (ms)`,
  );
  assert(
    typeof type === 'string' && type.length > 0,
    () => `append: event for seq ${seq} has no type`,
  );
  const row: EventRow = [seq, tsMs, type, JSON.stringify(data)];
  // `data` is this function's own copy: it takes the envelope for the fast lane's check.
  data.seq = seq;
  data.tsMs = tsMs;
  data.type = type;
  if (codec.accepts?.(data) !== true) decodeRow(codec, row);
  return row;
}

/** The event of a stored row. Throws on bad JSON or a codec rejection. */
export function decodeRow<E extends EventEnvelope>(
  codec: EventCodec<E>,
  row: readonly [seq: number, tsMs: number, type: string, data: string, ...rest: unknown[]],
): E {
  const [seq, tsMs, type, json] = row;
  const data: unknown = JSON.parse(json);
  if (typeof data !== 'object' || data === null || Array.isArray(data)) {
    throw new TypeError(`the data column holds ${json.slice(0, 40)}, not a JSON object`);
  }
  // The fresh object from JSON.parse takes the envelope itself: no copy per event on replay.
  const event = data as Record<string, unknown>;
  event.seq = seq;
  event.tsMs = tsMs;
  event.type = type;
  return codec.accepts?.(event) === true ? (event as E) : codec.parse(event);
}
