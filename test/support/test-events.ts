/**
 * The plain event the log store's own tests append (no engine's): a pod's uid, validated by
 * a codec as the engines' are (zod, unknown fields kept).
 */
import { z } from 'zod';
import type { EventCodec } from '../../src/log/store.js';

export interface TestEvent {
  seq: number;
  tsMs: number;
  type: 'PodAdded';
  uid: string;
  note?: string;
}

const schema = z.looseObject({
  seq: z.number().int().positive(),
  tsMs: z.number().int().nonnegative(),
  type: z.literal('PodAdded'),
  uid: z.string().min(1),
});

export const testEventCodec: EventCodec<TestEvent> = {
  parse: (raw) => schema.parse(raw) as TestEvent,
};
