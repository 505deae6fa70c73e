/**
 * `vole csi-driver --faults FILE`: the file read before every call, an error answered
 * instead of the work, a delay before it, `times` counted from the file's last change, and
 * a broken file answered with a message that says to fix it.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { withFaults } from '../../src/csi/driver/faults.js';
import { DriverError } from '../../src/csi/driver/errors.js';

const dir = mkdtempSync(join(tmpdir(), 'vole-faults-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const calls: string[] = [];
const handlers = {
  NodeUnpublishVolume: async () => (calls.push('unpublish'), {}),
  ControllerPublishVolume: async () => (calls.push('publish'), { publish_context: {} }),
};

test('faults: an error instead of the work while the file says so, none once it is gone', async () => {
  const file = join(dir, 'error.json');
  const faulty = withFaults(handlers, file);
  calls.length = 0;
  await faulty.NodeUnpublishVolume!({});
  writeFileSync(file, JSON.stringify({ NodeUnpublishVolume: { error: 'device is busy' } }));
  await assert.rejects(faulty.NodeUnpublishVolume!({}), (e: DriverError) => {
    assert.equal(e.code, 'INTERNAL');
    assert.equal(e.message, 'NodeUnpublishVolume: device is busy');
    return true;
  });
  await faulty.ControllerPublishVolume!({}); // another RPC: untouched
  rmSync(file);
  await faulty.NodeUnpublishVolume!({});
  assert.deepEqual(calls, ['unpublish', 'publish', 'unpublish']);
});

test('faults: a delay before the work, for the first `times` calls since the file changed', async () => {
  const file = join(dir, 'delay.json');
  const faulty = withFaults(handlers, file);
  writeFileSync(file, JSON.stringify({ ControllerPublishVolume: { delaySeconds: 0.3, times: 1 } }));
  const timed = async () => {
    const start = Date.now();
    await faulty.ControllerPublishVolume!({});
    return Date.now() - start;
  };
  assert.ok((await timed()) >= 290, 'the first call waits');
  assert.ok((await timed()) < 200, 'the second does not');
  writeFileSync(file, JSON.stringify({ ControllerPublishVolume: { delaySeconds: 0.3, times: 2 } }));
  assert.ok((await timed()) >= 290, 'a changed file counts again');
});

test('faults: a file that is not valid is said, naming the file', async () => {
  const file = join(dir, 'bad.json');
  const faulty = withFaults(handlers, file);
  writeFileSync(file, '{"NodeUnpublishVolume": {"eror": "typo"}}');
  await assert.rejects(
    faulty.NodeUnpublishVolume!({}),
    /faults file .*bad\.json is not valid: .*fix or remove it/,
  );
  writeFileSync(file, 'not json');
  await assert.rejects(faulty.NodeUnpublishVolume!({}), /is not valid/);
});
