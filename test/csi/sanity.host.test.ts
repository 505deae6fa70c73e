/**
 * The CSI conformance suite, csi-sanity (kubernetes-csi/csi-test), against `vole csi-driver`
 * as a separate process, once for the Filesystem and once for the Block access type: every
 * spec that applies to what the driver advertises passes, none fails. The driver runs with
 * `--capacity` and `--max-volumes-per-node` so the GetCapacity and attach-limit specs run
 * too; csi-sanity's staging and target paths are in the sandbox, and nothing is left after
 * it (mounts, loop devices, the volumes it created).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { hostSandbox, hostTestSkipReason } from '../support/host.js';
import { peerBin } from '../support/peers.js';
import { assertNothingLeft, sandboxIn, startDriver, stop } from './support.js';

const skip = hostTestSkipReason();
const { base } = skip === false ? hostSandbox('csi-sanity') : { base: '' };

/** The skip reasons of csi-sanity's specs for what the driver does not advertise. */
const notAdvertised =
  /snapshot|cloning|modify volume|ModifyVolume|health|GroupController|readonly|multi writer/i;

interface Summary {
  readonly ran: string;
  readonly line: string;
  readonly passed: number;
  readonly failed: number;
}

/** csi-sanity's "Ran N of M Specs" line and its "SUCCESS! -- P Passed | F Failed | …" line. */
function summaryOf(output: string): Summary {
  const ran = /^Ran \d+ of \d+ Specs.*$/m.exec(output)?.[0];
  const line =
    /^(SUCCESS!|FAIL!) -- (\d+) Passed \| (\d+) Failed \| \d+ Pending \| \d+ Skipped$/m.exec(
      output,
    );
  assert.ok(
    ran !== undefined && line !== null,
    `no csi-sanity summary in its output:\n${output.slice(-4000)}`,
  );
  return { ran, line: line[0], passed: Number(line[2]), failed: Number(line[3]) };
}

/** Runs csi-sanity to the end (its own PID, ended on timeout); its whole output. */
function runSanity(args: string[], timeoutMs: number): Promise<string> {
  const child = spawn(peerBin('csi-sanity'), args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const timer = setTimeout(() => process.kill(child.pid!, 'SIGKILL'), timeoutMs);
  return new Promise((resolve) =>
    child.once('close', () => {
      clearTimeout(timer);
      resolve(output);
    }),
  );
}

for (const accessType of ['mount', 'block'] as const) {
  test(
    `host: csi-sanity against vole csi-driver, ${accessType} access type: 0 failed`,
    { skip, timeout: 360_000 },
    async () => {
      const s = sandboxIn(base, accessType);
      const driver = await startDriver(s, {
        args: ['--capacity', '10Gi', '--max-volumes-per-node', '2'],
      });
      try {
        const output = await runSanity(
          [
            `-csi.endpoint=${s.socket}`,
            `-csi.stagingdir=${join(s.base, 'sanity-staging')}`,
            `-csi.mountdir=${join(s.base, 'sanity-target')}`,
            `-csi.testvolumeaccesstype=${accessType}`,
            `-csi.testvolumesize=${64 * 2 ** 20}`,
            `-csi.testvolumeexpandsize=${128 * 2 ** 20}`,
            '-csi.testnodevolumeattachlimit',
            '-ginkgo.no-color',
            '-ginkgo.v',
          ],
          300_000,
        );
        const summary = summaryOf(output);
        console.log(`csi-sanity (${accessType}): ${summary.ran}`);
        console.log(`csi-sanity (${accessType}): ${summary.line}`);
        const failures = output.split('\n').filter((l) => /^\s*\[FAIL\]/.test(l));
        assert.equal(
          summary.failed,
          0,
          `csi-sanity failures:\n${[...new Set(failures)].join('\n')}`,
        );
        assert.ok(summary.passed > 0, 'csi-sanity passed no spec');
        const skipped = new Set(output.match(/(?<=\[SKIPPED\] )[A-Z].*$/gm) ?? []);
        const advertised = [...skipped].filter((reason) => !notAdvertised.test(reason));
        assert.deepEqual(
          advertised,
          [],
          'no spec of a capability the driver advertises is skipped',
        );
      } finally {
        await stop(driver);
      }
      await assertNothingLeft(s);
      for (const dir of ['volumes', 'images', 'staged'])
        assert.deepEqual(
          readdirSync(join(s.state, dir)),
          [],
          `csi-sanity deleted every volume: ${dir}/ is empty`,
        );
    },
  );
}
