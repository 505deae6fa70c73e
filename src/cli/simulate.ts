/** `vole simulate FILE [--json] [--db PATH]` (docs/scenarios.md). */
import { readFileSync } from 'node:fs';
import type { Logger } from 'pino';
import { parseScenario, ScenarioFormatError } from '../sim/scenario.js';
import { simulate, type SimulationResult } from '../sim/simulate.js';
import { openSimulationLog } from './sqlite-sink.js';

export interface SimulateCliOptions {
  readonly json?: boolean;
  readonly db?: string;
}

function printHuman(result: SimulationResult, out: NodeJS.WritableStream): void {
  out.write(`${result.ok ? 'ok' : 'FAILED'}  ${result.name}  (${result.events} events)\n`);
  for (const f of result.failures) out.write(`  ✗ ${f.message}\n`);
  for (const w of result.waits) out.write(`  wait ${w.pod}: ${w.ok ? 'ready' : w.error}\n`);
  for (const [plugin, calls] of Object.entries(result.counts)) {
    const list = Object.entries(calls)
      .map(([c, n]) => `${c}=${n}`)
      .join(' ');
    out.write(`  ${plugin}: ${list}\n`);
  }
  const state = result.state as {
    attachments?: { volume: string; node: string; state: string }[];
    mounts?: { volume: string; pod: string; outerVolumeSpecName: string; state: string }[];
  };
  for (const a of state.attachments ?? [])
    out.write(`  attachment ${a.volume}@${a.node}: ${a.state}\n`);
  for (const m of state.mounts ?? [])
    out.write(`  mount ${m.volume} pod ${m.pod} (${m.outerVolumeSpecName}): ${m.state}\n`);
  for (const r of result.reports ?? [])
    out.write(`  report ${r.reason} pod ${r.pod}: ${r.message}\n`);
}

/** Returns the exit status: 0 every expectation held, 1 one failed, 2 the file is invalid. */
export async function simulateCommand(
  file: string,
  opts: SimulateCliOptions,
  logger: Logger,
): Promise<number> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    process.stderr.write(`vole simulate: cannot read ${file}: ${(error as Error).message}\n`);
    return 2;
  }
  let scenario;
  try {
    scenario = parseScenario(text, file);
  } catch (error) {
    if (!(error instanceof ScenarioFormatError)) throw error;
    process.stderr.write(`vole simulate: ${error.message}\n`);
    return 2;
  }
  const log = opts.db === undefined ? undefined : openSimulationLog(opts.db, scenario.mode);
  try {
    const result = await simulate(scenario, { logger, ...(log === undefined ? {} : { log }) });
    if (opts.json === true) process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    else printHuman(result, process.stdout);
    return result.ok ? 0 : 1;
  } finally {
    log?.sink.close();
  }
}
