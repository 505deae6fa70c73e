/**
 * The pod churn the fault suites on a real API server run (test/host/kube-faults*.host.
 * test.ts): pods on one node, each with a ConfigMap, a Secret and an emptyDir volume (five
 * of each object, shared), one in five with a CSI volume too (its own ReadWriteOnce claim
 * bound to its own PV of `vole csi-driver`, attached through a VolumeAttachment), created
 * and deleted by name; and what converged means for them.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { listLoops } from '../../src/host/loop.js';
import { findMountAt, readMountTable } from '../../src/host/mountinfo.js';
import type { KubeCluster } from './kube.js';

export const churnDriver = 'disk.csi.vole.dev';

/** The ConfigMaps and Secrets the pods mount (apply them first). */
export const churnContents = [0, 1, 2, 3, 4]
  .map(
    (i) => `apiVersion: v1
kind: ConfigMap
metadata: {name: cfg-${i}, namespace: default}
data: {value: config-${i}}
---
apiVersion: v1
kind: Secret
metadata: {name: sec-${i}, namespace: default}
stringData: {token: secret-${i}}
`,
  )
  .join('---\n');

/** One pod in five has a CSI volume. */
const withCsi = (i: number) => i % 5 === 0;
const unique = (pod: string) => `kubernetes.io/csi/${churnDriver}^fault-${pod}`;

const claimYaml = (pod: string) => `apiVersion: v1
kind: PersistentVolume
metadata: {name: d-${pod}-pv}
spec:
  capacity: {storage: 64Mi}
  accessModes: [ReadWriteOnce]
  storageClassName: manual
  csi: {driver: ${churnDriver}, volumeHandle: fault-${pod}, fsType: ext4, volumeAttributes: {size: 64Mi}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: d-${pod}, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: manual
  volumeName: d-${pod}-pv
  resources: {requests: {storage: 64Mi}}
---
`;

/** A pod's volumes are set up only when a container mounts them (the kubelet's rule too). */
const podYaml = (
  node: string,
  name: string,
  i: number,
) => `${withCsi(i) ? claimYaml(name) : ''}apiVersion: v1
kind: Pod
metadata: {name: ${name}, namespace: default, labels: {csi: "${withCsi(i)}"}}
spec:
  nodeName: ${node}
  automountServiceAccountToken: false
  containers:
    - name: app
      image: busybox
      volumeMounts: [{name: cfg, mountPath: /cfg}, {name: sec, mountPath: /sec}, {name: scratch, mountPath: /s}${withCsi(i) ? ', {name: data, mountPath: /data}' : ''}]
  volumes:
    - {name: cfg, configMap: {name: cfg-${i % 5}}}
    - {name: sec, secret: {secretName: sec-${i % 5}}}
    - {name: scratch, emptyDir: {}}
${withCsi(i) ? `    - {name: data, persistentVolumeClaim: {claimName: d-${name}}}\n` : ''}`;

interface PodList {
  items: {
    metadata: {
      name: string;
      uid: string;
      deletionTimestamp?: string;
      labels?: Record<string, string>;
    };
  }[];
}

export interface ChurnVa {
  metadata: { name: string; deletionTimestamp?: string };
  spec: { nodeName: string; source: { persistentVolumeName?: string } };
  status?: { attached?: boolean };
}

export interface Churn {
  /** `prefix`0 … `prefix`(count-1). */
  names(prefix: string, count: number): string[];
  /** Pods (and their claims) named `names`, the first counted as number `from`. */
  create(names: readonly string[], from: number): void;
  /** Deletes the pods named (not waiting), remembering their uids as gone. */
  remove(names: readonly string[]): void;
  vas(): ChurnVa[];
  /**
   * Every pod the API has is on disk (its CSI volume published into it) and none is
   * Terminating; nothing of a gone pod is; the CSI volumes attached (VolumeAttachments,
   * volumesAttached, loop devices backed under `base`) are exactly those of the pods that
   * exist. Undefined until then.
   */
  converged(): Promise<{ pods: number; csi: number } | undefined>;
}

export function podChurn(
  cluster: KubeCluster,
  opts: { readonly node: string; readonly base: string; readonly root: string },
): Churn {
  const { ok, json } = cluster;
  const gonePods = new Set<string>();
  const podDir = (uid: string) => join(opts.root, 'pods', uid);
  const mountedOnDisk = (uid: string) =>
    existsSync(join(podDir(uid), 'volumes/kubernetes.io~configmap/cfg/value')) &&
    existsSync(join(podDir(uid), 'volumes/kubernetes.io~secret/sec/token')) &&
    existsSync(join(podDir(uid), 'volumes/kubernetes.io~empty-dir/scratch'));
  const volumesAttached = () =>
    (
      json<{ status?: { volumesAttached?: { name: string }[] } }>(['get', 'node', opts.node]).status
        ?.volumesAttached ?? []
    )
      .map((v) => v.name)
      .sort();
  const churn: Churn = {
    names: (prefix, count) => Array.from({ length: count }, (_, i) => `${prefix}${i}`),
    create: (names, from) =>
      void ok(
        ['apply', '-f', '-'],
        names.map((n, k) => podYaml(opts.node, n, from + k)).join('---\n'),
      ),
    remove(names) {
      const pods = json<PodList>(['get', 'pods']).items;
      for (const p of pods) if (names.includes(p.metadata.name)) gonePods.add(p.metadata.uid);
      ok(['delete', 'pod', '--wait=false', ...names]);
    },
    vas: () => json<{ items: ChurnVa[] }>(['get', 'volumeattachments']).items,
    async converged() {
      const pods = json<PodList>(['get', 'pods']).items;
      if (pods.some((p) => p.metadata.deletionTimestamp !== undefined)) return undefined;
      if (!pods.every((p) => mountedOnDisk(p.metadata.uid))) return undefined;
      if ([...gonePods].some((uid) => existsSync(podDir(uid)))) return undefined;
      const csiPods = pods.filter((p) => p.metadata.labels?.csi === 'true');
      const mounts = await readMountTable();
      const publish = (uid: string) => join(podDir(uid), 'volumes/kubernetes.io~csi/data/mount');
      if (csiPods.some((p) => findMountAt(mounts, publish(p.metadata.uid)) === undefined))
        return undefined;
      const want = csiPods.map((p) => unique(p.metadata.name)).sort();
      if (volumesAttached().join(' ') !== want.join(' ')) return undefined;
      const vas = churn.vas();
      const attached = vas.filter(
        (v) => v.status?.attached === true && v.metadata.deletionTimestamp === undefined,
      );
      if (attached.length !== vas.length || attached.length !== want.length) return undefined;
      const loops = (await listLoops()).filter((l) => l.backFile.startsWith(opts.base));
      if (loops.length !== want.length) return undefined;
      return { pods: pods.length, csi: want.length };
    },
  };
  return churn;
}
