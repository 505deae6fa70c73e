/**
 * The agent (`vole run`) against the real kubernetes-csi hostpath driver (hostpathplugin,
 * `-enable-attach`) and the real node-driver-registrar registering it into
 * `<root>/plugins_registry/`, as root in a private mount namespace:
 * - a static Filesystem PV and a Block PV whose volumes the driver created (CreateVolume)
 *   are mounted and mapped, and what the pods write reaches the driver's state dir;
 * - an inline ephemeral volume, its volume id and volume context as the kubelet makes them;
 * - ControllerPublishVolume before NodeStageVolume, ControllerUnpublishVolume after
 *   NodeUnstageVolume, in vole's log;
 * - the registrar stopped: pods wait, and `vole why` says the driver is not registered;
 *   started again: they mount;
 * - the driver SIGKILLed while vole waits on its NodeStageVolume, and on its
 *   NodeUnpublishVolume (stopped with SIGSTOP once vole's log shows the RPC going out),
 *   then restarted: the pair was uncertain, the retry settles it, nothing leaks (mounts,
 *   loop devices, the driver's state), and `vole verify` finds 0 divergences.
 * Every process is ended by its PID; the sandbox's mounts are cleaned after the file.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  closeSync,
  existsSync,
  fsyncSync,
  openSync,
  readFileSync,
  readSync,
  rmSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { isMountPoint } from '../../src/host/mount.js';
import { mountsUnder, readMountTable } from '../../src/host/mountinfo.js';
import { hostSandbox, hostTestSkipReason } from '../support/host.js';
import {
  assertDriverIdle,
  callEvents,
  createVolume,
  deleteVolume,
  driverName,
  driverVolumes,
  hostpathLog,
  hostpathPeers,
  type HostpathPeers,
  hostpathPv,
  inlinePod,
  LogTail,
  operationFinished,
  operationStarted,
  podMounted,
  podUnmounted,
  registrationDir,
  registrationSocket,
  rpcsOf,
  startHostpath,
  startRegistrar,
  stopProcess,
  vole,
} from './hostpath-support.js';
import {
  agentArgs,
  assertNothingLeft,
  pod,
  type Sandbox,
  sandboxIn,
  targetPath,
  write,
} from './support.js';

const hostSkip = hostTestSkipReason();
const peers: HostpathPeers | string = hostSkip === false ? hostpathPeers() : hostSkip;
const skip = typeof peers === 'string' ? peers : false;
const { base } = skip === false ? hostSandbox('hostpath') : { base: '' };
const timeout = 240_000;
const mib = 2 ** 20;

/** The driver, its registrar and the agent of one sandbox; `end` stops them all by PID. */
interface Node {
  readonly s: Sandbox;
  readonly log: LogTail;
  driver: ChildProcess;
  registrar: ChildProcess | undefined;
  readonly agent: ChildProcess;
}

/**
 * The agent first, as the kubelet runs before any driver: it makes `plugins_registry/`,
 * where the registrar binds its socket. Then the driver and its registrar. A start that
 * fails half way ends, by PID, what it had started before it throws.
 */
async function startNode(name: string): Promise<Node> {
  const p = peers as HostpathPeers;
  const s = sandboxIn(base, name);
  const started: ChildProcess[] = [];
  const log = new LogTail(s.db);
  try {
    const agent = spawn(process.execPath, agentArgs(s, []), {
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    started.push(agent);
    await log.waitFor('the agent started', (events) =>
      events.find((e) => e.type === 'EngineStarted'),
    );
    assert.ok(existsSync(registrationDir(s)), 'the agent made plugins_registry/ at start');
    const driver = await startHostpath(p, s);
    started.push(driver);
    const registrar = await startRegistrar(p, s);
    started.push(registrar);
    await log.waitFor('the driver registered through plugins_registry', (events) =>
      events.find(
        (e) =>
          e.type === 'CsiDriverRegistered' && e.driver === driverName && e.via === 'registration',
      ),
    );
    return { s, log, driver, registrar, agent };
  } catch (error) {
    log.close();
    await stopAll(started.reverse());
    throw error;
  }
}

/** Ends each process by its PID, every one even when one of them fails; then throws. */
async function stopAll(children: readonly ChildProcess[]): Promise<void> {
  const failures: unknown[] = [];
  for (const child of children) await stopProcess(child).catch((e: unknown) => failures.push(e));
  if (failures.length > 0) throw failures[0];
}

/** Stops the agent, deletes the driver's volumes, stops the driver and its registrar. */
async function endNode(node: Node, volumeIds: string[]): Promise<void> {
  try {
    await stopProcess(node.agent);
    node.log.close();
    if (node.driver.exitCode === null && node.driver.signalCode === null)
      for (const id of volumeIds) await deleteVolume(node.s, id).catch(() => undefined);
  } finally {
    // Whatever failed above, none of the three outlives the file.
    const registrar = node.registrar === undefined ? [] : [node.registrar];
    await stopAll([node.agent, ...registrar, node.driver]);
  }
}

/** After every pod is gone: nothing on the host, the driver holds nothing, the log verifies. */
async function assertSettled(node: Node, volumeIds: string[]): Promise<void> {
  const mounts = mountsUnder(await readMountTable(), node.s.base).map((m) => m.mountPoint);
  assert.deepEqual(mounts, [], 'no mounts left');
  assertDriverIdle(node.s);
  for (const id of volumeIds) await deleteVolume(node.s, id);
  assert.deepEqual(
    driverVolumes(node.s).map((v) => v.VolID),
    [],
    'the driver deleted its volumes',
  );
  await assertNothingLeft(node.s); // the Block volume's loop device went with it
  const verified = vole(['verify', '--db', node.s.db]);
  assert.equal(verified.status, 0, verified.stdout + verified.stderr);
  assert.match(verified.stdout, /^ok: .*, 0 divergences$/m);
}

const volumeName = (volumeId: string) => `kubernetes.io/csi/${driverName}^${volumeId}`;
const lifecycle = [
  'ControllerPublishVolume',
  'NodeStageVolume',
  'NodePublishVolume',
  'NodeUnpublishVolume',
  'NodeUnstageVolume',
  'ControllerUnpublishVolume',
];

test(
  "host: hostpath driver: static Filesystem and Block PVs and an inline volume, attach before stage, writes in the driver's state dir",
  { skip, timeout },
  async () => {
    const node = await startNode('volumes');
    const { s, log } = node;
    const ids: string[] = [];
    try {
      const fs = await createVolume(s, { name: 'fs', block: false, sizeBytes: 16 * mib });
      const blk = await createVolume(s, { name: 'blk', block: true, sizeBytes: 16 * mib });
      ids.push(fs.volumeId, blk.volumeId);
      write(s, 'fs.yaml', hostpathPv({ name: 'fs', ...fs }));
      write(s, 'blk.yaml', hostpathPv({ name: 'blk', ...blk, block: true }));
      write(s, 'pod-fs.yaml', pod({ uid: 'uid-fs', claim: 'fs' }));
      write(s, 'pod-blk.yaml', pod({ uid: 'uid-blk', claim: 'blk', block: true }));
      write(s, 'pod-eph.yaml', inlinePod('uid-eph'));
      for (const uid of ['uid-fs', 'uid-blk', 'uid-eph'])
        await log.waitFor(`${uid} mounted`, (events) =>
          podMounted(events, uid) ? true : undefined,
        );

      // Filesystem: the pod's write lands in the driver's directory for the volume.
      writeFileSync(
        join(targetPath(s, 'uid-fs'), 'hello.txt'),
        'through the real hostpath driver\n',
      );
      const fsPath = driverVolumes(s).find((v) => v.VolID === fs.volumeId)!.VolPath;
      assert.ok(fsPath.startsWith(s.state), `${fsPath} is in the driver's state dir`);
      assert.equal(
        readFileSync(join(fsPath, 'hello.txt'), 'utf8'),
        'through the real hostpath driver\n',
      );

      // Block: bytes written to the pod's device reach the driver's backing file.
      const device = join(
        s.root,
        'pods',
        'uid-blk',
        'volumeDevices',
        'kubernetes.io~csi',
        'pv-blk',
      );
      const bytes = Buffer.from('raw bytes through the hostpath driver');
      const fd = openSync(device, 'r+');
      writeSync(fd, bytes, 0, bytes.length, 8192);
      fsyncSync(fd);
      closeSync(fd);
      const file = openSync(driverVolumes(s).find((v) => v.VolID === blk.volumeId)!.VolPath, 'r');
      const back = Buffer.alloc(bytes.length);
      readSync(file, back, 0, back.length, 8192);
      closeSync(file);
      assert.equal(back.toString(), bytes.toString());

      // Inline: the kubelet's volume id (csi-<sha256 of pod UID and volume name>) and context.
      const ephemeralId = `csi-${createHash('sha256').update('uid-ephscratch').digest('hex')}`;
      const ephemeral = driverVolumes(s).find((v) => v.VolID === ephemeralId);
      assert.ok(ephemeral?.Ephemeral === true, `the driver made ephemeral volume ${ephemeralId}`);
      const publish = hostpathLog(s)
        .split('\n')
        .find((line) => line.includes(ephemeralId) && line.includes('volume_context'));
      assert.ok(publish !== undefined, 'the driver logged the ephemeral NodePublishVolume request');
      const context: [string, string][] = [
        ['ephemeral', 'true'],
        ['pod\\.name', 'uid-eph'],
        ['pod\\.namespace', 'default'],
        ['pod\\.uid', 'uid-eph'],
      ];
      for (const [key, value] of context)
        assert.match(
          publish,
          new RegExp(`csi\\.storage\\.k8s\\.io/${key}"?\\s*[:=]\\s*"?${value}`),
          key,
        );

      for (const f of ['pod-fs.yaml', 'pod-blk.yaml', 'pod-eph.yaml']) rmSync(join(s.manifests, f));
      for (const volumeId of [fs.volumeId, blk.volumeId])
        await log.waitFor(`${volumeId} detached`, (events) =>
          rpcsOf(events, volumeName(volumeId)).includes('ControllerUnpublishVolume')
            ? true
            : undefined,
        );
      await log.waitFor('uid-eph unmounted', (events) =>
        podUnmounted(events, 'uid-eph') ? true : undefined,
      );
      for (const volumeId of [fs.volumeId, blk.volumeId])
        assert.deepEqual(
          rpcsOf(log.poll(), volumeName(volumeId)),
          lifecycle,
          `${volumeId}: the RPCs in order`,
        );
      assert.equal(
        driverVolumes(s).some((v) => v.VolID === ephemeralId),
        false,
        'the ephemeral volume is gone',
      );
      await assertSettled(node, ids.splice(0));
    } finally {
      await endNode(node, ids);
    }
  },
);

test(
  'host: hostpath driver: the registrar stopped, pods wait and `vole why` says why; started again, they mount',
  { skip, timeout },
  async () => {
    const node = await startNode('registrar');
    const { s, log } = node;
    const ids: string[] = [];
    try {
      const vol = await createVolume(s, { name: 'late', block: false, sizeBytes: 16 * mib });
      ids.push(vol.volumeId);
      write(s, 'late.yaml', hostpathPv({ name: 'late', ...vol }));
      await stopProcess(node.registrar!); // SIGTERM: it removes its registration socket
      node.registrar = undefined;
      assert.equal(existsSync(registrationSocket(s)), false, 'the registrar removed its socket');
      await log.waitFor('the driver deregistered', (events) =>
        events.find((e) => e.type === 'CsiDriverDeregistered'),
      );

      write(s, 'pod.yaml', pod({ uid: 'uid-late', claim: 'late' }));
      const attach = await log.waitFor('a failed attach', (events) => {
        const started = events.find((e) => e.type === 'OperationStarted' && e.op === 'attach');
        const finished =
          started?.type === 'OperationStarted'
            ? operationFinished(events, started.opId)
            : undefined;
        return finished?.outcome === 'failed' ? { started: started!, finished } : undefined;
      });
      const opId = attach.started.type === 'OperationStarted' ? attach.started.opId : '';
      assert.deepEqual(
        callEvents(log.poll(), opId, 'attach'),
        [],
        'no call recorded: the RPC never went out',
      );
      assert.match(
        attach.finished.error?.message ?? '',
        /CSI driver hostpath\.csi\.k8s\.io is not registered: no socket in .*plugins_registry\//,
      );
      const why = vole(['why', 'uid-late', '--db', s.db]);
      assert.equal(why.status, 0, why.stderr);
      assert.match(why.stdout, /waits on attach/);
      assert.match(
        why.stdout,
        /CSI driver hostpath\.csi\.k8s\.io is not registered: no socket in .*plugins_registry\/ registers it/,
      );
      assert.doesNotMatch(why.stdout, /Resolution note/);

      node.registrar = await startRegistrar(peers as HostpathPeers, s);
      await log.waitFor('uid-late mounted', (events) =>
        podMounted(events, 'uid-late') ? true : undefined,
      );
      assert.ok(await isMountPoint(targetPath(s, 'uid-late')));
      rmSync(join(s.manifests, 'pod.yaml'));
      await log.waitFor('detached', (events) =>
        rpcsOf(events, volumeName(vol.volumeId)).includes('ControllerUnpublishVolume')
          ? true
          : undefined,
      );
      await assertSettled(node, ids.splice(0));
    } finally {
      await endNode(node, ids);
    }
  },
);

/**
 * Catches the driver with vole's `call` RPC in flight: SIGSTOP once the operation starts,
 * then, once the call is in the log with no answer, SIGKILL. The RPC may have gone out
 * before the SIGSTOP landed (then the call has its answer): undone and tried again.
 */
async function killDuring(
  node: Node,
  opts: {
    op: 'mount' | 'unmount';
    call: 'mountDevice' | 'tearDown';
    pod: string;
    afterSeq: number;
  },
): Promise<string | undefined> {
  const { log } = node;
  const started = await log.waitFor(
    `${opts.op} of ${opts.pod}`,
    (events) => operationStarted(events, opts.op, opts.pod, opts.afterSeq),
    60_000,
    1,
  );
  process.kill(node.driver.pid!, 'SIGSTOP');
  await log.waitFor(`${opts.call} started`, (events) => {
    const calls = callEvents(events, started.opId, opts.call);
    return calls.length > 0 || operationFinished(events, started.opId) !== undefined
      ? true
      : undefined;
  });
  await new Promise((resolve) => setTimeout(resolve, 300)); // an answer already on its way lands
  const calls = callEvents(log.poll(), started.opId, opts.call);
  if (calls.length !== 1) {
    process.kill(node.driver.pid!, 'SIGCONT');
    return undefined; // missed: the call answered before the driver stopped
  }
  await stopProcess(node.driver, 'SIGKILL');
  return started.opId;
}

async function killTest(
  name: string,
  rpc: 'NodeStageVolume' | 'NodeUnpublishVolume',
  say: (line: string) => void,
): Promise<void> {
  const node = await startNode(name);
  const { s, log } = node;
  const ids: string[] = [];
  try {
    const vol = await createVolume(s, { name: 'k', block: false, sizeBytes: 16 * mib });
    ids.push(vol.volumeId);
    write(s, 'k.yaml', hostpathPv({ name: 'k', ...vol }));
    let killedOp: string | undefined;
    let attempts = 0;
    for (let attempt = 1; killedOp === undefined && attempt <= 3; attempt++) {
      attempts = attempt;
      const uid = `uid-k${attempt}`;
      const afterSeq = log.poll().at(-1)?.seq ?? 0;
      write(s, 'pod.yaml', pod({ uid, claim: 'k' }));
      if (rpc === 'NodeStageVolume') {
        killedOp = await killDuring(node, { op: 'mount', call: 'mountDevice', pod: uid, afterSeq });
        if (killedOp !== undefined) node.driver = await startHostpath(peers as HostpathPeers, s);
        await log.waitFor(`${uid} mounted`, (events) =>
          podMounted(events, uid) ? true : undefined,
        );
      } else {
        await log.waitFor(`${uid} mounted`, (events) =>
          podMounted(events, uid) ? true : undefined,
        );
        const mountedSeq = log.poll().at(-1)!.seq;
        rmSync(join(s.manifests, 'pod.yaml'));
        killedOp = await killDuring(node, {
          op: 'unmount',
          call: 'tearDown',
          pod: uid,
          afterSeq: mountedSeq,
        });
        if (killedOp !== undefined) node.driver = await startHostpath(peers as HostpathPeers, s);
        await log.waitFor(`${uid} unmounted`, (events) =>
          podUnmounted(events, uid) ? true : undefined,
        );
      }
      rmSync(join(s.manifests, 'pod.yaml'), { force: true });
      await log.waitFor(`${uid} detached`, (events) =>
        podUnmounted(events, uid) &&
        rpcsOf(events, volumeName(vol.volumeId)).at(-1) === 'ControllerUnpublishVolume'
          ? true
          : undefined,
      );
    }
    assert.ok(killedOp !== undefined, `caught ${rpc} in flight in one of 3 attempts`);
    say(`${rpc} caught in flight at attempt ${attempts}`);
    const call = rpc === 'NodeStageVolume' ? 'mountDevice' : 'tearDown';
    const [first, outcome] = callEvents(log.poll(), killedOp, call);
    assert.equal(first?.type, 'CallStarted');
    assert.ok(outcome?.type === 'CallFailed', `${rpc} cut off by the kill`);
    assert.equal(outcome.error.kind, 'uncertain', 'the killed RPC leaves its pair uncertain');
    assert.ok(
      rpcsOf(log.poll(), volumeName(vol.volumeId)).includes(rpc),
      `${rpc} retried and answered`,
    );
    await assertSettled(node, ids.splice(0));
  } finally {
    await endNode(node, ids);
  }
}

test(
  'host: hostpath driver SIGKILLed in the middle of NodeStageVolume and restarted: retried, nothing leaks, 0 divergences',
  { skip, timeout },
  async (t) => {
    await killTest('kill-stage', 'NodeStageVolume', (line) => t.diagnostic(line));
  },
);

test(
  'host: hostpath driver SIGKILLed in the middle of NodeUnpublishVolume and restarted: retried, nothing leaks, 0 divergences',
  { skip, timeout },
  async (t) => {
    await killTest('kill-unpublish', 'NodeUnpublishVolume', (line) => t.diagnostic(line));
  },
);
