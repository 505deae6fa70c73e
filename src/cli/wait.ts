/**
 * `vole wait POD --db F [--timeout S]`: follows a node's log, written by a running agent,
 * until every volume of the pod is mounted (exit 0). It stops early, printing `vole why`,
 * as soon as the pod can only wait for a change outside vole (exit 3: the same rule as
 * `vole run --once`, src/agent/outside.ts), so a script's wait ends with the agent's own
 * explanation ("mkfs.xfs … could not run") instead of a time-out. At the timeout it prints
 * `vole why` too (exit 1).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { podWaitsOnOutside } from '../agent/outside.js';
import { byCore, kubeletCore } from '../engine/cores.js';
import type { UniquePodName } from '../ids.js';
import { coreOfStore } from '../postmortem/log-world.js';
import { openReadonly, type ReadonlyLog } from '../postmortem/open.js';
import { findPod, why, whyText } from '../postmortem/why.js';
import { podWaitStatus } from '../kubelet/queries.js';
import type { World } from '../kubelet/types.js';
import { onceTimeoutSecondsDefault } from './lifecycle.js';
import { UsageError } from './postmortem.js';

/** How often the log is read again: a pod's mount is seen within this much of its event. */
const waitPollMs = 200;

/** The world folded on to the log's head, from where it was. */
function foldOn(store: ReadonlyLog, world: World): World {
  const head = store.head().seq;
  let next = world;
  if (head > next.seq)
    for (const e of store.read({ fromSeq: next.seq + 1, toSeq: head }))
      next = kubeletCore.fold(next, e);
  return next;
}

function whyOf(world: World, pod: UniquePodName, originMs: number): string {
  const answer = why(world, pod);
  return answer === undefined ? '' : whyText(answer, { originMs });
}

export async function waitCommand(
  db: string,
  subject: string,
  opts: { timeout?: string },
): Promise<number> {
  const timeoutS = Number(opts.timeout ?? onceTimeoutSecondsDefault);
  if (!Number.isFinite(timeoutS) || timeoutS <= 0)
    throw new UsageError(`--timeout ${opts.timeout}: give a number of seconds above 0`);
  const store = openReadonly(db);
  try {
    // A node's log only: the controller's world has no pods' mounts to wait on.
    const core = byCore(coreOfStore(store), {
      kubelet: (kubelet) => kubelet,
      controller: () => {
        throw new UsageError(
          `${db} is the attach/detach controller's log: vole wait follows a node's`,
        );
      },
    });
    const originMs = store.bounds().firstTsMs;
    const deadlineMs = Date.now() + timeoutS * 1000;
    let world = core.initialWorld();
    for (;;) {
      world = foldOn(store, world);
      const pod = findPod(world, subject);
      if (pod !== undefined && podWaitStatus(world, pod).ready) {
        process.stdout.write(`pod ${subject}: every volume mounted (seq ${world.seq})\n`);
        return 0;
      }
      if (pod !== undefined && podWaitsOnOutside(world, pod)) {
        process.stdout.write(`${whyOf(world, pod, originMs)}\n`);
        process.stdout.write('nothing left that vole can do without a change outside it\n');
        return 3;
      }
      if (Date.now() >= deadlineMs) {
        const left =
          pod === undefined ? `no pod "${subject}" in the log` : whyOf(world, pod, originMs);
        process.stdout.write(`timed out after ${timeoutS} s: ${left}\n`);
        return 1;
      }
      await sleep(waitPollMs);
    }
  } finally {
    store.close();
  }
}
