/**
 * A screenshot of `vole inspect` on a log, for the docs:
 *
 *   node --import tsx scripts/inspector-screenshot.ts DB OUT.png [--event REASON[:WORDS]]
 *
 * serves DB with the inspector (read-only, on 127.0.0.1), opens it in headless Chromium
 * (/usr/bin/chromium, or env VOLE_CHROMIUM) through playwright-core, and with --event
 * selects the latest Kubernetes Event of that reason (whose message holds WORDS) in the
 * event list, so its payload and causes show; then writes a PNG of the 1280×800 page.
 */
import { existsSync } from 'node:fs';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startInspector } from '../src/inspect/server.js';
import { openReadonly } from '../src/postmortem/open.js';

function latestEvent(db: string, wanted: string | undefined): number | undefined {
  if (wanted === undefined) return undefined;
  const [reason, words = ''] = wanted.split(':');
  const store = openReadonly(db);
  try {
    let seq: number | undefined;
    for (const e of store.read({}))
      if (e.type === 'KubeEventObserved' && e.reason === reason && e.message.includes(words))
        seq = e.seq;
    if (seq === undefined) throw new Error(`no Kubernetes Event ${wanted} in ${db}`);
    return seq;
  } finally {
    store.close();
  }
}

async function main(): Promise<void> {
  const [db, out, flag, wanted] = process.argv.slice(2);
  if (db === undefined || out === undefined || (flag !== undefined && flag !== '--event'))
    throw new Error('usage: inspector-screenshot.ts DB OUT.png [--event REASON[:WORDS]]');
  const chromiumPath = process.env.VOLE_CHROMIUM ?? '/usr/bin/chromium';
  if (!existsSync(chromiumPath))
    throw new Error(`no Chromium at ${chromiumPath}: install it, or set VOLE_CHROMIUM`);
  const seq = latestEvent(db, wanted);
  const inspector = await startInspector({ db, port: 0 });
  const profile = mkdtempSync(join(tmpdir(), 'vole-shot-'));
  const { chromium } = await import('playwright-core');
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: chromiumPath,
    headless: true,
    viewport: { width: 1280, height: 800 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run'],
  });
  try {
    const page = context.pages()[0] ?? (await context.newPage());
    await page.goto(inspector.url);
    await page.locator('[data-testid=events] tr[data-seq]').first().waitFor();
    if (seq !== undefined) {
      const row = page.locator(`[data-testid=events] tr[data-seq="${seq}"]`);
      await row.scrollIntoViewIfNeeded();
      await row.click();
      await page.locator('[data-testid=event-detail] pre.payload').waitFor();
    }
    await page.screenshot({ path: out });
    process.stdout.write(`${out}${seq === undefined ? '' : ` (event seq ${seq} selected)`}\n`);
  } finally {
    await context.close();
    await inspector.close();
    rmSync(profile, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`inspector-screenshot: ${(error as Error).message}\n`);
  process.exit(1);
});
