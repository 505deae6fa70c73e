/** The etcd harness itself: three real members, leader kill, restart, quota. */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { EtcdCluster, etcdSkipReason } from '../support/etcd-cluster.js';

const skip = etcdSkipReason();
let etcd: EtcdCluster;
before(async () => {
  if (skip === false) etcd = await EtcdCluster.start();
});
after(async () => {
  await etcd?.stop();
});

test(
  'a 3-member etcd elects a new leader when the leader is SIGKILLed, and the old one rejoins',
  { skip },
  async () => {
    etcd.etcdctl('put', 'k', 'v1');
    const leader = await etcd.leader();
    assert.ok(leader >= 0, 'a leader');
    const pid = etcd.pid(leader)!;
    await etcd.kill(leader);
    assert.throws(() => process.kill(pid, 0), 'the member process is gone');
    let next = -1;
    for (let i = 0; i < 50 && next < 0; i++) {
      next = await etcd.leader();
      if (next < 0) await new Promise((r) => setTimeout(r, 200));
    }
    assert.ok(next >= 0 && next !== leader, `a new leader (${next})`);
    etcd.etcdctl('put', 'k', 'v2');
    await etcd.restart(leader);
    assert.equal(await etcd.memberHealthy(leader), true);
    assert.match(etcd.etcdctl('get', 'k', '--print-value-only'), /v2/);
  },
);
