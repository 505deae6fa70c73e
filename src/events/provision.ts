/** What provisioning operations record: the CreateVolume request, and the volume made. */
import { z } from 'zod';

/**
 * What a provision operation asks for (the external-provisioner's CreateVolume request and
 * the PV it records), decided by the planner and recorded in OperationStarted.
 */
export const provisionRequest = z.object({
  claim: z.object({ namespace: z.string().min(1), name: z.string().min(1), uid: z.string() }),
  storageClassName: z.string().min(1),
  driver: z.string().min(1),
  /** CreateVolume's name: `pvc-<claim uid>`, also the PV's name. */
  name: z.string().min(1),
  requiredBytes: z.number().nonnegative(),
  accessModes: z.array(z.string()),
  volumeMode: z.enum(['Filesystem', 'Block']),
  fsType: z.string(),
  mountOptions: z.array(z.string()),
  /** The class's parameters without the provisioner's own `csi.storage.k8s.io/` keys. */
  parameters: z.record(z.string(), z.string()),
  reclaimPolicy: z.enum(['Retain', 'Delete']),
  /** accessibility_requirements.requisite (and preferred), as segments; empty: none. */
  requisite: z.array(z.record(z.string(), z.string())),
  /** WaitForFirstConsumer: the node of the first pod that uses the claim. */
  selectedNode: z.string().optional(),
});
export type ProvisionRequest = z.infer<typeof provisionRequest>;

/** CreateVolume's answer as the log keeps it: the volume the PV records. */
export const provisionedVolume = z.object({
  volumeId: z.string().min(1),
  capacityBytes: z.number().nonnegative(),
  volumeContext: z.record(z.string(), z.string()),
  accessibleTopology: z.array(z.record(z.string(), z.string())),
});
export type ProvisionedVolume = z.infer<typeof provisionedVolume>;
