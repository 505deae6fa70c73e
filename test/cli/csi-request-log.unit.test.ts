/**
 * `vole csi-driver --request-log`: each request is appended as one JSON line before its
 * handler runs, secrets' values redacted, and the handler's answer is passed on unchanged.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { loggedHandlers } from '../../src/cli/csi-driver.js';
import type { CsiRequest } from '../../src/csi/driver/common.js';

test('--request-log: one line per request, in order, secrets redacted, answers unchanged', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'vole-reqlog-'));
  try {
    const file = join(dir, 'requests.jsonl');
    const seen: string[] = [];
    const handlers = loggedHandlers(
      {
        NodeStageVolume: async (r) => {
          seen.push(readFileSync(file, 'utf8')); // written before the handler runs
          return { staged: r.volume_id };
        },
        NodeGetInfo: async () => Promise.reject(new Error('down')),
      },
      file,
    );
    const stage = {
      volume_id: 'v1',
      staging_target_path: '/root/plugins/x/globalmount',
      secrets: { password: 'hunter2' },
    } as CsiRequest;
    assert.deepEqual(await handlers.NodeStageVolume!(stage), { staged: 'v1' });
    await assert.rejects(handlers.NodeGetInfo!({}), /down/);
    const lines = readFileSync(file, 'utf8').trimEnd().split('\n');
    assert.deepEqual(
      lines.map((l) => JSON.parse(l) as unknown),
      [
        {
          rpc: 'NodeStageVolume',
          request: {
            volume_id: 'v1',
            staging_target_path: '/root/plugins/x/globalmount',
            secrets: { password: '<redacted>' },
          },
        },
        { rpc: 'NodeGetInfo', request: {} },
      ],
    );
    assert.equal(seen.length, 1);
    assert.ok(!readFileSync(file, 'utf8').includes('hunter2'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
