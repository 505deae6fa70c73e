/**
 * The packed package on a real host: an empty TypeScript project (strict, NodeNext)
 * installs the tarball, compiles examples/csi-agent.ts against it, starts the installed
 * `vole csi-driver` (its bin, loading the .proto files from the package) and runs the
 * agent against it. The agent mounts a pod's CSI volume through `vole/csi`, writes a file
 * through the mount and reads it back; afterwards nothing is mounted and no loop device is
 * left. As root in a private mount namespace, as every host test.
 */
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { listLoops } from '../../src/host/loop.js';
import { mountsUnder, readMountTable } from '../../src/host/mountinfo.js';
import { stop } from '../csi/support.js';
import { consumerProject, pack } from '../support/consumer.js';
import { hostSandbox, hostTestSkipReason, until } from '../support/host.js';

const skip = hostTestSkipReason();
const { base } = skip === false ? hostSandbox('consumer') : { base: '' };

test(
  'host: the installed package mounts a pod’s CSI volume through vole/csi and the installed vole csi-driver',
  { skip, timeout: 300_000 },
  async (t) => {
    const { tarball } = pack(base);
    const project = join(base, 'project');
    const { tsc } = consumerProject(project, tarball);
    t.diagnostic(`tsc: ${tsc.trim()}`);
    const socket = join(base, 'csi.sock');
    const vole = join(project, 'node_modules', '.bin', 'vole');
    const driver = spawn(
      vole,
      [
        'csi-driver',
        '--endpoint',
        `unix://${socket}`,
        '--node-id',
        'node-1',
        '--state-dir',
        join(base, 'state'),
      ],
      { cwd: project, stdio: ['ignore', 'pipe', 'inherit'] },
    );
    driver.stdout.setEncoding('utf8');
    let driverOut = '';
    driver.stdout.on('data', (chunk: string) => (driverOut += chunk));
    try {
      await until(() => existsSync(socket), 'the installed vole csi-driver’s socket');
      const root = join(base, 'root');
      const { stdout } = await promisify(execFile)(
        process.execPath,
        ['agent.js', `unix://${socket}`, root],
        { cwd: project, encoding: 'utf8', timeout: 120_000 },
      );
      t.diagnostic(`vole csi-driver: ${driverOut.trim()}`);
      t.diagnostic(`agent:\n${stdout.trim()}`);
      assert.match(stdout, /mounted: \[ 'data' \]/);
      assert.match(stdout, /read back: written through vole\/csi/);
      assert.match(stdout, /in use: \[\]/);
    } finally {
      await stop(driver);
    }
    assert.deepEqual(
      mountsUnder(await readMountTable(), base).map((m) => m.mountPoint),
      [],
      'no mounts left',
    );
    const loops = (await listLoops()).filter((l) => l.backFile.startsWith(base));
    assert.deepEqual(
      loops.map((l) => l.name),
      [],
      'no loop devices left',
    );
  },
);
