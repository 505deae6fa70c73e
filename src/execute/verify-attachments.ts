/**
 * The controller's periodic sync (behaviour C3.7 syncStates → VerifyVolumesAreAttached): every
 * period, for each node, ask each plugin whether the node's confirmed attachments still
 * exist, and record the answer as an AttachmentsVerified observation (the fold drops the
 * ones reported gone). A plugin error skips that plugin this round, as upstream.
 */
import type { Engine } from '../engine/engine.js';
import type { Clock, TimerHandle } from '../clock.js';
import type { PluginManager } from '../plugins/manager.js';
import type { ControllerOperation } from '../controller/plan.js';
import {
  allAttachments,
  type ControllerAttachment,
  type ControllerWorld,
} from '../controller/types.js';

/** --attach-detach-reconcile-sync-period: 60 s in Kubernetes. */
const attachmentVerifyPeriodMs = 60_000;

async function verifyOnce(
  engine: Engine<ControllerWorld, ControllerOperation>,
  plugins: PluginManager,
  clock: Clock,
): Promise<void> {
  const byNode = new Map<string, ControllerAttachment[]>();
  for (const a of allAttachments(engine.world)) {
    if (!a.value.startsWith('attached')) continue;
    byNode.set(a.node, [...(byNode.get(a.node) ?? []), a]);
  }
  for (const [node, attachments] of [...byNode].sort(([x], [y]) => x.localeCompare(y))) {
    const volumes: { name: string; attached: boolean }[] = [];
    const byPlugin = new Map<string, typeof attachments>();
    for (const a of attachments)
      byPlugin.set(a.attachedSpec.traits.pluginName, [
        ...(byPlugin.get(a.attachedSpec.traits.pluginName) ?? []),
        a,
      ]);
    for (const [pluginName, list] of byPlugin) {
      const attacher = plugins.find(pluginName)?.attacher;
      if (attacher === undefined) continue;
      try {
        const answer = await attacher.volumesAreAttached(
          list.map((a) => a.attachedSpec),
          { node, pod: null, signal: AbortSignal.timeout(60_000) },
        );
        for (const a of list)
          volumes.push({ name: a.volume, attached: answer.get(a.volume) !== false });
      } catch {
        continue; // spec §3.7: a plugin error skips the plugin this round
      }
    }
    if (volumes.length > 0 && engine.isRunning) {
      engine.append({ type: 'AttachmentsVerified', tsMs: clock.nowMs(), node, volumes });
    }
  }
}

/** Starts the periodic check; returns a function that stops it. */
export function startAttachmentVerifier(
  engine: Engine<ControllerWorld, ControllerOperation>,
  opts: { plugins: PluginManager; clock: Clock; periodMs?: number },
): () => void {
  const periodMs = opts.periodMs ?? attachmentVerifyPeriodMs;
  let timer: TimerHandle | undefined;
  let stopped = false;
  const schedule = () => {
    timer = opts.clock.setTimer(opts.clock.nowMs() + periodMs, () => {
      if (stopped || !engine.isRunning) return;
      void verifyOnce(engine, opts.plugins, opts.clock).finally(() => {
        if (!stopped) schedule();
      });
    });
  };
  schedule();
  return () => {
    stopped = true;
    if (timer !== undefined) opts.clock.clearTimer(timer);
  };
}
