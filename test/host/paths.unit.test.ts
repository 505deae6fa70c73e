/**
 * The kubelet-like layout under vole's root and path safety. The layout is pure; the
 * symlink-escape checks use a scratch directory under os.tmpdir(), so this runs anywhere.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import fc from 'fast-check';
import { nameBytesMax } from '../../src/host/limits.js';
import {
  assertInside,
  assertNoSymlinkEscape,
  diskImagePath,
  escapePluginName,
  globalMapPath,
  isInside,
  PathEscapeError,
  pluginGlobalMountPath,
  podVolumeDevicePath,
  podVolumeDir,
  resolveInside,
  safeName,
  UnsafeNameError,
} from '../../src/host/paths.js';

const root = '/var/lib/vole';

test('paths: layout: pod volume dir escapes the plugin name as the kubelet does', () => {
  assert.equal(escapePluginName('kubernetes.io/empty-dir'), 'kubernetes.io~empty-dir');
  assert.equal(
    podVolumeDir(root, 'uid-1', 'kubernetes.io/empty-dir', 'cache'),
    '/var/lib/vole/pods/uid-1/volumes/kubernetes.io~empty-dir/cache',
  );
  assert.equal(
    podVolumeDevicePath(root, 'uid-1', 'disk.vole.dev', 'raw'),
    '/var/lib/vole/pods/uid-1/volumeDevices/disk.vole.dev/raw',
  );
});

test('paths: layout: global mount, global map path and disk image', () => {
  assert.equal(
    pluginGlobalMountPath(root, 'disk.vole.dev', 'data-1'),
    '/var/lib/vole/plugins/disk.vole.dev/mounts/data-1',
  );
  assert.equal(
    globalMapPath(root, 'disk.vole.dev', 'data-1'),
    '/var/lib/vole/plugins/disk.vole.dev/volumeDevices/data-1',
  );
  assert.equal(diskImagePath(root, 'data-1'), '/var/lib/vole/disks/data-1.img');
  assert.equal(
    pluginGlobalMountPath(root, 'kubernetes.io/x', 'v'),
    '/var/lib/vole/plugins/kubernetes.io~x/mounts/v',
  );
});

test('paths: layout: a relative root is refused', () => {
  assert.throws(
    () => podVolumeDir('var/lib/vole', 'uid', 'p', 'v'),
    /root "var\/lib\/vole" must be an absolute path/,
  );
});

test('paths: safeName: each rule refuses with the field and the rule in the message', () => {
  const refuses = (value: string, rule: RegExp) =>
    assert.throws(
      () => safeName('pod uid', value),
      (error: unknown) => {
        assert.ok(error instanceof UnsafeNameError);
        assert.equal(error.field, 'pod uid');
        assert.equal(error.value, value);
        assert.match(error.message, rule);
        return true;
      },
    );
  refuses('../x', /^pod uid "\.\.\/x" must not contain "\/"; use a Kubernetes-style name/);
  refuses('', /must not be empty/);
  refuses('.', /must not be "\." or "\.\."/);
  refuses('..', /must not be "\." or "\.\."/);
  refuses('a\0b', /must not contain NUL/);
  refuses('x'.repeat(nameBytesMax + 1), /must be at most 253 bytes/);
  refuses('é'.repeat(127), /at most 253 bytes/); // 127 characters, 254 bytes: bytes count
  assert.equal(safeName('pod uid', 'x'.repeat(nameBytesMax)), 'x'.repeat(nameBytesMax));
  assert.equal(safeName('pod uid', '...'), '...', 'three dots are an ordinary name');
});

test('paths: safeName: a hostile name reaches the layout functions as an error', () => {
  assert.throws(
    () => podVolumeDir(root, '../../etc', 'p', 'v'),
    /pod uid "\.\.\/\.\.\/etc" must not contain "\/"/,
  );
  assert.throws(() => podVolumeDir(root, 'uid', 'p', '..'), /volume name "\.\." must not be/);
  assert.throws(() => diskImagePath(root, 'a/b'), /volume handle "a\/b" must not contain "\/"/);
  assert.throws(() => escapePluginName('..'), /plugin name/);
  const long = 'y'.repeat(10_000);
  assert.throws(
    () => safeName('volume name', long),
    (error: unknown) => {
      assert.ok(
        error instanceof Error && error.message.length < 300,
        'a long value is cut in the message',
      );
      return true;
    },
  );
});

test('paths: property: safeName never accepts "/", NUL or ".."', () => {
  const withSlash = fc.tuple(fc.string(), fc.string()).map(([a, b]) => `${a}/${b}`);
  const withNul = fc.tuple(fc.string(), fc.string()).map(([a, b]) => `${a}\0${b}`);
  fc.assert(
    fc.property(fc.oneof(withSlash, withNul, fc.constant('..')), (value) => {
      assert.throws(() => safeName('name', value), UnsafeNameError);
    }),
    { numRuns: 1000 },
  );
  fc.assert(
    fc.property(fc.string({ unit: 'binary' }), (value) => {
      let accepted = true;
      try {
        safeName('name', value);
      } catch {
        accepted = false;
      }
      const safe =
        value !== '' &&
        value !== '.' &&
        value !== '..' &&
        !value.includes('/') &&
        !value.includes('\0') &&
        Buffer.byteLength(value) <= nameBytesMax;
      assert.equal(accepted, safe);
    }),
    { numRuns: 1000 },
  );
});

test('paths: property: safeName always accepts [a-z0-9-]{1,63}', () => {
  fc.assert(
    fc.property(fc.stringMatching(/^[a-z0-9-]{1,63}$/), (value) => {
      assert.equal(safeName('name', value), value);
    }),
    { numRuns: 1000 },
  );
});

test('paths: isInside compares whole components', () => {
  assert.equal(isInside('/a/b', '/a/b'), true);
  assert.equal(isInside('/a/b', '/a/b/c'), true);
  assert.equal(isInside('/a/b', '/a/bc'), false);
  assert.equal(isInside('/a/b', '/a'), false);
  assert.equal(isInside('/a/b', '/a/b/..x'), true, '"..x" is a name, not a parent');
  assert.equal(isInside('/', '/anything'), true);
});

const scratch = mkdtempSync(join(tmpdir(), 'vole-paths-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

test('paths: symlink escape: a pod directory that links to /etc is refused', async () => {
  const base = join(scratch, 'escape');
  mkdirSync(join(base, 'pods'), { recursive: true });
  symlinkSync('/etc', join(base, 'pods', 'uid-evil'));
  const target = podVolumeDir(base, 'uid-evil', 'p', 'v');
  await assert.rejects(assertNoSymlinkEscape(base, target), (error: unknown) => {
    assert.ok(error instanceof PathEscapeError);
    assert.equal(error.resolved, '/etc/volumes/p/v');
    assert.match(error.message, /outside .*; remove the symlink/);
    return true;
  });
  assert.throws(() => assertInside(base, target), PathEscapeError, 'the synchronous form agrees');
  await assert.rejects(resolveInside(base, 'pods/uid-evil/volumes'), PathEscapeError);
});

test('paths: symlink escape: links inside, and paths not made yet, are allowed', async () => {
  const base = join(scratch, 'inside');
  mkdirSync(join(base, 'real'), { recursive: true });
  symlinkSync(join(base, 'real'), join(base, 'alias'));
  assert.equal(await resolveInside(base, 'alias/not/made/yet'), join(base, 'real/not/made/yet'));
  assert.equal(
    await assertNoSymlinkEscape(base, join(base, 'pods/uid/volumes')),
    join(base, 'pods/uid/volumes'),
  );
  assert.equal(assertInside(base, join(base, 'alias')), join(base, 'real'));
});

test('paths: resolveInside refuses absolute and ".." paths before looking', async () => {
  await assert.rejects(
    resolveInside('/var/lib/vole', '/etc'),
    /relative path "\/etc" must be relative/,
  );
  await assert.rejects(
    resolveInside('/var/lib/vole', 'pods/../../etc'),
    /must not contain "\.\." components/,
  );
  await assert.rejects(assertNoSymlinkEscape('/var/lib/vole', 'pods'), /must be absolute/);
});
