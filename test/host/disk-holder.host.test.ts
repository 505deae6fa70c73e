/**
 * The loop disk's holder file names the node a ReadWriteOnce disk is attached to. An agent
 * killed while writing it must not leave a file that names no node and refuses every
 * attach after (crash.host.test.ts found one: "attached to node ;" forever).
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { test } from 'node:test';
import { diskImagePath } from '../../src/host/paths.js';
import type { ResolvedVolume } from '../../src/operations/volume-spec.js';
import { diskPlugin } from '../../src/plugins/builtin/disk.js';
import type { CallTarget } from '../../src/plugins/types.js';
import { hostSandbox, hostTestSkipReason } from '../support/host.js';

const skip = hostTestSkipReason();
const { root } = hostSandbox('disk-holder');

const spec = {
  volume: 'disk.vole.dev/holder-1',
  traits: { sizeBytes: 16 * 2 ** 20, multiAttachAllowed: false, readOnly: false },
  source: { kind: 'csi', driver: 'disk.vole.dev', volumeHandle: 'holder-1', fsType: 'ext4' },
} as unknown as ResolvedVolume;
const target = (node: string): CallTarget => ({
  node,
  pod: null,
  signal: new AbortController().signal,
});

test(
  'host: a disk whose holder file a crash left empty attaches again; another node is still refused',
  { skip },
  async () => {
    const attacher = diskPlugin({ root }).attacher!;
    const holder = `${diskImagePath(root, 'holder-1')}.attached-to`;
    const device = await attacher.attach(spec, target('node-1'));
    try {
      assert.equal(readFileSync(holder, 'utf8'), 'node-1');
      await assert.rejects(
        attacher.attach(spec, target('node-2')),
        /attached to node node-1; a ReadWriteOnce disk is attached to one node at a time/,
      );
      writeFileSync(holder, ''); // what a write cut off after its truncation leaves
      assert.equal(
        await attacher.attach(spec, target('node-1')),
        device,
        'attached again, same loop',
      );
      assert.equal(readFileSync(holder, 'utf8'), 'node-1', 'the holder named again');
    } finally {
      await attacher.detach(spec, target('node-1'));
    }
    assert.equal(await attacher.isAttached!(spec), false);
  },
);
