/**
 * What a new leader finds attached on the API server before it acts, as Kubernetes'
 * attach/detach controller reads it at start (populateActualStateOfWorld: each Node's
 * `status.volumesAttached`, confirmed; processVolumeAttachments: each VolumeAttachment,
 * uncertain unless its status says attached). The old leader's log is not this one's:
 * these objects are all it leaves. Pure: no I/O.
 */
import { csiPluginName } from '../desired/resolve.js';
import type { ApiObject } from './informer.js';

export interface FoundAttachment {
  /** The unique volume name, `kubernetes.io/csi/<driver>^<handle>`. */
  readonly volume: string;
  readonly node: string;
  readonly pv: string;
  readonly attached: boolean;
}

interface PvSpec {
  csi?: { driver?: string; volumeHandle?: string };
}

interface VaFields {
  spec?: { attacher?: string; nodeName?: string; source?: { persistentVolumeName?: string } };
  status?: { attached?: boolean };
}

/** Sorted by volume, then node; one entry per (volume, node), attached if either says so. */
export function attachmentsFound(
  nodes: readonly ApiObject[],
  pvs: readonly ApiObject[],
  vas: readonly ApiObject[],
): FoundAttachment[] {
  const pvOfVolume = new Map<string, string>();
  const volumeOfPv = new Map<string, string>();
  for (const pv of pvs) {
    const csi = (pv.spec as PvSpec | undefined)?.csi;
    if (csi?.driver === undefined || csi.volumeHandle === undefined) continue;
    const volume = `${csiPluginName}/${csi.driver}^${csi.volumeHandle}`;
    pvOfVolume.set(volume, pv.metadata.name);
    volumeOfPv.set(pv.metadata.name, volume);
  }
  const found = new Map<string, FoundAttachment>();
  const add = (f: FoundAttachment) => {
    const key = `${f.volume}@${f.node}`;
    const before = found.get(key);
    found.set(key, { ...f, attached: f.attached || before?.attached === true });
  };
  for (const node of nodes) {
    const status = (node.status ?? {}) as { volumesAttached?: { name: string }[] };
    for (const { name } of status.volumesAttached ?? []) {
      const pv = pvOfVolume.get(name);
      if (pv !== undefined) add({ volume: name, node: node.metadata.name, pv, attached: true });
    }
  }
  for (const va of vas) {
    const { spec, status } = va as VaFields;
    const pv = spec?.source?.persistentVolumeName;
    const volume = pv === undefined ? undefined : volumeOfPv.get(pv);
    const node = spec?.nodeName;
    if (pv === undefined || volume === undefined || node === undefined) continue;
    if (!volume.startsWith(`${csiPluginName}/${spec?.attacher ?? ''}^`)) continue;
    const attached = status?.attached === true && va.metadata.deletionTimestamp === undefined;
    add({ volume, node, pv, attached });
  }
  return [...found.values()].sort(
    (a, b) => a.volume.localeCompare(b.volume) || a.node.localeCompare(b.node),
  );
}
