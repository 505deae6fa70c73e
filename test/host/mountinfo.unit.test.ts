/**
 * The mount table parser and the questions asked of it, on mountinfo text: pure, runs
 * anywhere. Also the classification of mount(8) failures, which is pure text work too.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { classifyMountFailure, HostError } from '../../src/host/errors.js';
import {
  bindSourceOf,
  escapeOctal,
  findMountAt,
  findMountRefs,
  findMountsUnder,
  formatMountInfoLine,
  MountInfoParseError,
  mountRefs,
  mountsUnder,
  parseMountInfo,
  unescapeOctal,
  type MountEntry,
} from '../../src/host/mountinfo.js';

// A node with a global ext4 device mount bound into two pods, a tmpfs, and a path with a space.
const pods = '/var/lib/vole/pods';
const global = '/var/lib/vole/plugins/disk.vole.dev/mounts/data';
const sample = [
  '21 26 0:20 / /proc rw,relatime - proc proc rw',
  '26 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw,discard',
  `84 26 7:2 / ${global} rw,relatime shared:40 - ext4 /dev/loop2 rw`,
  `85 26 7:2 / ${pods}/uid-a/volumes/disk.vole.dev/data rw,relatime shared:40 - ext4 /dev/loop2 rw`,
  `86 26 7:2 / ${pods}/uid-b/volumes/disk.vole.dev/data ro shared:40 master:3 - ext4 /dev/loop2 rw`,
  `87 26 7:2 /sub ${pods}/uid-c/volumes/disk.vole.dev/sub rw,relatime - ext4 /dev/loop2 rw`,
  `88 26 0:38 / ${pods}/uid-a/volumes/kubernetes.io~empty-dir/my\\040c rw - tmpfs tmpfs size=16k`,
  '',
].join('\n');

test('mountinfo: parse: every field of a line with optional fields', () => {
  const entries = parseMountInfo(sample);
  assert.equal(entries.length, 7);
  assert.deepEqual(entries[2], {
    mountId: 84,
    parentId: 26,
    majorMinor: '7:2',
    root: '/',
    mountPoint: '/var/lib/vole/plugins/disk.vole.dev/mounts/data',
    mountOptions: ['rw', 'relatime'],
    optionalFields: ['shared:40'],
    fsType: 'ext4',
    source: '/dev/loop2',
    superOptions: ['rw'],
  });
  assert.deepEqual(entries[0]!.optionalFields, [], 'no optional fields');
  assert.deepEqual(entries[4]!.optionalFields, ['shared:40', 'master:3'], 'two optional fields');
});

test('mountinfo: parse: octal escapes are decoded (\\040 is a space)', () => {
  const tmpfs = parseMountInfo(sample)[6]!;
  assert.equal(tmpfs.mountPoint, `${pods}/uid-a/volumes/kubernetes.io~empty-dir/my c`);
  assert.deepEqual(tmpfs.superOptions, ['size=16k']);
  assert.equal(unescapeOctal('a\\011b\\012c\\134d'), 'a\tb\nc\\d');
});

test('mountinfo: parse: a malformed line throws, naming the line', () => {
  assert.throws(
    () => parseMountInfo('21 26 0:20 / /proc rw,relatime proc proc rw'),
    (error: unknown) => {
      assert.ok(error instanceof MountInfoParseError);
      assert.equal(error.lineNumber, 1);
      assert.match(error.message, /mountinfo line 1 lacks the "-" separator/);
      return true;
    },
  );
  assert.throws(() => parseMountInfo('x 26 0:20 / /proc rw - proc proc rw'), /non-numeric ids/);
  assert.throws(() => parseMountInfo('1 26 zero / /proc rw - proc proc rw'), /no major:minor/);
  assert.deepEqual(parseMountInfo(''), [], 'an empty table is not an error');
});

test('mountinfo: mountRefs: the bind mounts of a global mount, not itself nor another root', () => {
  const table = parseMountInfo(sample);
  assert.deepEqual(findMountRefs(table, global), [
    `${pods}/uid-a/volumes/disk.vole.dev/data`,
    `${pods}/uid-b/volumes/disk.vole.dev/data`,
  ]);
  assert.deepEqual(
    mountRefs(table, `${global}/`),
    findMountRefs(table, global),
    'a trailing slash is the same path',
  );
  assert.deepEqual(
    findMountRefs(table, '/var/lib/vole/nothing-here'),
    [],
    'no mount there: no refs',
  );
});

test('mountinfo: mountsUnder: whole components only, parents first', () => {
  const table = parseMountInfo(sample);
  const under = (dir: string) => mountsUnder(table, dir).map((e) => e.mountId);
  assert.deepEqual(under(`${pods}/uid-a`), [85, 88]);
  assert.deepEqual(under(`${pods}/uid-`), [], '/uid- is not a prefix of /uid-a');
  assert.deepEqual(findMountsUnder(table, '/').length, 7, 'everything is under /');
});

test('mountinfo: findMountAt: the topmost of stacked mounts', () => {
  const stacked = parseMountInfo(`${sample}90 88 0:40 / /proc rw - proc proc rw\n`);
  assert.equal(findMountAt(stacked, '/proc')?.mountId, 90);
  assert.equal(findMountAt(stacked, '/nope'), undefined);
});

test('mountinfo: bindSourceOf: device and directory within the deepest containing mount', () => {
  const table = parseMountInfo(sample);
  assert.deepEqual(bindSourceOf(table, '/var/lib/vole/plugins/disk.vole.dev/mounts/data/sub'), {
    majorMinor: '7:2',
    root: '/sub',
  });
  assert.deepEqual(bindSourceOf(table, '/var/lib/vole/plugins/disk.vole.dev/mounts/data'), {
    majorMinor: '7:2',
    root: '/',
  });
  assert.deepEqual(bindSourceOf(table, '/etc'), { majorMinor: '254:0', root: '/etc' });
});

const anyPath = fc
  .array(fc.string({ unit: 'binary', minLength: 1, maxLength: 12 }), { minLength: 1, maxLength: 4 })
  .map((parts) => `/${parts.join('/')}`);

test('mountinfo: property: escapeOctal round-trips and leaves no space, tab or newline', () => {
  fc.assert(
    fc.property(fc.string({ unit: 'binary' }), (s) => {
      const escaped = escapeOctal(s);
      assert.equal(unescapeOctal(escaped), s);
      assert.doesNotMatch(escaped, /[ \t\n]/);
    }),
    { numRuns: 500 },
  );
});

test('mountinfo: property: a formatted line parses back to the same entry', () => {
  const option = fc
    .string({ unit: 'binary', minLength: 1, maxLength: 10 })
    .filter((o) => !o.includes(','));
  const entry: fc.Arbitrary<MountEntry> = fc
    .record({
      mountId: fc.nat(),
      parentId: fc.nat(),
      majorMinor: fc.tuple(fc.nat(4095), fc.nat(1 << 20)).map(([a, b]) => `${a}:${b}`),
      root: anyPath,
      mountPoint: anyPath,
      mountOptions: fc.array(option, { maxLength: 4 }),
      optionalFields: fc.array(
        fc.constantFrom('shared:1', 'master:7', 'propagate_from:2', 'unbindable'),
        { maxLength: 2 },
      ),
      fsType: fc.constantFrom('ext4', 'xfs', 'tmpfs', 'fuse.sshfs'),
      source: fc.oneof(anyPath, fc.constantFrom('tmpfs', 'none')),
      superOptions: fc.array(option, { maxLength: 4 }),
    })
    .map((record) => ({ ...record })); // fast-check builds null-prototype records
  fc.assert(
    fc.property(fc.array(entry, { maxLength: 5 }), (entries) => {
      const text = entries.map(formatMountInfoLine).join('\n');
      assert.deepEqual(parseMountInfo(text), entries);
    }),
    { numRuns: 300 },
  );
});

test('host errors: mount(8) failures are classified by what they leave behind', () => {
  const kind = (stderr: string) => classifyMountFailure(stderr).kind;
  assert.equal(kind('umount: /x: target is busy.'), 'transient');
  assert.equal(kind('umount: /x: not mounted.'), 'final');
  assert.equal(kind('mount: /x: special device /dev/nope does not exist.'), 'final');
  assert.equal(
    kind('mount: /x: wrong fs type, bad option, bad superblock on /dev/loop2, missing codepage'),
    'final',
  );
  assert.equal(kind("mount: /x: can't read superblock on /dev/loop2."), 'final');
  assert.equal(kind('mount: /x: must be superuser to use mount.'), 'final');
  assert.equal(kind('mount: /x: /dev/loop2 already mounted on /y.'), 'uncertain');
  assert.equal(
    kind('mount: /x: something the kernel never said before'),
    'uncertain',
    'unknown: look before retrying',
  );
  assert.match(classifyMountFailure('umount: /x: target is busy.').fix, /stop it and retry/);
});

test('host errors: HostError carries kind, command and trimmed stderr', () => {
  const error = new HostError('final', 'umount -- /x failed: not mounted; use ensureUnmounted', {
    command: 'umount -- /x',
    stderr: 'umount: /x: not mounted.\n',
  });
  assert.equal(error.kind, 'final');
  assert.equal(error.command, 'umount -- /x');
  assert.equal(error.stderr, 'umount: /x: not mounted.');
  assert.equal(new HostError('transient', 'no command').command, '', 'details are optional');
});
