/**
 * The inspector on a recorded cluster: a node dies with its pod's ReadWriteOnce volume in
 * use, the pod's replacement waits on node-b (Multi-Attach) until the forced detach, and a
 * VolumeAttachment patched by hand attaches the volume to node-a again while node-b holds
 * it. `/api/verdict` gives the judge's verdict; in Chromium (playwright-core) the
 * violation's mark stands over the scrubber at the event that broke the rule, the waiting
 * pod's span lies under it, and the verdict panel names the rule and the condition that
 * held the pod. Skips the browser part, saying why, without Chromium.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { BrowserContext, Page } from 'playwright-core';
import { type InspectorServer, startInspector } from '../../src/inspect/server.js';
import type { Meta, VerdictPayload, WorldPayload } from '../../src/inspect/protocol.js';
import { toJsonLines } from '../../src/postmortem/index.js';
import { vole } from '../support/agent-process.js';
import { at, Log, nodeKilled, uniqueOf } from '../support/recorded-log.js';
import { noChromium, openChromium } from '../support/chromium.js';

const dir = mkdtempSync(join(tmpdir(), 'vole-inspect-verdict-'));
let inspector: InspectorServer;
/** The seq of the planted VolumeAttachment; the seqs of the node-killed history. */
let planted = 0;
let seqs: ReturnType<typeof nodeKilled>;

before(async () => {
  const log = new Log();
  seqs = nodeKilled(log);
  planted = log.va(at('12:09:00'), 'csi-planted', 'pvc-1', 'node-a', { attached: true });
  const file = join(dir, 'planted.jsonl');
  writeFileSync(file, [...toJsonLines(log.events)].join(''));
  const db = join(dir, 'planted.db');
  const imported = vole('import', file, '--db', db);
  assert.equal(imported.status, 0, imported.stderr);
  inspector = await startInspector({ db, port: 0, pollMs: 100 });
});

after(async () => {
  await inspector?.close();
  rmSync(dir, { recursive: true, force: true });
});

const get = async <T>(path: string): Promise<T> =>
  (await (await fetch(`${inspector.url}${path}`)).json()) as T;

test('inspect verdict: the API gives the violation at its event and the waits with their holds', async () => {
  const verdict = await get<VerdictPayload>('api/verdict');
  assert.equal(verdict.judged, true);
  assert.deepEqual(
    verdict.violations.map((v) => [v.rule, v.volume, v.nodes, v.atSeq]),
    [['multiAttach', 'pvc-1', ['node-b', 'node-a'], planted]],
  );
  assert.deepEqual(
    verdict.forcedDetaches.map((f) => [f.volume, f.node, f.atSeq]),
    [['pvc-1', 'node-a', seqs.forced]],
  );
  const web2 = verdict.waits.find((w) => w.pod === 'default/web-2');
  assert.equal(web2?.held.kind, 'multiAttach');
  assert.equal(web2?.waitedFromSeq, seqs.moved);
  assert.match(
    web2?.text[1] ?? '',
    /^ {2}held by multiAttach \(data\): Multi-Attach: pvc-1 is attached to node-a/,
  );
  const meta = await get<Meta>('api/meta');
  assert.match(meta.title, /^a recorded cluster \(/);
  // The pairs are the API's VolumeAttachments: both nodes hold pvc-1 at the end.
  const world = await get<WorldPayload>('api/world');
  assert.deepEqual(
    world.pairs.map((p) => `${p.id} ${p.state}`),
    [
      `attachment|${uniqueOf('pvc-1')}|node-a attached`,
      `attachment|${uniqueOf('pvc-1')}|node-b attached`,
    ],
  );
  // Before the forced detach, node-a's attachment alone.
  const before = await get<WorldPayload>(`api/world?at=${seqs.moved}`);
  assert.deepEqual(
    before.pairs.map((p) => `${p.id} ${p.state}`),
    [`attachment|${uniqueOf('pvc-1')}|node-a attached`],
  );
});

describe('inspect verdict: the marks in Chromium', { skip: noChromium }, () => {
  let context: BrowserContext;
  let page: Page;
  const problems: string[] = [];

  before(async () => {
    ({ context, page } = await openChromium(join(dir, 'chromium-profile'), problems));
  });

  after(async () => {
    await context?.close();
  });

  test("the violation's mark at its event, the waiting pod's span and its holding condition", async () => {
    await page.goto(inspector.url);
    const mark = page.locator(`[data-testid=verdict-mark][data-seq="${planted}"]`);
    await mark.waitFor();
    assert.match(
      (await mark.getAttribute('title')) ?? '',
      /^VIOLATION multiAttach at seq \d+: pvc-1 \(ReadWriteOnce\) attached to node-a/,
    );
    // The planted attach is the log's last event: its mark stands at the scrubber's end.
    const left = await mark.evaluate((el) => parseFloat((el as HTMLElement).style.left));
    assert.ok(left > 99, `the mark at ${left}%`);
    const violation = page.locator('[data-testid=verdict-violation]');
    assert.equal(await violation.count(), 1);
    assert.match(
      (await violation.textContent()) ?? '',
      /^#\d+ multiAttach: pvc-1 \(ReadWriteOnce\) attached to node-a/,
    );
    const held = page.locator(
      '[data-testid=verdict-wait][data-pod="default/web-2"] [data-testid=verdict-held]',
    );
    assert.match(
      (await held.textContent()) ?? '',
      /^held by multiAttach \(data\): Multi-Attach: pvc-1 is attached to node-a .*force detach due at 12:08:40$/,
    );
    const span = page.locator('[data-testid=wait-span][data-pod="default/web-2"]');
    assert.match((await span.getAttribute('title')) ?? '', /held by multiAttach/);
    const width = await span.evaluate((el) => parseFloat((el as HTMLElement).style.width));
    assert.ok(width > 10, `the wait spans ${width}% of the log`);
    // The nodes the recorded cluster had, and its pairs, at the head.
    await page.locator('[data-testid=controller-side] li[data-node="node-a"]').waitFor();
    assert.equal(await page.locator('[data-testid=pairs] li.pair.attachment').count(), 2);

    // A click on the mark shows the event that broke the rule, marked in the list.
    await mark.click();
    await page.locator('[data-testid=event-detail] h3', { hasText: `#${planted} ` }).waitFor();
    await page.locator(`[data-testid=events] tr.violation[data-seq="${planted}"]`).waitFor();
    assert.deepEqual(problems, []);
  });
});
