/**
 * Where the kubelet's CSI plugin puts things under its root (docs/csi.md), here under vole's
 * `--root`. Every component is checked (no `..`, no `/`); a volume handle, which may be
 * anything, appears only as its SHA-256.
 */
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { podDir, safeName } from '../host/paths.js';

const csiDir = (root: string) => join(root, 'plugins', 'kubernetes.io', 'csi');

/** The staging path (deviceMountPath): `plugins/kubernetes.io/csi/<driver>/<sha256>/globalmount`. */
export function csiStagingPath(root: string, driver: string, volumeHandle: string): string {
  const digest = createHash('sha256').update(volumeHandle).digest('hex');
  return join(csiDir(root), safeName('driver name', driver), digest, 'globalmount');
}

/** The publish target: `pods/<podUID>/volumes/kubernetes.io~csi/<outerVolumeSpecName>/mount`. */
export function csiPublishPath(root: string, podUid: string, outerVolumeSpecName: string): string {
  return join(
    podDir(root, podUid),
    'volumes',
    'kubernetes.io~csi',
    safeName('volume name', outerVolumeSpecName),
    'mount',
  );
}

/** Block staging: `plugins/kubernetes.io/csi/volumeDevices/staging/<pv name>`. */
export function csiBlockStagingPath(root: string, pvName: string): string {
  return join(csiDir(root), 'volumeDevices', 'staging', safeName('volume name', pvName));
}

/** Block publish target: `plugins/kubernetes.io/csi/volumeDevices/publish/<pv name>/<podUID>`. */
export function csiBlockPublishPath(root: string, pvName: string, podUid: string): string {
  return join(csiBlockPublishDir(root, pvName), safeName('pod uid', podUid));
}

export function csiBlockPublishDir(root: string, pvName: string): string {
  return join(csiDir(root), 'volumeDevices', 'publish', safeName('volume name', pvName));
}

/** The pod's device path of a Block volume: `pods/<podUID>/volumeDevices/kubernetes.io~csi/<pv name>`. */
export function csiPodDevicePath(root: string, podUid: string, pvName: string): string {
  return join(
    podDir(root, podUid),
    'volumeDevices',
    'kubernetes.io~csi',
    safeName('volume name', pvName),
  );
}
