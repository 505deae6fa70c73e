/** Placeholder until the SQLite store lands: simulate --db needs it. */
import type { SimulationLog } from '../sim/simulate.js';

export function openSimulationLog(_path: string): SimulationLog {
  throw new Error('--db is not available yet');
}
