/**
 * One pod volume resolved to the volume it names: the spec the fold keeps in the desired
 * state, a running operation acts on, and a plugin reads. Below the folds (src/kubelet and
 * src/controller) and the plugins, so each reads it without reaching into the other.
 */
import type { UniqueVolumeName } from '../ids.js';

export type VolumeMode = 'Filesystem' | 'Block';

/** Where a volume comes from, as its plugin needs it (the Spec of seed 001). */
export type VolumeSource =
  | {
      kind: 'csi';
      driver: string;
      volumeHandle: string;
      fsType: string;
      inline: boolean;
      /** csi.volumeAttributes (CSI volume_context), when the source has any. */
      volumeAttributes?: Readonly<Record<string, string>>;
      /** The PV's mountOptions (CSI mount_flags), when it has any. */
      mountOptions?: readonly string[];
      /** An inline volume's pod (CSI ephemeral volume_context). */
      podName?: string;
      podNamespace?: string;
    }
  | {
      kind: 'emptyDir';
      medium: string;
      sizeLimitBytes: number;
      mode?: number;
      /** medium Memory: the tmpfs's size, from the node, the pod and sizeLimit (the least). */
      tmpfsBytes?: number;
    }
  | { kind: 'hostPath'; path: string; type: string }
  | { kind: 'local'; path: string; fsType: string }
  | ({ kind: 'configMap' } & ContentOptions)
  | ({ kind: 'secret' } & ContentOptions & OnTmpfs)
  | ({ kind: 'downwardAPI'; files: readonly DownwardFile[]; defaultMode?: number } & OnTmpfs)
  | ({
      kind: 'projected';
      namespace: string;
      sources: readonly ProjectedPart[];
      defaultMode?: number;
    } & OnTmpfs);

/**
 * A secret, downwardAPI or projected volume's tmpfs size: the kubelet wraps each in a
 * Memory emptyDir without sizeLimit, so the least of the node's allocatable memory and the
 * pod's memory limit; absent when neither is known (the kernel's default).
 */
export interface OnTmpfs {
  readonly tmpfsBytes?: number;
}

/** `items` entry of a configMap, secret or projected source: key → file path, mode. */
export interface KeyToPath {
  readonly key: string;
  readonly path: string;
  readonly mode?: number;
}

/** What a configMap or secret source (or projection) asks for, in the pod's namespace. */
export interface ContentOptions {
  readonly name: string;
  readonly namespace?: string;
  readonly items?: readonly KeyToPath[];
  readonly defaultMode?: number;
  readonly optional?: boolean;
  /**
   * Where the pod asks for it (`spec.volumes[2].configMap`,
   * `spec.volumes[0].projected.sources[1].secret`): a missing key's error names the field.
   */
  readonly field?: string;
}

/** A downward API file, its content taken from the pod object when the pod resolved. */
export interface DownwardFile {
  readonly path: string;
  readonly content: string;
  readonly mode?: number;
}

export type ProjectedPart =
  | ({ kind: 'configMap' | 'secret' } & ContentOptions)
  | { kind: 'downwardAPI'; files: readonly DownwardFile[] }
  | ({ kind: 'serviceAccountToken' } & ServiceAccountTokenPart);

/** A token the kubelet asks of the TokenRequest API, bound to the pod, for one file. */
export interface ServiceAccountTokenPart {
  readonly path: string;
  readonly serviceAccountName: string;
  /** Absent: the API server's own audiences. */
  readonly audience?: string;
  readonly expirationSeconds: number;
  readonly podName: string;
  readonly podUid: string;
  readonly mode?: number;
}

/**
 * What a resolved volume has alike with every volume of its plugin and PV shape: its
 * plugin's facts, its PV's modes and gid, the sizes, how the pod uses it. One frozen
 * object held by every spec of equal traits (`volumeTraits`, volume-traits.ts), so a
 * cluster of 150,000 pods holds a handful of these instead of 11 fields a spec; sizes
 * past 2^31 are boxed numbers (16 bytes each) only in these few objects.
 */
export interface VolumeTraits {
  readonly pluginName: string;
  readonly attachable: boolean;
  readonly deviceMountable: boolean;
  readonly requiresRemount: boolean;
  /** behaviour K4.1: a PV whose access modes contain neither ReadWriteOnce nor ReadWriteOncePod. */
  readonly multiAttachAllowed: boolean;
  readonly volumeMode: VolumeMode;
  /** PV spec.capacity.storage in bytes; 0 = unknown. */
  readonly sizeBytes: number;
  /** PVC status.capacity.storage in bytes; 0 = unknown (behaviour K4.6 claimSize). */
  readonly claimSizeBytes: number;
  readonly volumeGidValue: string;
  readonly readOnly: boolean;
  readonly accessModes: readonly string[];
}

/**
 * One pod volume resolved to the volume it names (behaviour K2.6 populator): what names it, its
 * source and claim, and its traits (shared, above).
 */
export interface ResolvedVolume {
  readonly outerVolumeSpecName: string;
  /** PV name for PVC-backed volumes, else the pod volume name (behaviour K0.4). */
  readonly innerVolumeSpecName: string;
  readonly volume: UniqueVolumeName;
  readonly traits: VolumeTraits;
  readonly source: VolumeSource;
  /**
   * The claim's name and namespace, for PVC-backed volumes (its capacity follows
   * expansions): the strings the claim object already holds, no key of its own.
   */
  readonly claim?: string | undefined;
  readonly claimNamespace?: string | undefined;
}
