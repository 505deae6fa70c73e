/**
 * `--allocatable cpu=4,memory=16Gi,ephemeral-storage=100Gi`: the node's allocatable, as the
 * kubelet reports it in node.status.allocatable. A resource not given is the host's: its
 * CPUs, its memory, the size of the filesystem holding the root. The agent records the
 * result in EngineStarted, so a replay never reads the host again.
 */
import { cpus, totalmem } from 'node:os';
import { statfsSync } from 'node:fs';
import { quantityMillis, quantityValue } from '../events/quantity.js';
import type { NodeAllocatable } from '../events/types.js';
import { UsageError } from './postmortem.js';

const names = ['cpu', 'memory', 'ephemeral-storage'] as const;

/** This host's resources: every CPU, all memory, the root's filesystem size. */
function hostAllocatable(root: string): NodeAllocatable {
  let ephemeralStorageBytes = 0;
  try {
    const fs = statfsSync(root);
    ephemeralStorageBytes = Number(fs.blocks) * Number(fs.bsize);
  } catch {
    // The root does not exist yet: no storage is known (0), which a limit can still set.
  }
  return { cpuMillis: cpus().length * 1000, memoryBytes: totalmem(), ephemeralStorageBytes };
}

/** The flag's value over the host's; a usage error names a bad entry and the form. */
export function allocatableOf(text: string | undefined, root: string): NodeAllocatable {
  const result = { ...hostAllocatable(root) };
  if (text === undefined) return result;
  for (const entry of text.split(',').filter((e) => e.trim() !== '')) {
    const [name, value] = entry.split('=').map((p) => p.trim());
    const problem =
      `--allocatable ${entry}: give NAME=QUANTITY with NAME one of ${names.join(', ')} ` +
      '(e.g. cpu=4,memory=16Gi)';
    if (value === undefined || !(names as readonly string[]).includes(name ?? ''))
      throw new UsageError(problem);
    const amount = name === 'cpu' ? quantityMillis(value) : quantityValue(value);
    if (amount === undefined) throw new UsageError(problem);
    if (name === 'cpu') result.cpuMillis = amount;
    else if (name === 'memory') result.memoryBytes = amount;
    else result.ephemeralStorageBytes = amount;
  }
  return result;
}
