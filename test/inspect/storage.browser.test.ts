/**
 * The inspector's storage panel in a real browser (Debian's Chromium through
 * playwright-core): for a log of the leading controller provisioning, the StorageClasses,
 * each claim's state, bound PV, last error and next retry, and each PV's phase, capacity,
 * reclaim policy and node affinity, at the head and at an earlier moment picked with the
 * scrubber. Skips the browser part, saying why, without Chromium.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { BrowserContext, Page } from 'playwright-core';
import { openSqliteLog } from '../../src/agent/sqlite-log.js';
import { controllerCore } from '../../src/engine/cores.js';
import type { VoleEvent } from '../../src/events/index.js';
import { type InspectorServer, startInspector } from '../../src/inspect/server.js';
import type { WorldPayload } from '../../src/inspect/protocol.js';
import { parseScenario } from '../../src/sim/scenario.js';
import { simulate } from '../../src/sim/simulate.js';
import { noChromium, openChromium } from '../support/chromium.js';

const root = join(import.meta.dirname, '../..');
const dir = mkdtempSync(join(tmpdir(), 'vole-inspect-storage-'));
const inspectors: InspectorServer[] = [];

/** Simulates a scenario into a controller log and serves it; answers its events too. */
async function serve(file: string): Promise<{ url: string; events: VoleEvent[] }> {
  const db = join(dir, file.replace('.yaml', '.db'));
  const scenario = parseScenario(readFileSync(join(root, 'test/scenarios', file), 'utf8'), file);
  const log = openSqliteLog(db, controllerCore, { durability: 'normal' });
  let events: VoleEvent[];
  try {
    const result = await simulate(scenario, { log });
    assert.ok(result.ok, JSON.stringify(result.failures));
    events = [...log.readAll()];
  } finally {
    log.sink.close();
  }
  const inspector = await startInspector({ db, port: 0, pollMs: 100 });
  inspectors.push(inspector);
  return { url: inspector.url, events };
}

let lifecycle: { url: string; events: VoleEvent[] };
let failing: { url: string; events: VoleEvent[] };
/** The seq of the first failed CreateVolume of the failing log. */
let failedAt = 0;

before(async () => {
  lifecycle = await serve('controller-provision-lifecycle.yaml');
  failing = await serve('controller-provision-failing.yaml');
  const failed = failing.events.find((e) => e.type === 'OperationFinished' && e.outcome !== 'ok');
  assert.ok(failed, 'the failing log has a failed CreateVolume');
  failedAt = failed.seq;
});

after(async () => {
  for (const inspector of inspectors) await inspector.close();
  rmSync(dir, { recursive: true, force: true });
});

async function world(url: string, at?: number): Promise<WorldPayload> {
  const response = await fetch(`${url}api/world${at === undefined ? '' : `?at=${at}`}`);
  return (await response.json()) as WorldPayload;
}

test('inspect storage: the API gives the classes, claims and PVs of a provisioning log', async () => {
  const head = await world(lifecycle.url);
  assert.deepEqual(
    head.storage.classes.map((c) => `${c.name} ${c.volumeBindingMode} ${c.reclaimPolicy}`),
    ['fast Immediate Delete', 'local WaitForFirstConsumer Delete'],
  );
  assert.deepEqual(
    head.storage.claims.map((c) => `${c.claim} ${c.state} ${c.volume}`),
    ['default/first Bound pv-static', 'default/late Bound pvc-c-2'],
  );
  const late = head.storage.pvs.find((pv) => pv.name === 'pvc-c-2');
  assert.equal(late?.nodeAffinity, 'topology.example.com/zone in (z2)');
  assert.equal(late?.capacityBytes, 2 ** 30);
  const early = await world(failing.url, failedAt);
  const data = early.storage.claims.find((c) => c.claim === 'default/data');
  assert.equal(data?.state, 'Provisioning');
  assert.match(data?.lastError ?? '', /RESOURCE_EXHAUSTED/);
  assert.ok(data?.nextRetryAtMs !== null && data!.nextRetryAtMs! > 0);
});

describe('inspect storage: the panel in Chromium', { skip: noChromium }, () => {
  let context: BrowserContext;
  let page: Page;
  const problems: string[] = [];

  before(async () => {
    ({ context, page } = await openChromium(join(dir, 'chromium-profile'), problems));
  });

  after(async () => {
    await context?.close();
  });

  const cells = (selector: string) =>
    page
      .locator(selector)
      .evaluateAll((rows) =>
        rows.map((r) => [...r.querySelectorAll('td')].map((td) => td.textContent ?? '')),
      );

  test('lists the classes, the claims and the PVs with their node affinity', async () => {
    await page.goto(lifecycle.url);
    const summary = page.locator('[data-testid=storage-summary]');
    assert.equal(
      await summary.textContent(),
      '2 storage classes · 2 claims · 2 persistent volumes',
    );
    await summary.click(); // closed to one line until asked for
    await page.locator('[data-testid=storage-pvs] tr[data-pv="pvc-c-2"]').waitFor();
    assert.deepEqual(await cells('[data-testid=storage-classes] tbody tr'), [
      ['fast', 'fake.csi.example.com', 'Delete', 'Immediate', 'no'],
      ['local', 'fake.csi.example.com', 'Delete', 'WaitForFirstConsumer', 'no'],
    ]);
    assert.deepEqual(await cells('[data-testid=storage-claims] tbody tr'), [
      ['default/first', 'fast', 'Bound', 'pv-static', '', ''],
      ['default/late', 'local', 'Bound', 'pvc-c-2', '', ''],
    ]);
    assert.deepEqual(await cells('[data-testid=storage-pvs] tbody tr[data-pv="pvc-c-2"]'), [
      ['pvc-c-2', 'Bound', 'default/late', '1Gi', 'Delete', 'topology.example.com/zone in (z2)'],
    ]);
    assert.deepEqual(problems, []);
  });

  test('at the moment CreateVolume failed: the claim provisioning, its error and next retry', async () => {
    await page.goto(failing.url);
    await page.locator('[data-testid=storage-summary]').click();
    await page.locator('[data-testid=storage-claims] tr[data-claim="default/late"]').waitFor();
    await page.locator('[data-testid=scrubber]').evaluate((el, value) => {
      (el as HTMLInputElement).value = value;
      el.dispatchEvent(new Event('input', { bubbles: true }));
    }, String(failedAt));
    const row = page.locator('[data-testid=storage-claims] tr[data-claim="default/data"].failing');
    await row.waitFor();
    const [claim, cls, state, volume, error, retry] = (
      await cells('[data-testid=storage-claims] tr[data-claim="default/data"]')
    )[0]!;
    assert.deepEqual([claim, cls, state], ['default/data', 'fast', 'Provisioning']);
    assert.equal(volume, 'kubernetes.io/csi/fake.csi.example.com^pvc-c-1');
    assert.match(error!, /RESOURCE_EXHAUSTED/);
    assert.match(retry!, /\d/);
    assert.deepEqual(problems, []);
  });
});
