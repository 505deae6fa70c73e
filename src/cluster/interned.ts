/**
 * Well-known strings of the objects the controller keeps, shared. `JSON.parse` makes a
 * string of its own for every value longer than ten characters, so each claim kept its
 * own `PersistentVolumeClaim`, each PV its `PersistentVolume` and its `ReadWriteOnce`
 * (some 100 bytes a pod with one claim, 150,000 times over). The constants below are
 * the program's own strings: a value equal to one is replaced by it, in place.
 */
const known = new Map<string, string>(
  [
    // kinds the controller and the node agents keep
    'PersistentVolume',
    'PersistentVolumeClaim',
    'StorageClass',
    'VolumeAttachment',
    'ServiceAccount',
    // API groups
    'storage.k8s.io/v1',
    // access modes, reclaim policies, binding modes
    'ReadWriteOnce',
    'ReadOnlyMany',
    'ReadWriteMany',
    'ReadWriteOncePod',
    'WaitForFirstConsumer',
    // finalizers and the provisioner annotations' usual values
    'kubernetes.io/pvc-protection',
    'kubernetes.io/pv-protection',
    'external-attacher/csi-driver',
  ].map((s) => [s, s]),
);

/** Replaces, in the freshly parsed `value`, every string equal to a known one by it. */
export function internKnownStrings<T>(value: T): T {
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) value[i] = internValue(value[i]);
  } else if (typeof value === 'object' && value !== null) {
    const record = value as Record<string, unknown>;
    for (const key in record) record[key] = internValue(record[key]);
  }
  return value;
}

function internValue(value: unknown): unknown {
  if (typeof value === 'string') return value.length > 10 ? (known.get(value) ?? value) : value;
  return internKnownStrings(value);
}
