/**
 * Well-known strings of the objects the controller keeps, shared. `JSON.parse` makes a
 * string of its own for every value longer than ten characters, so each claim kept its
 * own `PersistentVolumeClaim`, each PV its `PersistentVolume` and its `ReadWriteOnce`
 * (some 100 bytes a pod with one claim, 150,000 times over). The constants below are
 * the program's own strings: a value equal to one is replaced by it, in place.
 *
 * A PV's or a claim's `accessModes` list is shared too: `JSON.parse` makes an array of its
 * own for each (56 bytes for `["ReadWriteOnce"]`), and a PV's is the one its resolved
 * volume spec holds, so every pod's attachment kept one. A list of known modes is replaced
 * by one frozen array of the same modes (nothing writes to an object read from etcd; a
 * write to a shared one throws).
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
    for (const key in record)
      record[key] = key === 'accessModes' ? sharedModes(record[key]) : internValue(record[key]);
  }
  return value;
}

function internValue(value: unknown): unknown {
  if (typeof value === 'string') return value.length > 10 ? (known.get(value) ?? value) : value;
  return internKnownStrings(value);
}

/** The frozen access-mode lists met so far, by their modes joined (lists of up to four: bounded). */
const modeLists = new Map<string, readonly string[]>();

/** A list of known access modes as the one shared frozen array of those modes (see above). */
function sharedModes(value: unknown): unknown {
  const interned = internValue(value);
  if (!Array.isArray(interned) || interned.length > modesSharedMax) return interned;
  if (!interned.every((m) => typeof m === 'string' && accessModes.has(m))) return interned;
  const key = interned.join(',');
  const known = modeLists.get(key);
  if (known !== undefined) return known;
  const frozen = Object.freeze([...(interned as string[])]);
  modeLists.set(key, frozen);
  return frozen;
}

/** Kubernetes' access modes: a list of these is shared. */
const accessModes = new Set(['ReadWriteOnce', 'ReadOnlyMany', 'ReadWriteMany', 'ReadWriteOncePod']);

/** Each mode at most once in a valid list: a longer one is not shared (the map stays small). */
const modesSharedMax = accessModes.size;
