/**
 * The restart cross-check: before a new engine starts, ask the plugins about every pair
 * the log leaves uncertain or in flight. Only "definitely absent" settles a pair (the
 * fold ignores the rest), and nothing else runs meanwhile, so no operation races it.
 */
import type { EventOf } from '../events/index.js';
import type { PluginManager } from '../plugins/manager.js';
import type { World } from '../kubelet/types.js';
import { podEntries } from '../kubelet/by-pod.js';

export type HostObservation = Pick<EventOf<'HostObserved'>, 'attachments' | 'mounts'>;

const unsettled = /Uncertain|ing$/;

export async function checkHost(world: World, plugins: PluginManager): Promise<HostObservation> {
  const attachments: HostObservation['attachments'] = [];
  const mounts: HostObservation['mounts'] = [];
  for (const record of world.attachments.values()) {
    const state = record.value;
    const plugin = plugins.find(record.spec.traits.pluginName);
    if (plugin === undefined || !unsettled.test(state)) continue;
    const entry: HostObservation['attachments'][number] = { volume: record.volume };
    const isAttached = plugin.attacher?.isAttached;
    if (!state.startsWith('attached') && isAttached !== undefined) {
      entry.attached = await isAttached(record.spec).catch(() => true);
    }
    const isDeviceMounted = plugin.deviceMounter?.isDeviceMounted;
    if (/[dD]evice(Uncertain|Mounting|Unmounting)/.test(state) && isDeviceMounted !== undefined) {
      const path =
        record.context.deviceMountPath || plugin.deviceMounter!.deviceMountPath(record.spec);
      entry.deviceMounted = await isDeviceMounted(record.spec, path).catch(() => true);
    }
    if (entry.attached !== undefined || entry.deviceMounted !== undefined) attachments.push(entry);
  }
  for (const byPod of world.mounts.values()) {
    for (const record of podEntries(byPod)) {
      const isSetUp = plugins.find(record.spec.traits.pluginName)?.pod.isSetUp;
      if (!unsettled.test(record.value) || isSetUp === undefined) continue;
      mounts.push({
        volume: record.volume,
        pod: record.pod,
        mounted: await isSetUp(record.spec, record.pod).catch(() => true),
      });
    }
  }
  return { attachments, mounts };
}
