/** `simulate --db PATH`: the scenario's log in a new SQLite file, kept for replay. */
import { existsSync, statSync } from 'node:fs';
import { openSqliteLog } from '../agent/sqlite-log.js';
import { type AnyCore, coreOfMode } from '../engine/cores.js';
import type { SimulationLog } from '../sim/simulate.js';
import { UsageError } from './postmortem.js';

export function openSimulationLog(path: string, mode: 'kubelet' | 'controller'): SimulationLog {
  if (existsSync(path) && statSync(path).size > 0) {
    throw new UsageError(
      `${path} already exists; simulate writes a new log (remove it or choose another --db path)`,
    );
  }
  const core: AnyCore = coreOfMode(mode).core;
  return openSqliteLog(path, core);
}
