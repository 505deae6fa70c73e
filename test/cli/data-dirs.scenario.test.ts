/**
 * `vole run` makes its data directories at start, as the kubelet's setupDataDirs does: the
 * root, `plugins/` and `plugins_registry/`, each 0750. A CSI driver's node-driver-registrar
 * started after the agent binds its registration socket in `plugins_registry/`; before,
 * it found no directory and exited ("bind: no such file or directory").
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { startVole } from '../support/agent-process.js';

const dir = mkdtempSync(join(tmpdir(), 'vole-data-dirs-'));
after(() => rmSync(dir, { recursive: true, force: true }));

test('vole run makes <root>, plugins/ and plugins_registry/ (0750) before anything registers', async () => {
  const manifests = join(dir, 'manifests');
  mkdirSync(manifests);
  const root = join(dir, 'fresh', 'root');
  const agent = startVole(['run', '--manifests', manifests, '--root', root]);
  try {
    await agent.line(/^\[\+[\d.]+s\] vole agent on node-1: /);
    // The kubelet's modes; a umask that takes none of 0750's bits (022, 027) keeps them.
    const umask = process.umask();
    for (const path of [root, join(root, 'plugins'), join(root, 'plugins_registry')]) {
      const st = statSync(path);
      assert.ok(st.isDirectory(), `${path} is a directory`);
      assert.equal(st.mode & 0o777, 0o750 & ~umask, `${path}'s mode`);
    }
    // What a registrar does first: listen on its socket there.
    const server = createServer();
    const socket = join(root, 'plugins_registry', 'example.csi.k8s.io-reg.sock');
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(socket, resolve);
    });
    assert.ok(statSync(socket).isSocket());
    await new Promise<void>((resolve) => server.close(() => resolve()));
  } finally {
    await agent.stop();
  }
});
