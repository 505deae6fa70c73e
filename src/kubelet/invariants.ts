/**
 * Safety invariants of the kubelet world (behaviour K8.1), checked after fold steps in tests,
 * simulations, `vole chaos` and `vole verify`. Each check looks only at the volume an
 * event touched, so checking every step costs O(change). A violation names the pair and
 * the seq.
 */
import { backoffMsMax } from '../constants.js';
import type { UniqueVolumeName } from '../ids.js';
import { keysConflict } from '../operations/pending.js';
import type { Violation } from '../operations/violation.js';
import type { World } from './types.js';
import { podEntries } from './by-pod.js';

/** Checks the invariants that concern one volume; returns the violations (empty if none). */
export function checkVolume(world: World, volume: UniqueVolumeName): Violation[] {
  const out: Violation[] = [];
  const at = (invariant: string, message: string) =>
    out.push({ seq: world.seq, invariant, message: `${message} (seq ${world.seq})` });
  const attachment = world.attachments.get(volume);
  const mounts = [...podEntries(world.mounts.get(volume))];
  const state = attachment?.value;
  // S1/S2: no detach and no device unmount while a pod mount may exist.
  if ((state === 'detaching' || state === 'attached.deviceUnmounting') && mounts.length > 0) {
    at(
      'S1',
      `attachment ${volume}@${world.config.node}: ${state} while ${mounts.map((m) => `pod ${m.pod} is ${m.value}`).join(', ')}`,
    );
  }
  // A pod mount needs its volume attached (and its device mounted, for device-mountable ones).
  for (const m of mounts) {
    if (m.value !== 'mounting' && m.value !== 'mounted') continue;
    if (state === undefined || !state.startsWith('attached')) {
      at(
        'attached-before-mount',
        `mount ${volume} × pod ${m.pod}: ${m.value} while the attachment is ${state ?? 'detached'}`,
      );
    } else if (attachment!.spec.traits.deviceMountable && state !== 'attached.deviceMounted') {
      at(
        'device-before-mount',
        `mount ${volume} × pod ${m.pod}: ${m.value} while the device is ${state}`,
      );
    }
  }
  // S7: at most one running operation per conflicting key.
  const running = [...world.running.values()].filter((op) => op.volume === volume);
  for (let i = 0; i < running.length; i++) {
    for (let j = i + 1; j < running.length; j++) {
      if (keysConflict(running[i]!.key, running[j]!.key)) {
        at(
          'S7',
          `operations ${running[i]!.opId} (${running[i]!.op}) and ${running[j]!.opId} (${running[j]!.op}) run on conflicting keys of ${volume}`,
        );
      }
    }
  }
  // behaviour K5.5: backoff never above 2 min 2 s.
  for (const r of world.ops.get(volume) ?? []) {
    if (r.durationMsBeforeRetry > backoffMsMax)
      at(
        'backoff',
        `${r.opName} of ${volume} backs off ${r.durationMsBeforeRetry} ms, above ${backoffMsMax}`,
      );
  }
  // A volume gone from the world leaves nothing behind (gone.ts): no unbounded growth.
  const gone =
    !world.dsw.has(volume) &&
    attachment === undefined &&
    mounts.length === 0 &&
    !world.ops.has(volume);
  if (gone && (world.causes.has(volume) || world.lastErrors.has(volume))) {
    at('forgotten', `volume ${volume} is gone but the world still keeps its cause or last error`);
  }
  return out;
}

export class InvariantViolation extends Error {
  override name = 'InvariantViolation';
  constructor(readonly violations: Violation[]) {
    super(violations.map((v) => `${v.invariant}: ${v.message}`).join('\n'));
  }
}

/**
 * A checker to call after each fold. It checks the volumes touched since the planner last
 * drained them (world.dirty), which always include the ones the event touched. Counts
 * the checks made.
 */
export class InvariantChecker {
  checks = 0;
  readonly violations: Violation[] = [];

  after(world: World): void {
    for (const volume of world.dirty) {
      this.checks++;
      this.violations.push(...checkVolume(world, volume));
    }
  }
}
