/**
 * Every peer scripts/peers.sh builds is a real program that starts: it prints its version
 * (or its help) and exits 0, at the version the peers modules pin.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { hostTestSkipReason } from '../support/host.js';
import { peerNames, peersBinDir } from '../support/peers.js';

/** How each program says its version, and what that output must contain. */
const versionCheck: Record<string, { args: string[]; says: RegExp }> = {
  'csi-sanity': { args: ['--version'], says: /Version = v5\.6\.0/ },
  'csi-attacher': { args: ['--version'], says: /csi-attacher v4\.13\.0/ },
  'csi-provisioner': { args: ['--version'], says: /csi-provisioner v6\.4\.0/ },
  'csi-resizer': { args: ['--version'], says: /csi-resizer v2\.3\.0/ },
  etcd: { args: ['--version'], says: /etcd Version: 3\.6\.16/ },
  'kube-apiserver': { args: ['--version'], says: /Kubernetes v1\.37\.2/ },
  'kube-controller-manager': { args: ['--version'], says: /Kubernetes v1\.37\.2/ },
  'kube-scheduler': { args: ['--version'], says: /Kubernetes v1\.37\.2/ },
  kubectl: { args: ['version', '--client'], says: /Client Version: v1\.37\.2/ },
  kubemark: { args: ['--version'], says: /Kubernetes v1\.37\.2/ },
};

const skip = hostTestSkipReason();

const names = peerNames();

test('every peer has a version check here', () => {
  assert.deepEqual(
    names.filter((n) => versionCheck[n] === undefined),
    [],
  );
});

for (const name of names) {
  test(`${name} runs and says its pinned version`, { skip, timeout: 90 * 60_000 }, () => {
    const bin = join(peersBinDir([name]), name);
    const check = versionCheck[name];
    assert.ok(check !== undefined, `no version check for ${name}`);
    const run = spawnSync(bin, check.args, { encoding: 'utf8', timeout: 30_000 });
    assert.equal(run.status, 0, `${name} ${check.args.join(' ')}: ${run.stderr}`);
    assert.match(run.stdout + run.stderr, check.says);
  });
}
