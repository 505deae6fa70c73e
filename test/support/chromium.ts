/**
 * Debian's Chromium for the inspector's browser tests: where it is, why a test skips
 * without it, and a headless persistent context whose page reports its errors.
 */
import { existsSync } from 'node:fs';
import type { BrowserContext, Page } from 'playwright-core';

export const chromiumPath = process.env.VOLE_CHROMIUM ?? '/usr/bin/chromium';

/** false when Chromium is there; else the skip reason, saying how to get it. */
export const noChromium: false | string = existsSync(chromiumPath)
  ? false
  : `Chromium is not installed at ${chromiumPath}: the inspector's browser tests need it ` +
    `(scripts/test.sh installs it with apt-get when run as root; or set VOLE_CHROMIUM)`;

export interface ChromiumPage {
  readonly context: BrowserContext;
  readonly page: Page;
}

/**
 * Chromium on `profile`, headless, with no background traffic; its page's uncaught errors
 * (and, with `consoleErrors`, its console errors) are pushed to `problems`.
 */
export async function openChromium(
  profile: string,
  problems: string[],
  options: { viewport?: { width: number; height: number }; consoleErrors?: boolean } = {},
): Promise<ChromiumPage> {
  const { chromium } = await import('playwright-core');
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: chromiumPath,
    headless: true,
    viewport: options.viewport ?? { width: 1440, height: 900 },
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
    ],
  });
  const page = context.pages()[0] ?? (await context.newPage());
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  if (options.consoleErrors === true)
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(`console: ${message.text()}`);
    });
  return { context, page };
}
