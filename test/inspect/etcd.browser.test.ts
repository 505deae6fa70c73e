/**
 * `vole inspect --etcd` in a real browser: a 3-member etcd, a controller replica leading
 * (in this process, with an attachable fake plugin: nothing on the host), and the inspector
 * as a `vole` process reading the controller log in etcd. A pod applied while the page is
 * open shows its attachment on its node, and the node's volumesAttached, without a reload.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { BrowserContext, Page } from 'playwright-core';
import pino from 'pino';
import { RealClock } from '../../src/clock.js';
import { connect } from '../../src/cluster/client.js';
import { ClusterController } from '../../src/cluster/controller.js';
import { ClusterKeys } from '../../src/cluster/keys.js';
import { EtcdStore } from '../../src/cluster/store-etcd.js';
import { applyManifestSet, readManifestPaths } from '../../src/cluster/objects.js';
import { FakePlugin } from '../../src/plugins/fake.js';
import { caps } from '../../src/plugins/types.js';
import { vole } from '../support/agent-process.js';
import { EtcdCluster, etcdSkipReason } from '../support/etcd-cluster.js';
import { eventually, VoleProcess } from '../support/vole-procs.js';

const chromiumPath = process.env.VOLE_CHROMIUM ?? '/usr/bin/chromium';
const skip =
  etcdSkipReason() ||
  (existsSync(chromiumPath)
    ? false
    : `Chromium is not installed at ${chromiumPath} (or set VOLE_CHROMIUM)`);
const dir = mkdtempSync(join(tmpdir(), 'vole-inspect-etcd-'));
const pair = 'attachment|fake.disk/disk-1|node-1';

let etcd: EtcdCluster;
let client: ReturnType<typeof connect>;
let inspector: VoleProcess;
let context: BrowserContext;
let page: Page;
const stopController = new AbortController();
let controllerRun: Promise<unknown> = Promise.resolve();
const problems: string[] = [];
/** What the controller replicas said (campaigns, leadership won and lost). */
const controllerSaid: string[] = [];

const cluster = `apiVersion: v1
kind: Node
metadata:
  name: node-1
  annotations: {volumes.kubernetes.io/controller-managed-attach-detach: "true"}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-disk-1}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  csi: {driver: fake.disk, volumeHandle: disk-1}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: claim-disk-1, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
`;
const pod = `apiVersion: v1
kind: Pod
metadata: {name: db, namespace: default, uid: uid-db}
spec:
  nodeName: node-1
  volumes: [{name: data, persistentVolumeClaim: {claimName: claim-disk-1}}]
`;

function apply(name: string, text: string): void {
  writeFileSync(join(dir, name), text);
  const result = vole('apply', '--etcd', etcd.urls, '-f', join(dir, name));
  assert.equal(result.status, 0, result.stderr);
}

/** `vole apply`'s own code, in this process without blocking it (the controller runs here). */
async function applyHere(name: string, text: string): Promise<void> {
  writeFileSync(join(dir, name), text);
  const set = readManifestPaths([join(dir, name)]);
  assert.deepEqual(set.problems, []);
  await applyManifestSet(new EtcdStore(client), new ClusterKeys('/vole/'), set);
}

before(async () => {
  if (skip !== false) return;
  etcd = await EtcdCluster.start();
  client = connect(etcd.urls);
  // With the vole CLI while no controller runs here yet (its spawnSync would stall one).
  apply('cluster.yaml', cluster);
  const clock = new RealClock();
  const replica = () =>
    new ClusterController({
      client: new EtcdStore(client),
      keys: new ClusterKeys('/vole/'),
      identity: 'c1',
      plugins: [
        new FakePlugin({ caps: caps('fake.disk', { attachable: true }), clock, journal: [] }),
      ],
      logger: pino({ level: 'silent' }),
      leaseTtlS: 5,
      clock,
      say: (line) => controllerSaid.push(line),
    });
  let controller = replica();
  // As a supervisor restarts `vole controller` when it loses its lease (a 5 s lease can
  // lapse on a loaded CI machine), a replica that lost it is replaced and campaigns again.
  controllerRun = (async () => {
    for (;;) {
      const result = await controller.run(stopController.signal);
      controllerSaid.push(`run ended: ${result.message}`);
      if (!result.lost) return;
      controller = replica();
    }
  })();
  await eventually(() => controller.world !== undefined, 'the controller to lead', 20_000);
  inspector = new VoleProcess('inspect', ['inspect', '--etcd', etcd.urls, '--port', '0'], false);
  const { chromium } = await import('playwright-core');
  context = await chromium.launchPersistentContext(join(dir, 'profile'), {
    executablePath: chromiumPath,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--no-first-run',
    ],
  });
  page = context.pages()[0] ?? (await context.newPage());
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
});

after(async () => {
  await context?.close();
  await inspector?.stop();
  stopController.abort();
  await controllerRun;
  client?.close();
  await etcd?.stop();
  rmSync(dir, { recursive: true, force: true });
  setTimeout(() => process.exit(process.exitCode ?? 0), 3_000).unref();
});

test(
  'inspect --etcd: a pod applied while the page is open shows its attachment on its node, live',
  { skip, timeout: 60_000 },
  async () => {
    await eventually(
      () => /at (http:\/\/127\.0\.0\.1:\d+\/)/.test(inspector.output),
      'the inspector URL',
      20_000,
      () => inspector.output,
    );
    const url = /at (http:\/\/127\.0\.0\.1:\d+\/)/.exec(inspector.output)![1]!;
    assert.match(inspector.output, /controller log in etcd \(\/vole\/\)/);
    await page.goto(url);
    await page.locator('[data-testid=head]').waitFor();
    assert.equal(
      await page.locator(`li[data-pair="${pair}"]`).count(),
      0,
      'no attachment before the pod',
    );
    // A mark on this document: a reload would lose it.
    await page.evaluate(() => ((window as unknown as { notReloaded: boolean }).notReloaded = true));

    await applyHere('pod.yaml', pod);
    const detail = async () => {
      const world = await (await fetch(`${url}api/world`)).text();
      const events = await (await fetch(`${url}api/events?from=1&to=100`)).text();
      const said = controllerSaid.join('\n');
      return `${inspector.output}\n${said}\n${world.slice(0, 3000)}\n${events.slice(0, 3000)}`;
    };
    await page
      .locator(`li[data-pair="${pair}"]`)
      .waitFor({ timeout: 30_000 })
      .catch(async (error: Error) => {
        throw new Error(`${error.message}\n${await detail()}`);
      });
    await page.waitForFunction(
      (id) =>
        document
          .querySelector(`li[data-pair="${id}"] [data-testid=pair-state]`)
          ?.textContent?.startsWith('attached'),
      pair,
      { timeout: 30_000 },
    );
    await page.waitForFunction(
      () =>
        document.querySelector('li[data-node="node-1"] [data-testid=volumes-attached]')
          ?.textContent === 'volumesAttached [fake.disk/disk-1]',
      undefined,
      { timeout: 30_000 },
    );
    assert.equal(
      await page.evaluate(() => (window as unknown as { notReloaded?: boolean }).notReloaded),
      true,
      'no reload',
    );
    const head = Number(
      (/^(\d+)/.exec((await page.locator('[data-testid=head]').textContent()) ?? '') ?? [])[1],
    );
    assert.ok(head > 0, 'the page shows the log head');
    // The JSON behind the page reads the same log: the ClaimBound and the attach are there.
    const events = (await (await fetch(`${url}api/events?from=1&to=${head}`)).json()) as {
      type: string;
    }[];
    assert.ok(events.some((e) => e.type === 'ClaimBound'));
    assert.ok(events.some((e) => e.type === 'OperationFinished'));
    assert.deepEqual(problems, []);
  },
);
