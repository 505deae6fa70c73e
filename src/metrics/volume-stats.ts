/**
 * kubelet_volume_stats_*: capacity, usage and inodes of the mounted pod volumes that come
 * from PersistentVolumeClaims, by statfs of each pod volume directory on scrape. A live
 * measurement of the host, so only a running agent has them (never a replayed log).
 */
import { statfs } from 'node:fs/promises';
import { Gauge, type Registry } from 'prom-client';
import type { PluginManager } from '../plugins/manager.js';
import { podEntries } from '../kubelet/by-pod.js';
import type { World } from '../kubelet/types.js';

export interface PodVolumeStats {
  readonly namespace: string;
  readonly persistentvolumeclaim: string;
  readonly capacityBytes: number;
  readonly availableBytes: number;
  readonly usedBytes: number;
  readonly inodes: number;
  readonly inodesFree: number;
  readonly inodesUsed: number;
}

interface ClaimVolume {
  readonly namespace: string;
  readonly claim: string;
  readonly path: string;
}

/** Mounted filesystem pod volumes backed by a claim, with their pod directories. */
export function claimVolumes(world: World, plugins: PluginManager): ClaimVolume[] {
  const found: ClaimVolume[] = [];
  for (const byPod of world.mounts.values()) {
    for (const mount of podEntries(byPod)) {
      if (mount.value !== 'mounted' || mount.spec.traits.volumeMode === 'Block') continue;
      const pod = world.pods.get(mount.pod);
      const claim = pod?.pod.spec.volumes?.find((v) => v.name === mount.spec.outerVolumeSpecName)
        ?.persistentVolumeClaim?.claimName;
      const plugin = plugins.find(mount.spec.traits.pluginName);
      if (pod === undefined || claim === undefined || plugin === undefined) continue;
      found.push({
        namespace: pod.namespace,
        claim,
        path: plugin.pod.podVolumePath(mount.spec, mount.pod),
      });
    }
  }
  return found;
}

/** statfs of each claim volume; one that cannot be read (being torn down) is left out. */
export async function measureVolumes(volumes: readonly ClaimVolume[]): Promise<PodVolumeStats[]> {
  const measured = await Promise.all(
    volumes.map(async (v): Promise<PodVolumeStats | undefined> => {
      try {
        const s = await statfs(v.path);
        return {
          namespace: v.namespace,
          persistentvolumeclaim: v.claim,
          capacityBytes: s.blocks * s.bsize,
          availableBytes: s.bavail * s.bsize,
          usedBytes: (s.blocks - s.bfree) * s.bsize,
          inodes: s.files,
          inodesFree: s.ffree,
          inodesUsed: s.files - s.ffree,
        };
      } catch {
        return undefined;
      }
    }),
  );
  return measured.filter((m): m is PodVolumeStats => m !== undefined);
}

const statNames: readonly [string, keyof PodVolumeStats, string][] = [
  ['kubelet_volume_stats_capacity_bytes', 'capacityBytes', 'Capacity in bytes of the volume'],
  [
    'kubelet_volume_stats_available_bytes',
    'availableBytes',
    'Number of available bytes in the volume',
  ],
  ['kubelet_volume_stats_used_bytes', 'usedBytes', 'Number of used bytes in the volume'],
  ['kubelet_volume_stats_inodes', 'inodes', 'Maximum number of inodes in the volume'],
  ['kubelet_volume_stats_inodes_free', 'inodesFree', 'Number of free inodes in the volume'],
  ['kubelet_volume_stats_inodes_used', 'inodesUsed', 'Number of used inodes in the volume'],
];

/** Registers the six gauges; one statfs pass per scrape feeds them all. */
export function registerVolumeStats(
  registry: Registry,
  measure: () => Promise<PodVolumeStats[]>,
): void {
  let pass: { at: number; stats: Promise<PodVolumeStats[]> } | undefined;
  const current = () => {
    // The six collect() calls of one scrape run within a few ms: share their statfs pass.
    const now = Date.now();
    if (pass === undefined || now - pass.at > 100) pass = { at: now, stats: measure() };
    return pass.stats;
  };
  for (const [name, field, help] of statNames) {
    new Gauge({
      name,
      help,
      labelNames: ['namespace', 'persistentvolumeclaim'],
      registers: [registry],
      async collect() {
        this.reset();
        for (const s of await current())
          this.set(
            { namespace: s.namespace, persistentvolumeclaim: s.persistentvolumeclaim },
            s[field] as number,
          );
      },
    });
  }
}
