/**
 * The controller log in etcd followed live by a reader (what `vole inspect --etcd` reads):
 * loaded from its snapshot and tail when compacted, then kept current as the leader commits.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Etcd3 } from 'etcd3';
import { EtcdEventLog, loadLogHead } from '../../src/cluster/etcd-log.js';
import { ClusterKeys } from '../../src/cluster/keys.js';
import { RealClock } from '../../src/clock.js';
import { EtcdStore } from '../../src/cluster/store-etcd.js';
import { Leadership } from '../../src/cluster/leadership.js';
import { EtcdLogMirror } from '../../src/cluster/log-mirror.js';
import { controllerCore } from '../../src/engine/cores.js';
import type { NewEvent } from '../../src/events/index.js';
import { Tracker } from '../../src/inspect/api.js';
import { vole } from '../support/agent-process.js';
import { type EtcdCluster, useEtcdCluster, freePort } from '../support/etcd-cluster.js';
import { eventually } from '../support/vole-procs.js';

const realClock = new RealClock();

let etcd: EtcdCluster;
let client: Etcd3;
const skip = useEtcdCluster((e, c) => ((etcd = e), (client = c)));

const engineStarted = (tsMs: number): NewEvent => ({
  type: 'EngineStarted',
  tsMs,
  node: 'controller',
  controllerAttachDetach: true,
  plugins: [],
  version: 'test',
  mode: 'controller',
});
/** A Node of ~10 KiB: a few a segment, so a snapshot compacts whole segments away. */
const node = (name: string, tsMs: number): NewEvent => ({
  type: 'ObjectUpserted',
  tsMs,
  object: {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name, annotations: { note: 'x'.repeat(10_000) } },
  },
});

test(
  'a compacted controller log is read from its snapshot and followed as the leader commits',
  { skip },
  async () => {
    const keys = new ClusterKeys('/m1/');
    const leader = await Leadership.campaign(new EtcdStore(client), keys, {
      identity: 'a',
      ttlS: 3,
      clock: realClock,
    });
    const log = new EtcdEventLog({
      store: new EtcdStore(client),
      clock: realClock,
      keys,
      leadership: leader,
      head: 0,
      onFatal: () => undefined,
    });
    // The leader's own world, folded as it appends: what the snapshot holds.
    const world = controllerCore.initialWorld();
    const append = (event: NewEvent) =>
      controllerCore.fold(world, { ...event, seq: log.push(event) } as never);
    append(engineStarted(1));
    for (let i = 2; i <= 20; i++) append(node(`n${i}`, i));
    const codec = controllerCore.snapshot;
    await log.saveSnapshot(
      { seq: 20, tsMs: 20, format: codec.format, data: codec.encode(world) },
      { compact: true },
    );
    for (let i = 21; i <= 25; i++) append(node(`n${i}`, i));
    await log.durable();

    assert.ok(
      (await loadLogHead(new EtcdStore(client), keys)).firstSeq > 1,
      'the segments before the snapshot are compacted away',
    );
    const warnings: string[] = [];
    const mirror = await EtcdLogMirror.open(new EtcdStore(client), keys, realClock, {
      warn: (m) => warnings.push(m),
      pollMs: 60_000,
    });
    try {
      assert.equal(mirror.head().seq, 25);
      assert.deepEqual(mirror.bounds(), { firstSeq: 21, lastSeq: 25, firstTsMs: 21, lastTsMs: 25 });
      assert.equal(mirror.latestSnapshot({ atOrBeforeSeq: 20 })?.seq, 20);
      assert.equal(mirror.latestSnapshot({ atOrBeforeSeq: 19 }), undefined);
      assert.equal(mirror.get(20), undefined);
      // The inspector's tracker starts from the snapshot: every node is in its world.
      const tracker = new Tracker(mirror);
      assert.equal(tracker.head, 25);
      assert.equal(tracker.worldAt(25).view.nodes?.length, 24);
      assert.equal(
        tracker.worldAt(22).view.nodes?.length,
        21,
        'an earlier moment: the snapshot and the events after it',
      );

      // Committed while followed: the watch brings each commit in (the poll is an hour away).
      for (let i = 26; i <= 230; i++) append(node(`n${i}`, i));
      await log.durable();
      await eventually(
        () => mirror.head().seq === 230,
        'the mirror to follow the leader to seq 230',
        10_000,
      );
      assert.deepEqual(
        [...mirror.read({ fromSeq: 26 })].map((e) => e.seq),
        Array.from({ length: 205 }, (_, i) => 26 + i),
      );
      assert.equal(tracker.catchUp().length, 205);
      assert.equal(tracker.worldAt(230).view.nodes?.length, 229);
      assert.deepEqual(warnings, []);
    } finally {
      await mirror.close();
      await leader.resign();
    }
  },
);

test(
  'vole inspect says which log to give, and that an etcd it cannot reach is not there (exit 2, at once)',
  { skip },
  async () => {
    const neither = vole('inspect');
    assert.equal(neither.status, 2);
    assert.match(neither.stderr, /give the log to inspect: --db FILE, or --etcd URLS/);
    const startedMs = Date.now();
    const unreachable = vole(
      'inspect',
      '--etcd',
      `http://127.0.0.1:${await freePort()}`,
      '--port',
      '0',
    );
    assert.equal(unreachable.status, 2);
    assert.match(
      unreachable.stderr,
      /^vole: cannot reach etcd at http:\/\/127\.0\.0\.1:\d+: .*check the URLs/,
    );
    assert.ok(Date.now() - startedMs < 15_000, 'refused without waiting for a deadline');
  },
);
