/**
 * Pod volumes as the kubelet makes them, on real mounts (root, private mount namespace):
 * an emptyDir is 0777 whatever the agent's umask (emptydir setupDir), 2777 and owned by the
 * group with fsGroup (SetVolumeOwnership); downwardAPI and projected volumes are a tmpfs of
 * their own (their wrappedVolumeSpec is a Memory emptyDir); resourceFieldRef files hold the
 * container's declared resources and the node's allocatable.
 */
import assert from 'node:assert/strict';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { VolumeManager } from '../../src/agent/volume-manager.js';
import { isMountPoint } from '../../src/host/mount.js';
import { builtinPlugins } from '../../src/plugins/builtin/index.js';
import { ObjectContents } from '../../src/sources/contents.js';
import { hostSandbox, hostTestSkipReason } from '../support/host.js';

const skip = hostTestSkipReason();
const { root } = hostSandbox('pod-volumes');

const vol = (uid: string, plugin: string, name: string) =>
  join(root, 'pods', uid, 'volumes', plugin.replace('/', '~'), name);

function agent() {
  const contents = new ObjectContents();
  const vm = VolumeManager.create({
    node: 'node-1',
    plugins: builtinPlugins({ root, contents }),
    controllerAttachDetach: false,
    contents,
    allocatable: { cpuMillis: 2000, memoryBytes: 2 ** 32, ephemeralStorageBytes: 10 ** 10 },
  });
  vm.start();
  vm.inputs.markSourcesReady();
  return vm;
}

const modeTest = 'host: emptyDir is 0777 under umask 022, 2777 with fsGroup and group-owned';
test(modeTest, { skip }, async () => {
  const before = process.umask(0o022);
  const vm = agent();
  try {
    vm.inputs.addPod({
      metadata: { name: 'plain', namespace: 'default', uid: 'uid-plain' },
      spec: { volumes: [{ name: 'cache', emptyDir: {} }] },
    });
    vm.inputs.addPod({
      metadata: { name: 'grouped', namespace: 'default', uid: 'uid-grouped' },
      spec: { securityContext: { fsGroup: 2000 }, volumes: [{ name: 'cache', emptyDir: {} }] },
    });
    await vm.waitForAttachAndMount('uid-plain', { timeoutMs: 30_000 });
    await vm.waitForAttachAndMount('uid-grouped', { timeoutMs: 30_000 });
    const plain = statSync(vol('uid-plain', 'kubernetes.io/empty-dir', 'cache'));
    assert.equal((plain.mode & 0o7777).toString(8), '777', 'anyone may write, umask or not');
    const grouped = statSync(vol('uid-grouped', 'kubernetes.io/empty-dir', 'cache'));
    assert.equal((grouped.mode & 0o7777).toString(8), '2777', 'setgid on top of 0777');
    assert.equal(grouped.gid, 2000);
    vm.inputs.removePod('uid-plain');
    vm.inputs.removePod('uid-grouped');
    await vm.drainAndStop();
  } finally {
    process.umask(before);
    vm.stop();
  }
});

const tmpfsTest =
  'host: downwardAPI and projected volumes are tmpfs; resourceFieldRef files written';
test(tmpfsTest, { skip }, async () => {
  const vm = agent();
  try {
    const cpu = { containerName: 'app', resource: 'limits.cpu', divisor: '1m' };
    const mem = { containerName: 'app', resource: 'limits.memory', divisor: '1Mi' };
    vm.inputs.addPod({
      metadata: { name: 'info', namespace: 'default', uid: 'uid-info' },
      spec: {
        containers: [
          {
            name: 'app',
            resources: { limits: { cpu: '250m' } },
            volumeMounts: [
              { name: 'podinfo', mountPath: '/etc/podinfo' },
              { name: 'all', mountPath: '/etc/all' },
            ],
          },
        ],
        volumes: [
          {
            name: 'podinfo',
            downwardAPI: {
              items: [
                { path: 'cpu_limit', resourceFieldRef: cpu },
                { path: 'mem_limit', resourceFieldRef: mem },
              ],
            },
          },
          {
            name: 'all',
            projected: {
              sources: [
                {
                  downwardAPI: {
                    items: [{ path: 'name', fieldRef: { fieldPath: 'metadata.name' } }],
                  },
                },
              ],
            },
          },
        ],
      },
    });
    await vm.waitForAttachAndMount('uid-info', { timeoutMs: 30_000 });
    const info = vol('uid-info', 'kubernetes.io/downward-api', 'podinfo');
    assert.ok(await isMountPoint(info), 'the downwardAPI volume is a tmpfs of its own');
    assert.equal(readFileSync(join(info, 'cpu_limit'), 'utf8'), '250');
    assert.equal(readFileSync(join(info, 'mem_limit'), 'utf8'), String(2 ** 32 / 2 ** 20));
    const all = vol('uid-info', 'kubernetes.io/projected', 'all');
    assert.ok(await isMountPoint(all), 'the projected volume is a tmpfs of its own');
    assert.equal(readFileSync(join(all, 'name'), 'utf8'), 'info');
    vm.inputs.removePod('uid-info');
    await vm.drainAndStop();
  } finally {
    vm.stop();
  }
});
