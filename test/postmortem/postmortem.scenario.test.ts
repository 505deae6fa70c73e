import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { MemorySink } from '../../src/engine/sink.js';
import type { VoleEvent } from '../../src/events/index.js';
import {
  describeWorld,
  diffWorlds,
  explain,
  explainText,
  fromJsonLines,
  history,
  replayTo,
  toJsonLines,
  verify,
} from '../../src/postmortem/index.js';
import { parseScenario } from '../../src/sim/scenario.js';
import { simulate } from '../../src/sim/simulate.js';
import type { World } from '../../src/kubelet/types.js';
import { assertSameWorld } from '../support/world-equal.js';

async function simulatedLog(yaml: string) {
  const sink = new MemorySink();
  let live: World | undefined;
  await simulate(parseScenario(yaml), {
    log: { sink, readAll: () => sink.events },
    onEvent: (_e, w) => {
      live = w as World;
    },
  });
  return { events: sink.events, live: live! };
}

const attachMount = readFileSync(
  join(import.meta.dirname, '../scenarios/kubelet-attach-mount.yaml'),
  'utf8',
);

/** A mount cut off by a restart (uncertain), resolved by the retry after the restart. */
const restartMidMount = `
name: restart in the middle of mountDevice
controllerAttachDetach: false
plugins:
  - {name: fake.disk, attachable: true, faults: {mountDevice: [{hang: true}]}}
objects:
  - {kind: PersistentVolume, metadata: {name: pv-1}, spec: {accessModes: [ReadWriteOnce], csi: {driver: fake.disk, volumeHandle: disk-1}}}
  - {kind: PersistentVolumeClaim, metadata: {name: claim-1, namespace: default}, spec: {volumeName: pv-1}}
steps:
  - addPod: {metadata: {name: a, uid: uid-a}, spec: {volumes: [{name: data, persistentVolumeClaim: {claimName: claim-1}}]}}
  - advance: 1s
  - expect: {attachments: {fake.disk/disk-1: attached.deviceMounting}}
  - restart: {}
  - expect: {attachments: {fake.disk/disk-1: attached.deviceUncertain}}
  - advance: 1s
  - expect: {attachments: {fake.disk/disk-1: attached.deviceMounted}, mounts: {uid-a/data: mounted}}
`;

test('postmortem: replay to the end equals the live world; to an earlier seq, that moment', async () => {
  const { events, live } = await simulatedLog(attachMount);
  assertSameWorld(replayTo(events), live, 'end');
  const firstMount = events.find(
    (e) => e.type === 'CallSucceeded' && e.call === 'setUp' && e.tsMs > 1000,
  )!;
  const view = describeWorld(replayTo(events, { atSeq: firstMount.seq }));
  assert.equal(view.seq, firstMount.seq);
  assert.deepEqual(view.mounts.map((m) => `${m.outerVolumeSpecName}:${m.state}`).sort(), [
    'data:mounted',
    'scratch:mounted',
  ]);
  const atHalfSecond = describeWorld(replayTo(events, { atTsMs: 0 }));
  assert.deepEqual(
    atHalfSecond.backoffs.map((b) => `${b.op} ${b.volume} until ${b.retryAtMs}`),
    ['attach fake.disk/disk-1 until 500', 'mount fake.disk/uid-a-scratch until 500'],
  );
});

test('postmortem: history lists the transitions of one volume in order', async () => {
  const { events } = await simulatedLog(attachMount);
  const steps = [...history(events, { volume: 'fake.disk/disk-1' })]
    .filter((t) => t.pair === 'attachment')
    .map((t) => `${t.from}→${t.to}`);
  assert.deepEqual(steps, [
    'detached→attaching',
    'attaching→detached',
    'detached→attaching',
    'attaching→attached.deviceUnmounted',
    'attached.deviceUnmounted→attached.deviceMounting',
    'attached.deviceMounting→attached.deviceMounted',
    'attached.deviceMounted→attached.deviceUnmounting',
    'attached.deviceUnmounting→attached.deviceUnmounted',
    'attached.deviceUnmounted→detaching',
    'detaching→detached',
  ]);
  const failed = [...history(events, { volume: 'fake.disk/disk-1' })].find(
    (t) => t.to === 'detached' && t.error !== null,
  );
  assert.match(
    failed!.error!,
    /AttachVolume\.Attach failed: fake attach of fake\.disk\/disk-1: scripted transient failure/,
  );
});

test('postmortem: explain follows the causes of a detach back to the pod removal', async () => {
  const { events } = await simulatedLog(attachMount);
  const get = (seq: number) => events[seq - 1];
  const detach = events.find((e) => e.type === 'OperationStarted' && e.op === 'detach')!;
  const chain = explain(get, detach.seq);
  assert.equal(chain[0]!.seq, detach.seq);
  assert.equal(chain.at(-1)!.type, 'PodRemoved');
  const ops = chain.filter((s) => s.type === 'OperationStarted').map((s) => s.what.split(' ')[0]);
  assert.deepEqual(ops, ['detach', 'unmountDevice', 'unmount']);
  assert.match(explainText(chain), /pod uid-a removed\.$/);
});

test('postmortem: verify accepts a log the engine wrote and catches a tampered decision', async () => {
  const { events } = await simulatedLog(attachMount);
  const report = verify(events);
  assert.deepEqual(report.divergences, []);
  assert.ok(report.decisions > 5);
  // Pretend an older version detached while the pod was still there.
  const detachIndex = events.findIndex((e) => e.type === 'OperationStarted' && e.op === 'detach');
  const removal = events.findIndex((e) => e.type === 'PodRemoved');
  assert.ok(removal > 0 && detachIndex > removal, 'the log removes the pod, then detaches');
  const tampered: VoleEvent[] = events
    .slice(0, removal)
    .concat({ ...events[detachIndex]!, seq: removal + 1 } as VoleEvent);
  const bad = verify(tampered);
  assert.equal(bad.ok, false);
  assert.equal(bad.divergences[0]!.kind, 'decision');
  assert.match(
    bad.divergences[0]!.message,
    /the log started detach fake\.disk\/disk-1; this version would start nothing/,
  );
});

test('postmortem: a restart mid-operation shows the uncertain device and its resolution', async () => {
  const { events } = await simulatedLog(restartMidMount);
  assert.deepEqual(verify(events).divergences, []);
  const steps = [...history(events, { volume: 'fake.disk/disk-1' })]
    .filter((t) => t.pair === 'attachment')
    .map((t) => t.to);
  assert.ok(steps.includes('attached.deviceUncertain'));
  assert.equal(steps.at(-1), 'attached.deviceMounted');
  const restart = events.filter((e) => e.type === 'EngineStarted')[1]!;
  const diff = diffWorlds(
    describeWorld(replayTo(events, { atSeq: restart.seq - 1 })),
    describeWorld(replayTo(events, { atSeq: restart.seq })),
  );
  assert.deepEqual(
    diff.changes.find((c) => c.what.startsWith('attachment')),
    {
      what: 'attachment fake.disk/disk-1@node-1',
      before: 'attached.deviceMounting',
      after: 'attached.deviceUncertain',
    },
  );
});

test('postmortem: export to JSON Lines and import back gives the same events', async () => {
  const { events } = await simulatedLog(restartMidMount);
  const text = [...toJsonLines(events)].join('');
  const back = [...fromJsonLines(text.split('\n'))];
  assert.deepEqual(back, events);
  assert.throws(() => [...fromJsonLines(text.split('\n').slice(1))], /seq 2 where 1 was expected/);
  assert.throws(
    () => [...fromJsonLines(['{"seq":1,"tsMs":0,"type":"Nope"}'])],
    /line 1: event seq 1 \(Nope\) does not match/,
  );
});

test('postmortem: verify reports an invariant violation: a device unmounted under a mounted pod', async () => {
  const { events } = await simulatedLog(attachMount);
  const mounted = events.findIndex(
    (e) => e.type === 'CallSucceeded' && e.call === 'setUp' && e.tsMs > 1000,
  );
  assert.ok(mounted > 0, 'the log has a setUp after 1 s');
  const head = events.slice(0, mounted + 1);
  let seq = head.length;
  const volume = 'fake.disk/disk-1';
  const forged: VoleEvent[] = [
    {
      seq: ++seq,
      tsMs: 3500,
      type: 'OperationStarted',
      opId: `op-${seq}`,
      op: 'unmountDevice',
      key: { volume, pod: '', node: '' },
      volume,
      cause: 0,
    },
    { seq: ++seq, tsMs: 3500, type: 'CallStarted', opId: `op-${seq - 1}`, call: 'unmountDevice' },
  ] as VoleEvent[];
  // The mount op that set the pod up is still running in the log: finish it first.
  const rest = events
    .slice(mounted + 1, mounted + 2)
    .map((e, i) => ({ ...e, seq: head.length + 1 + i }) as VoleEvent);
  const tampered = [
    ...head,
    ...rest,
    ...forged.map(
      (e, i) =>
        ({
          ...e,
          seq: head.length + rest.length + 1 + i,
          ...(e.type === 'CallStarted'
            ? { opId: `op-${head.length + rest.length + 1}` }
            : { opId: `op-${head.length + rest.length + 1}` }),
        }) as VoleEvent,
    ),
  ];
  const report = verify(tampered);
  assert.equal(report.ok, false);
  assert.ok(report.invariantChecks > 0);
  const invariant = report.divergences.find((d) => d.kind === 'invariant');
  assert.ok(invariant, JSON.stringify(report.divergences));
  assert.match(
    invariant.message,
    /S1: attachment fake\.disk\/disk-1@node-1: attached\.deviceUnmounting while pod uid-a is mounted/,
  );
});

const scenarioText = (name: string) =>
  readFileSync(join(import.meta.dirname, `../scenarios/${name}`), 'utf8');

test('postmortem: history shows an online node expansion growing the filesystem', async () => {
  const { events } = await simulatedLog(scenarioText('expand-online.yaml'));
  const grown = [...history(events, { volume: 'fake.disk/disk-1' })].filter(
    (t) => t.pair === 'filesystem',
  );
  const gi = 1024 ** 3;
  assert.deepEqual(
    grown.map((t) => `${t.from}→${t.to}`),
    [`${gi} bytes→expanding to ${2 * gi} bytes`, `expanding to ${2 * gi} bytes→${2 * gi} bytes`],
  );
  assert.match(grown[0]!.because, /nodeExpand called/);
  assert.match(grown[1]!.because, /nodeExpand succeeded/);
  assert.equal(grown[0]!.node, 'node-1');
  // The online expansion is the volume's (an expand operation), not a mount's.
  assert.equal(grown[0]!.pod, null);
  const started = events.find((e) => e.type === 'CallStarted' && e.call === 'nodeExpand')!;
  assert.equal(grown[0]!.seq, started.seq);
});

test('postmortem: history shows a failed expansion during mount and the retry that grew it', async () => {
  const { events } = await simulatedLog(
    scenarioText('expand-during-mount-failure-leaves-uncertain.yaml'),
  );
  const grown = [...history(events, { pod: 'uid-a' })].filter((t) => t.pair === 'filesystem');
  const gi = 1024 ** 3;
  assert.deepEqual(
    grown.map((t) => `${t.from}→${t.to}${t.error === null ? '' : ' (failed)'}`),
    [
      `${gi} bytes→expanding to ${2 * gi} bytes`,
      `expanding to ${2 * gi} bytes→${gi} bytes (failed)`,
      `${gi} bytes→expanding to ${2 * gi} bytes`,
      `expanding to ${2 * gi} bytes→${2 * gi} bytes`,
    ],
  );
  assert.match(grown[1]!.error!, /scripted transient failure/);
  assert.ok(grown.every((t) => t.pod === 'uid-a' && t.volume === 'fake.disk/disk-1'));
});
