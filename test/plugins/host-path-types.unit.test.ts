/**
 * hostPath types as the kubelet checks them (checkTypeInternal and typeMatchedOrError in
 * pkg/volume/hostpath/host_path.go, getFileType in pkg/volume/util/hostutil/hostutil.go):
 * each type against a directory, a file, a socket, a character device and a missing path,
 * with the kubelet's messages word for word, and what the two *OrCreate types make.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { checkHostPathType } from '../../src/plugins/builtin/host-path.js';

const base = mkdtempSync(join(tmpdir(), 'vole-hostpath-'));
const dir = join(base, 'dir');
const file = join(base, 'file');
const socket = join(base, 'sock');
const missing = join(base, 'missing');
let server: Server;

before(async () => {
  mkdirSync(dir);
  writeFileSync(file, 'x');
  server = createServer();
  await new Promise<void>((resolve) => server.listen(socket, resolve));
});
after(async () => {
  await new Promise((resolve) => server.close(resolve));
  rmSync(base, { recursive: true, force: true });
});

const failure = async (path: string, type: string) =>
  checkHostPathType(path, type).then(
    () => 'ok',
    (error: Error) => error.message,
  );

test('hostPath: each type matches only its own kind of path', async () => {
  for (const [type, ok] of [
    ['Directory', dir],
    ['File', file],
    ['Socket', socket],
    ['CharDevice', '/dev/null'],
  ] as const)
    assert.equal(await failure(ok, type), 'ok', type);
  assert.deepEqual(await checkHostPathType(dir, 'Directory'), { isFile: false });
  assert.deepEqual(await checkHostPathType(file, 'File'), { isFile: true });
});

test("hostPath: a path of another kind fails in the kubelet's words, naming what it is", async () => {
  assert.equal(
    await failure(file, 'Directory'),
    `hostPath type check failed: ${file} is not a directory, it's a File`,
  );
  assert.equal(
    await failure(dir, 'FileOrCreate'),
    `hostPath type check failed: ${dir} is not a file, it's a Directory`,
  );
  assert.equal(
    await failure(file, 'Socket'),
    `hostPath type check failed: ${file} is not a socket file, it's a File`,
  );
  assert.equal(
    await failure(socket, 'CharDevice'),
    `hostPath type check failed: ${socket} is not a character device, it's a Socket`,
  );
  assert.equal(
    await failure('/dev/null', 'BlockDevice'),
    "hostPath type check failed: /dev/null is not a block device, it's a CharDevice",
  );
  assert.equal(
    await failure(missing, 'Directory'),
    `hostPath type check failed, ${missing} is not a directory, unable to determine its type: ` +
      `path "${missing}" does not exist`,
  );
});

test('hostPath: DirectoryOrCreate makes the directory and its parents 0755; FileOrCreate the file only', async () => {
  const nested = join(base, 'made/deep');
  assert.deepEqual(await checkHostPathType(nested, 'DirectoryOrCreate'), { isFile: false });
  assert.equal(statSync(nested).mode & 0o777, 0o755);
  const made = join(base, 'made.txt');
  assert.deepEqual(await checkHostPathType(made, 'FileOrCreate'), { isFile: true });
  assert.equal(statSync(made).size, 0);
  // makeFile opens with O_CREATE only: a missing directory fails the pod.
  const orphan = join(base, 'no-such-dir/f.txt');
  assert.equal(await failure(orphan, 'FileOrCreate'), `open ${orphan}: no such file or directory`);
  assert.equal(existsSync(join(base, 'no-such-dir')), false);
});

test('hostPath: an unset type is not checked, but the path must exist for vole to bind it', async () => {
  assert.deepEqual(await checkHostPathType(file, ''), { isFile: true });
  assert.deepEqual(await checkHostPathType(dir, ''), { isFile: false });
  assert.equal(await failure(missing, ''), `hostPath ${missing}: path "${missing}" does not exist`);
});
