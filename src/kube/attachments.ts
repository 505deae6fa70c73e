/**
 * What the attach/detach controller and the external-attacher say about this node's
 * attachments, as the kubelet reads them in controller-attach mode: a volume is attached
 * when the Node's `status.volumesAttached` lists it, and a CSI volume needs besides its
 * VolumeAttachment's `status.attached`, whose `attachmentMetadata` is the publish context
 * NodeStage and NodePublish get. Pure: no I/O.
 */
import { createHash } from 'node:crypto';
import { encodePublishContext } from '../csi/requests.js';
import { csiPluginName } from '../desired/resolve.js';

/** The VolumeAttachment Kubernetes' CSI attacher names for (handle, driver, node). */
export function volumeAttachmentName(volumeHandle: string, driver: string, node: string): string {
  const hex = createHash('sha256').update(`${volumeHandle}${driver}${node}`).digest('hex');
  return `csi-${hex}`;
}

/** `kubernetes.io/csi/<driver>^<handle>` → its parts; undefined for any other volume. */
export function csiVolumeOf(unique: string): { driver: string; handle: string } | undefined {
  const prefix = `${csiPluginName}/`;
  if (!unique.startsWith(prefix)) return undefined;
  const rest = unique.slice(prefix.length);
  const caret = rest.indexOf('^');
  if (caret <= 0) return undefined;
  return { driver: rest.slice(0, caret), handle: rest.slice(caret + 1) };
}

export interface VolumeAttachmentView {
  readonly name: string;
  readonly attached: boolean;
  readonly attachmentMetadata: Readonly<Record<string, string>>;
}

/**
 * The attachments this node may treat as done: every `volumesAttached` entry that is not
 * a CSI volume as it stands; a CSI volume only once its VolumeAttachment says attached,
 * with the attachment metadata as its devicePath (vole's CSI plugin carries the publish
 * context there). Order kept as the Node lists them.
 */
export function confirmedAttachments(opts: {
  node: string;
  volumesAttached: readonly { name: string; devicePath?: string }[];
  volumeAttachments: ReadonlyMap<string, VolumeAttachmentView>;
}): { name: string; devicePath: string }[] {
  // A driver whose CSIDriver says `attachRequired: false` needs no entry here: the node's
  // fold resolves its volumes as not attachable (src/desired/resolve.ts), so none waits.
  const confirmed: { name: string; devicePath: string }[] = [];
  for (const entry of opts.volumesAttached) {
    const csi = csiVolumeOf(entry.name);
    if (csi === undefined) {
      confirmed.push({ name: entry.name, devicePath: entry.devicePath ?? '' });
      continue;
    }
    const va = opts.volumeAttachments.get(volumeAttachmentName(csi.handle, csi.driver, opts.node));
    if (va === undefined || !va.attached) continue;
    confirmed.push({
      name: entry.name,
      devicePath: encodePublishContext({ ...va.attachmentMetadata }),
    });
  }
  return confirmed;
}
