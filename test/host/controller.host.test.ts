/** vole controller with the real disk plugin: attaches a loop device, then detaches it. */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { detachLoopForImage, listLoops } from '../../src/host/loop.js';
import { hostTestSkipReason } from '../support/host.js';

const skip = hostTestSkipReason();
const repo = join(import.meta.dirname, '../..');
const base = mkdtempSync(join(tmpdir(), 'vole-controller-'));
after(async () => {
  for (const loop of await listLoops())
    if (loop.backFile.startsWith(base)) await detachLoopForImage(loop.backFile);
  rmSync(base, { recursive: true, force: true });
});

function controller(manifests: string) {
  return spawnSync(
    process.execPath,
    [
      '--import',
      'tsx',
      join(repo, 'src/cli/main.ts'),
      'controller',
      '--manifests',
      manifests,
      '--root',
      join(base, 'root'),
      '--db',
      join(base, 'controller.db'),
      '--once',
      '--timeout',
      '60',
    ],
    { encoding: 'utf8' },
  );
}

test(
  'host: vole controller attaches a disk for a scheduled pod and detaches it when the pod is gone',
  { skip },
  async () => {
    const manifests = join(base, 'manifests');
    mkdirSync(manifests);
    cpSync(join(repo, 'examples/controller/cluster.yaml'), join(manifests, 'cluster.yaml'));
    const up = controller(manifests);
    assert.equal(up.status, 0, up.stdout + up.stderr);
    assert.match(up.stdout, /node node-1: volumesAttached \[disk\.vole\.dev\/shared-data\]/);
    const image = join(base, 'root/disks/shared-data.img');
    assert.ok(
      (await listLoops()).some((l) => l.backFile === image),
      'a loop device over the disk image',
    );
    // The pod is gone (the manifest keeps only the nodes and the storage).
    const text = await import('node:fs').then((fs) =>
      fs.readFileSync(join(manifests, 'cluster.yaml'), 'utf8'),
    );
    writeFileSync(
      join(manifests, 'cluster.yaml'),
      text.split('\n---\n').slice(0, 4).join('\n---\n'),
    );
    const down = controller(manifests);
    assert.equal(down.status, 0, down.stdout + down.stderr);
    assert.equal(
      (await listLoops()).some((l) => l.backFile === image),
      false,
      'detached',
    );
  },
);
