/**
 * `vole inspect` in a real browser: Debian's Chromium driven by playwright-core over the
 * page the server serves for a simulated log. Checks the pair list, the scrubber, an
 * event's payload and causes, a live update pushed while the page is open (events appended
 * from here, as an agent would), that writes are refused, and saves a screenshot to
 * test-artifacts/inspector.png. Skips the browser part, saying why, without Chromium.
 */
import { controllerCore, kubeletCore } from '../../src/engine/cores.js';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { BrowserContext, Page } from 'playwright-core';
import { openSqliteLog } from '../../src/agent/sqlite-log.js';
import { eventCodec, type NewEvent, type VoleEvent } from '../../src/events/index.js';
import { openLog } from '../../src/log/store.js';
import { type InspectorServer, startInspector } from '../../src/inspect/server.js';
import { parseScenario } from '../../src/sim/scenario.js';
import { simulate } from '../../src/sim/simulate.js';
import { noChromium, openChromium } from '../support/chromium.js';

const root = join(import.meta.dirname, '../..');
const screenshotPath = join(root, 'test-artifacts', 'inspector.png');
const disk = 'attachment|fake.disk/disk-1|node-1';

const dir = mkdtempSync(join(tmpdir(), 'vole-inspect-'));
const db = join(dir, 'sim.db');
let inspector: InspectorServer;
/**
 * The moments of the simulated log the tests look at, found by what happened there (an
 * event added anywhere earlier moves them): the disk's mountDevice call and the operation
 * it belongs to, the end of the scratch volume's uncertain setUp, and the head.
 */
const at = { mountDevice: 0, mountStarted: 0, uncertainFinished: 0, head: 0 };

function findMoments(events: readonly VoleEvent[]): void {
  const seqOf = (what: string, found: VoleEvent | undefined): number => {
    assert.ok(found, `the simulated log has ${what}`);
    return found.seq;
  };
  const call = events.find((e) => e.type === 'CallStarted' && e.call === 'mountDevice');
  at.mountDevice = seqOf('a mountDevice call', call);
  const opId = (call as { opId: string }).opId;
  at.mountStarted = seqOf(
    'its operation',
    events.find((e) => e.type === 'OperationStarted' && e.opId === opId),
  );
  const failed = events.find(
    (e) => e.type === 'CallFailed' && e.call === 'setUp' && e.error.kind === 'uncertain',
  ) as { opId: string } | undefined;
  at.uncertainFinished = seqOf(
    'an uncertain setUp, finished',
    events.find((e) => e.type === 'OperationFinished' && e.opId === failed?.opId),
  );
  at.head = events.at(-1)!.seq;
}

before(async () => {
  const scenario = parseScenario(
    readFileSync(join(root, 'test/scenarios/kubelet-attach-mount.yaml'), 'utf8'),
    'kubelet-attach-mount.yaml',
  );
  const log = openSqliteLog(db, kubeletCore, { durability: 'normal' });
  try {
    const result = await simulate(scenario, { log });
    assert.ok(result.ok, JSON.stringify(result.failures));
    findMoments([...log.readAll()]);
  } finally {
    log.sink.close();
  }
  inspector = await startInspector({
    db,
    port: 0,
    pollMs: 100,
    warn: (m) => process.stderr.write(`inspector: ${m}\n`),
  });
});

after(async () => {
  await inspector?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A raw HTTP request (fetch would normalise `..` away before sending it). */
function raw(
  method: string,
  path: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  return new Promise((resolve, reject) => {
    const url = new URL(inspector.url);
    const req = request({ host: url.hostname, port: url.port, method, path, headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        body += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end(method === 'POST' || method === 'PUT' ? '{"seq":1}' : undefined);
  });
}

test('inspect: read-only — other methods get 405, paths outside the fixed routes are refused', async () => {
  assert.equal(new URL(inspector.url).hostname, '127.0.0.1');
  for (const [method, path] of [
    ['POST', '/api/world'],
    ['PUT', '/app.js'],
    ['DELETE', '/api/event?seq=1'],
    ['PATCH', '/'],
    ['POST', '/api/stream'],
  ] as const) {
    const r = await raw(method, path, { 'content-type': 'application/json' });
    assert.equal(r.status, 405, `${method} ${path}`);
    assert.equal(r.headers.allow, 'GET, HEAD');
    assert.match(r.body, /read-only/);
  }
  for (const path of [
    '/../../etc/passwd',
    '/%2e%2e/%2e%2e/etc/passwd',
    '/..%2f..%2fetc/passwd',
    '/app.js/..',
    '/%5c..%5csim.db',
  ]) {
    assert.equal((await raw('GET', path)).status, 400, path);
  }
  assert.equal((await raw('GET', '/sim.db')).status, 404);
  assert.equal(
    (await raw('GET', '/api/world', { host: 'attacker.example' })).status,
    403,
    'a foreign Host header (DNS rebinding)',
  );
  const head = await raw('HEAD', '/api/meta');
  assert.equal(head.status, 200);
  assert.equal(head.body, '');
  assert.equal((await raw('GET', '/api/event?seq=abc')).status, 400);
  assert.equal((await raw('GET', '/api/event?seq=9999')).status, 404);
});

test('inspect: the API answers from the log — the world at a seq, causes, statecharts from the machines', async () => {
  const get = async (path: string) => JSON.parse((await raw('GET', path)).body);
  const early = await get(`/api/world?at=${at.mountDevice}`);
  assert.equal(
    early.pairs.find((p: { id: string }) => p.id === disk).state,
    'attached.deviceMounting',
  );
  const end = await get('/api/world');
  assert.deepEqual(
    end.pairs.map((p: { id: string; state: string }) => `${p.id} ${p.state}`),
    [
      'attachment|fake.disk/disk-1|node-1 detached',
      'mount|fake.disk/disk-1|uid-a unmounted',
      'attachment|fake.disk/uid-a-scratch|node-1 detached',
      'mount|fake.disk/uid-a-scratch|uid-a unmounted',
    ],
  );
  const uncertain = await get(`/api/world?at=${at.uncertainFinished}`);
  const scratch = uncertain.pairs.find(
    (p: { id: string }) => p.id === 'mount|fake.disk/uid-a-scratch|uid-a',
  );
  assert.equal(scratch.state, 'mountUncertain');
  assert.equal(scratch.uncertain, true);
  assert.equal(scratch.failing, true, 'the failed setUp left a backoff');
  assert.match(scratch.lastError, /scripted uncertain failure/);
  const chain = await get(`/api/explain?seq=${at.mountDevice}`);
  assert.deepEqual(chain.map((s: { seq: number }) => s.seq).slice(0, 2), [
    at.mountDevice,
    at.mountStarted,
  ]);
  const chart = await get('/api/chart?machine=attachment');
  assert.ok(
    chart.nodes.some(
      (n: { id: string; parent: string }) =>
        n.id === 'attachment.attached.deviceMounting' && n.parent === 'attachment.attached',
    ),
  );
  assert.ok(
    chart.edges.some(
      (e: { source: string; target: string }) =>
        e.source === 'attachment.attached.deviceUnmounted' && e.target === 'attachment.detaching',
    ),
  );
});

describe('inspect: the page in Chromium', { skip: noChromium }, () => {
  let context: BrowserContext;
  let page: Page;
  const problems: string[] = [];
  const profile = join(dir, 'chromium-profile');

  before(async () => {
    ({ context, page } = await openChromium(profile, problems, { consoleErrors: true }));
    await page.goto(inspector.url);
  });

  after(async () => {
    await context?.close();
  });

  const pairState = (id: string) => page.locator(`li[data-pair="${id}"] [data-testid=pair-state]`);

  test('lists the pairs of the simulated log with their states', async () => {
    await page.locator(`li[data-pair="${disk}"]`).waitFor();
    const ids = await page
      .locator('li[data-pair]')
      .evaluateAll((els) => els.map((e) => e.getAttribute('data-pair')));
    assert.deepEqual(ids, [
      disk,
      'mount|fake.disk/disk-1|uid-a',
      'attachment|fake.disk/uid-a-scratch|node-1',
      'mount|fake.disk/uid-a-scratch|uid-a',
    ]);
    assert.equal(await pairState(disk).textContent(), 'detached');
    assert.match(
      (await page.locator('li[data-pair="mount|fake.disk/disk-1|uid-a"]').textContent()) ?? '',
      /default\/a/,
    );
    // The filter narrows the list.
    await page.locator('[data-testid=filter-pod]').fill('uid-a');
    assert.equal(await page.locator('li[data-pair]').count(), 2);
    await page.locator('[data-testid=filter-pod]').fill('');
    assert.equal(await page.locator('li[data-pair]').count(), 4);
  });

  test('moving the scrubber shows the world at that moment, the statechart lit', async () => {
    await page.locator(`li[data-pair="${disk}"]`).click();
    await page.locator('svg.chart g.state[data-state="attachment.detached"].current').waitFor();
    await page.locator('[data-testid=scrubber]').evaluate((el, value) => {
      (el as HTMLInputElement).value = value;
      el.dispatchEvent(new Event('input', { bubbles: true }));
    }, String(at.mountDevice));
    await page.waitForFunction(
      () =>
        document.querySelector('[data-testid=selected-state]')?.textContent ===
        'attached.deviceMounting',
    );
    assert.equal(await pairState(disk).textContent(), 'attached.deviceMounting');
    await page
      .locator('svg.chart g.state[data-state="attachment.attached.deviceMounting"].current')
      .waitFor();
    assert.equal(await page.locator('svg.chart g.state.current').count(), 1);
    assert.match(
      (await page.locator('[data-testid=moment]').textContent()) ?? '',
      new RegExp(`seq ${at.mountDevice} / ${at.head}`),
    );
    // Earlier still, the scratch mount is uncertain and failing, and stands out.
    await page.locator('[data-testid=scrubber]').evaluate((el, value) => {
      (el as HTMLInputElement).value = value;
      el.dispatchEvent(new Event('input', { bubbles: true }));
    }, String(at.uncertainFinished));
    await page
      .locator('li[data-pair="mount|fake.disk/uid-a-scratch|uid-a"].is-uncertain.is-failing')
      .waitFor();
  });

  test('clicking an event shows its payload and its chain of causes, as links', async () => {
    await page.locator(`[data-testid=events] tr[data-seq="${at.mountDevice}"]`).click();
    const detail = page.locator('[data-testid=event-detail]');
    await detail.locator('pre.payload').waitFor();
    assert.match(
      (await detail.locator('h3').textContent()) ?? '',
      new RegExp(`#${at.mountDevice} CallStarted`),
    );
    assert.match(
      (await detail.locator('pre.payload').textContent()) ?? '',
      /"call": "mountDevice"/,
    );
    await page.waitForFunction(
      () =>
        document.querySelector('[data-testid=selected-state]')?.textContent ===
        'attached.deviceMounting',
    );
    const causes = await detail
      .locator('[data-testid=causes] a[data-cause]')
      .evaluateAll((els) => els.map((e) => Number(e.getAttribute('data-cause'))));
    assert.ok(causes.length >= 2, `causes: ${causes.join(' ')}`);
    assert.equal(causes[0], at.mountStarted);
    mkdirSync(join(root, 'test-artifacts'), { recursive: true });
    await page.screenshot({ path: screenshotPath });
    await detail.locator(`a[data-cause="${at.mountStarted}"]`).click();
    await page.waitForFunction(
      (seq) =>
        new RegExp(`#${seq} OperationStarted`).test(
          document.querySelector('[data-testid=event-detail] h3')?.textContent ?? '',
        ),
      at.mountStarted,
    );
    await page.waitForFunction(
      () =>
        document.querySelector('[data-testid=selected-state]')?.textContent ===
        'attached.deviceUnmounted',
    );
  });

  test('follows the log live: events appended while the page is open show without a reload', async () => {
    await page.locator('button.live').click();
    await page.waitForFunction(
      () => document.querySelector('[data-testid=selected-state]')?.textContent === 'detached',
    );
    await page.evaluate(() => {
      (window as unknown as { stillThisPage: boolean }).stillThisPage = true;
    });
    // An agent goes on writing: pod b wants the same disk, the attach starts.
    const store = openLog<VoleEvent>(db, {
      codec: eventCodec,
      mode: 'readwrite',
      durability: 'normal',
    });
    try {
      const head = store.head().seq;
      const tsMs = 5000;
      const events: NewEvent[] = [
        {
          type: 'PodUpserted',
          tsMs,
          pod: {
            metadata: { name: 'b', namespace: 'default', uid: 'uid-b' },
            spec: { volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'claim-1' } }] },
          },
        },
        {
          type: 'OperationStarted',
          tsMs,
          opId: `op-${head + 2}`,
          op: 'attach',
          key: { volume: 'fake.disk/disk-1', pod: '', node: '' },
          volume: 'fake.disk/disk-1',
          node: 'node-1',
          cause: head + 1,
        },
        { type: 'CallStarted', tsMs, opId: `op-${head + 2}`, call: 'attach' },
      ];
      store.append(events as Omit<VoleEvent, 'seq'>[], { expectedSeq: head });
    } finally {
      store.close();
    }
    await page.waitForFunction(
      () => document.querySelector('[data-testid=selected-state]')?.textContent === 'attaching',
      undefined,
      { timeout: 10_000 },
    );
    assert.equal(await pairState(disk).textContent(), 'attaching');
    const head = at.head + 3; // the three events appended above
    assert.equal(await page.locator('[data-testid=head]').textContent(), `${head} events`);
    await page.locator(`[data-testid=events] tr[data-seq="${head}"]`).waitFor();
    assert.match(
      (await page.locator('[data-testid=moment]').textContent()) ?? '',
      new RegExp(`seq ${head} / ${head}`),
    );
    assert.equal(
      await page.evaluate(() => (window as unknown as { stillThisPage?: boolean }).stillThisPage),
      true,
      'the page was not reloaded',
    );
    assert.deepEqual(problems, []);
  });

  test("opens a controller log: attachments per node, each node's volumesAttached, the reports", async () => {
    const controllerDb = join(dir, 'controller.db');
    const scenario = parseScenario(
      readFileSync(join(root, 'test/scenarios/controller-multi-attach.yaml'), 'utf8'),
      'controller-multi-attach.yaml',
    );
    const log = openSqliteLog(controllerDb, controllerCore, { durability: 'normal' });
    try {
      assert.ok((await simulate(scenario, { log })).ok);
    } finally {
      log.sink.close();
    }
    const second = await startInspector({ db: controllerDb, port: 0, pollMs: 100 });
    const other = await context.newPage();
    try {
      other.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
      await other.goto(second.url);
      const moved = 'attachment|fake.disk/disk-1|node-2';
      await other.locator(`li[data-pair="${moved}"]`).waitFor();
      const ids = await other
        .locator('li[data-pair]')
        .evaluateAll((els) => els.map((e) => e.getAttribute('data-pair')));
      assert.deepEqual(ids, ['attachment|fake.disk/disk-1|node-1', moved]);
      assert.equal(
        await other.locator(`li[data-pair="${moved}"] [data-testid=pair-state]`).textContent(),
        'attached.deviceUnmounted',
      );
      const attached = (node: string) =>
        other.locator(`li[data-node="${node}"] [data-testid=volumes-attached]`).textContent();
      assert.equal(await attached('node-1'), 'volumesAttached []');
      assert.equal(await attached('node-2'), 'volumesAttached [fake.disk/disk-1]');
      assert.match(
        (await other.locator('[data-testid=reports]').textContent()) ?? '',
        /FailedAttachVolume.*Multi-Attach error for volume/,
      );
      assert.match((await other.locator('.node').first().textContent()) ?? '', /node-1/);
      assert.deepEqual(problems, []);
    } finally {
      await other.close();
      await second.close();
    }
  });
});
