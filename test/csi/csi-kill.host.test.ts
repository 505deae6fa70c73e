/**
 * `vole csi-driver` SIGKILLed in the middle of NodeStageVolume and of NodePublishVolume
 * (after its host work, before its answer) while `vole run` waits on it: the pair goes
 * uncertain, the restarted driver is asked again (found again through the plugin
 * registration directory, or through --csi), the pod mounts, and after the pod is removed
 * nothing is left.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { isMountPoint } from '../../src/host/mount.js';
import { hostSandbox, hostTestSkipReason, until } from '../support/host.js';
import {
  agentArgs,
  assertNothingLeft,
  disk,
  events,
  pod,
  type Sandbox,
  sandboxIn,
  startDriver,
  stop,
  targetPath,
  write,
} from './support.js';

const skip = hostTestSkipReason();
const { base } = skip === false ? hostSandbox('csi-kill') : { base: '' };

async function waitFor(
  what: string,
  check: () => Promise<boolean>,
  timeoutMs = 60_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function killMidRpc(
  s: Sandbox,
  rpc: string,
  discovery: 'registration' | 'flag',
): Promise<void> {
  const registrationDir = join(s.root, 'plugins_registry');
  const driverOpts = discovery === 'registration' ? { registrationDir } : {};
  let driver = await startDriver(s, { ...driverOpts, hold: rpc });
  write(s, 'disk.yaml', disk({ name: 'k1', fsType: 'xfs', size: '300Mi' }));
  write(s, 'pod.yaml', pod({ uid: 'uid-k', claim: 'k1' }));
  const flags = discovery === 'flag' ? ['--csi', `disk.csi.vole.dev=unix://${s.socket}`] : [];
  const agent: ChildProcess = spawn(process.execPath, agentArgs(s, flags), { stdio: 'ignore' });
  try {
    await until(() => existsSync(join(s.state, `held-${rpc}`)), `${rpc} to be held`);
    await stop(driver, 'SIGKILL');
    driver = await startDriver(s, driverOpts);
    // The killed driver may have mounted the target already: wait for the pod's setUp to
    // succeed in the log, not for the mount alone.
    await waitFor(
      'the pod to be mounted',
      async () =>
        (await isMountPoint(targetPath(s, 'uid-k'))) &&
        events(s).some((e) => e.type === 'CallSucceeded' && e.call === 'setUp'),
    );
    rmSync(join(s.manifests, 'pod.yaml'));
    await waitFor('the pod to be torn down', async () => !existsSync(targetPath(s, 'uid-k')));
    await waitFor('the volume to be detached', async () => {
      try {
        await assertNothingLeft(s);
        return true;
      } catch {
        return false;
      }
    });
  } finally {
    await stop(agent);
    await stop(driver);
  }
  const log = events(s);
  const cut = log.find(
    (e) =>
      (e.type === 'CallFailed' || e.type === 'CallSucceeded') &&
      (e.rpc as { method?: string } | undefined)?.method?.endsWith(`/${rpc}`) === true,
  );
  assert.ok(cut !== undefined && cut.type === 'CallFailed', `${rpc}'s first answer is a failure`);
  assert.equal(
    (cut.error as { kind: string }).kind,
    'uncertain',
    'the killed RPC leaves its pair uncertain',
  );
  const retried = log.filter(
    (e) =>
      e.type === 'CallSucceeded' &&
      (e.rpc as { method?: string } | undefined)?.method?.endsWith(`/${rpc}`) === true,
  );
  assert.ok(retried.length > 0, `${rpc} retried and succeeded`);
  if (discovery === 'registration')
    assert.ok(
      log.filter((e) => e.type === 'CsiDriverRegistered').length >= 1,
      'registered through plugins_registry',
    );
  await assertNothingLeft(s);
}

test(
  'host: the driver SIGKILLed in NodeStageVolume and restarted: uncertain, retried, nothing leaks',
  { skip, timeout: 180_000 },
  async () => {
    await killMidRpc(sandboxIn(base, 'stage'), 'NodeStageVolume', 'registration');
  },
);

test(
  'host: the driver SIGKILLed in NodePublishVolume and restarted: uncertain, retried, nothing leaks',
  { skip, timeout: 180_000 },
  async () => {
    await killMidRpc(sandboxIn(base, 'publish'), 'NodePublishVolume', 'flag');
  },
);
