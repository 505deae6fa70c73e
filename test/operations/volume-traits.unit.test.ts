/**
 * A resolved spec's traits shared (src/operations/volume-traits.ts): every spec of equal
 * traits holds one frozen object, so a spec keeps 7 fields where it kept 17, and sizes
 * past 2^31 are boxed in the shared traits, not in every spec.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { volumeTraitsMax } from '../../src/constants.js';
import type { PersistentVolume } from '../../src/events/k8s.js';
import type { ResolvedVolume, VolumeTraits } from '../../src/operations/volume-spec.js';
import { volumeTraits, volumeTraitsHeld } from '../../src/operations/volume-traits.js';
import { caps } from '../../src/plugins/types.js';
import { resolvePersistentVolume } from '../../src/desired/resolve.js';
import { keptBytesEach } from '../support/heap.js';

const count = 20_000;
const plugins = new Map([['fake.disk', caps('fake.disk', { attachable: true })]]);

/** A CSI PV of `storage`, as the controller reads one. */
function pv(name: string, storage: string): PersistentVolume {
  return {
    apiVersion: 'v1',
    kind: 'PersistentVolume',
    metadata: { name },
    spec: {
      capacity: { storage },
      accessModes: ['ReadWriteOnce'],
      csi: { driver: 'fake.disk', volumeHandle: name },
    },
  };
}

const traits: VolumeTraits = {
  pluginName: 'fake.disk',
  attachable: true,
  deviceMountable: false,
  requiresRemount: false,
  multiAttachAllowed: false,
  volumeMode: 'Filesystem',
  sizeBytes: 2 ** 40,
  claimSizeBytes: 0,
  volumeGidValue: '',
  readOnly: false,
  accessModes: ['ReadWriteOnce'],
};

test('equal traits are one frozen object; unequal ones are not', () => {
  const one = volumeTraits(traits);
  assert.equal(volumeTraits({ ...traits, accessModes: ['ReadWriteOnce'] }), one);
  assert.ok(Object.isFrozen(one) && Object.isFrozen(one.accessModes), 'nothing can change it');
  assert.deepEqual(one, traits);
  for (const other of [
    { ...traits, sizeBytes: 2 ** 41 },
    { ...traits, claimSizeBytes: 1 },
    { ...traits, readOnly: true },
    { ...traits, accessModes: ['ReadWriteOnce', 'ReadOnlyMany'] },
    { ...traits, volumeGidValue: '1000' },
  ]) {
    const made = volumeTraits(other);
    assert.notEqual(made, one);
    assert.deepEqual(made, other);
    assert.equal(volumeTraits(other), made, 'and each shared in turn');
  }
});

test('traits whose key is alike but whose fields are not are kept apart', () => {
  // The key joins the fields with newlines: a plugin name holding one can mimic another's.
  const a = volumeTraits({ ...traits, pluginName: 'p', volumeGidValue: 'x\ny' });
  const b = volumeTraits({ ...traits, pluginName: 'p', volumeGidValue: 'x', accessModes: ['y'] });
  assert.notEqual(a, b);
  assert.equal(a.volumeGidValue, 'x\ny');
  assert.deepEqual(b.accessModes, ['y']);
});

test('the table of traits is bounded, and still answers equal traits past its bound', () => {
  for (let i = 0; i <= volumeTraitsMax; i++) volumeTraits({ ...traits, sizeBytes: i });
  assert.ok(volumeTraitsHeld() <= volumeTraitsMax, `${volumeTraitsHeld()} held`);
  const again = volumeTraits({ ...traits, sizeBytes: 7 });
  assert.equal(again.sizeBytes, 7);
  assert.equal(volumeTraits({ ...traits, sizeBytes: 7 }), again);
});

test('specs of one plugin and PV shape share their traits, sizes past 2^31 included', () => {
  const a = resolvePersistentVolume(pv('pv-a', '4Ti'), plugins);
  const b = resolvePersistentVolume(pv('pv-b', '4Ti'), plugins);
  assert.ok(a !== undefined && b !== undefined, 'both resolve');
  assert.equal(a.traits, b.traits);
  assert.equal(a.traits.sizeBytes, 4 * 2 ** 40);
  assert.deepEqual(Object.keys(a), [
    'outerVolumeSpecName',
    'innerVolumeSpecName',
    'volume',
    'traits',
    'source',
    'claim',
    'claimNamespace',
  ]);
});

test('a spec keeps 7 fields of its own: 80 bytes where the flat one kept 160 and two boxes', () => {
  const volume = pv('pv-a', '4Ti');
  const resolved = () => resolvePersistentVolume(volume, plugins)!;
  const measure = () => keptBytesEach(() => Array.from({ length: count }, resolved));
  // The shape before: the traits' 11 fields in the spec, its source and name as above.
  const flat = (s: ResolvedVolume) => ({
    outerVolumeSpecName: s.outerVolumeSpecName,
    innerVolumeSpecName: s.innerVolumeSpecName,
    volume: s.volume,
    pluginName: s.traits.pluginName,
    attachable: s.traits.attachable,
    deviceMountable: s.traits.deviceMountable,
    requiresRemount: s.traits.requiresRemount,
    multiAttachAllowed: s.traits.multiAttachAllowed,
    volumeMode: s.traits.volumeMode,
    sizeBytes: s.traits.sizeBytes,
    claimSizeBytes: s.traits.claimSizeBytes,
    volumeGidValue: s.traits.volumeGidValue,
    readOnly: s.traits.readOnly,
    accessModes: s.traits.accessModes,
    source: s.source,
    claim: s.claim,
    claimNamespace: s.claimNamespace,
  });
  const before = () => keptBytesEach(() => Array.from({ length: count }, () => flat(resolved())));
  measure(); // a first round grows what the measured ones would be charged for
  const shared = measure();
  const old = before();
  // Each with its source (64 bytes), its name (40) and a slot of the array: the spec 80
  // bytes against 160 and a box of 16 for its size past 2^31 before (184 against 281).
  const kept = `a spec keeps ${Math.round(shared)} bytes, the flat one ${Math.round(old)}`;
  assert.ok(shared <= 200, kept);
  assert.ok(old - shared >= 80, kept);
});
