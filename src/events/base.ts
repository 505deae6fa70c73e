/** The fields every event has: its place in the log and the time it was appended (ms). */
import { z } from 'zod';

export const eventBase = {
  seq: z.number().int().positive(),
  tsMs: z.number().int().nonnegative(),
};
