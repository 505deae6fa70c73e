/**
 * What vole sends a CSI driver for a volume (docs/csi.md): the volume id, the capability from
 * the PV's mode, fsType, mountOptions and access modes, the volume context, and the
 * publish context that ControllerPublishVolume answered.
 */
import { createHash } from 'node:crypto';
import type { CsiDriverCaps } from '../events/index.js';
import type { ResolvedVolume } from '../operations/volume-spec.js';
import type { AccessModeName, StringMap, VolumeCapability } from './proto.js';

type CsiSource = Extract<ResolvedVolume['source'], { kind: 'csi' }>;

/** The CSI source of a volume the CSI plugin was given (anything else is a bug). */
export function csiSourceOf(spec: ResolvedVolume): CsiSource {
  if (spec.source.kind !== 'csi')
    throw new Error(`volume ${spec.volume} has no csi source; the CSI plugin cannot serve it`);
  return spec.source;
}

/**
 * The volume_id: the PV's volumeHandle; for an inline (ephemeral) volume, a handle unique to
 * the pod, as the kubelet makes it (`csi-` + SHA-256 of pod UID and name).
 */
export function volumeIdOf(spec: ResolvedVolume, podUid: string | null): string {
  const source = csiSourceOf(spec);
  if (!source.inline) return source.volumeHandle;
  const digest = createHash('sha256')
    .update(`${podUid ?? ''}${source.volumeHandle}`)
    .digest('hex');
  return `csi-${digest}`;
}

/** docs/csi.md access modes: the PV's first access mode decides; none is a single writer. */
export function accessModeOf(accessModes: readonly string[], caps: CsiDriverCaps): AccessModeName {
  switch (accessModes[0]) {
    case 'ReadWriteOncePod':
      return caps.singleNodeMultiWriter ? 'SINGLE_NODE_SINGLE_WRITER' : 'SINGLE_NODE_WRITER';
    case 'ReadOnlyMany':
      return 'MULTI_NODE_READER_ONLY';
    case 'ReadWriteMany':
      return 'MULTI_NODE_MULTI_WRITER';
    default:
      return 'SINGLE_NODE_WRITER';
  }
}

export function volumeCapabilityOf(spec: ResolvedVolume, caps: CsiDriverCaps): VolumeCapability {
  const access_mode = { mode: accessModeOf(spec.traits.accessModes, caps) };
  if (spec.traits.volumeMode === 'Block') return { block: {}, access_mode };
  const source = csiSourceOf(spec);
  return {
    mount: { fs_type: source.fsType, mount_flags: [...(source.mountOptions ?? [])] },
    access_mode,
  };
}

/**
 * volume_context: the PV's csi.volumeAttributes; an inline volume also says it is
 * ephemeral and names its pod (docs/csi.md).
 */
export function volumeContextOf(spec: ResolvedVolume, podUid: string | null): StringMap {
  const source = csiSourceOf(spec);
  const context: StringMap = { ...source.volumeAttributes };
  if (source.inline) {
    context['csi.storage.k8s.io/ephemeral'] = 'true';
    context['csi.storage.k8s.io/pod.uid'] = podUid ?? '';
    if (source.podName !== undefined) context['csi.storage.k8s.io/pod.name'] = source.podName;
    if (source.podNamespace !== undefined)
      context['csi.storage.k8s.io/pod.namespace'] = source.podNamespace;
  }
  return context;
}

/**
 * The publish context travels as the attachment's devicePath (a JSON object, keys sorted),
 * so it is in the log, survives a restart, and reaches NodeStage and NodePublish.
 */
export function encodePublishContext(context: StringMap): string {
  const sorted = Object.fromEntries(Object.entries(context).sort(([a], [b]) => a.localeCompare(b)));
  return JSON.stringify(sorted);
}

export function decodePublishContext(devicePath: string): StringMap {
  if (!devicePath.startsWith('{')) return {};
  try {
    const parsed = JSON.parse(devicePath) as unknown;
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return {};
    return Object.fromEntries(
      Object.entries(parsed as Record<string, unknown>).filter(
        (e): e is [string, string] => typeof e[1] === 'string',
      ),
    );
  } catch {
    return {};
  }
}
