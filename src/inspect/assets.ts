/**
 * The page's assets: one HTML document, and one JS + one CSS file bundled by esbuild from
 * src/inspect/ui (plain DOM) and elkjs. `npm run build` (and so `npm ci`, through
 * `prepare`) writes the bundle to dist/inspector/; the server reads it from there into
 * memory, or bundles in memory when it is missing — or, running from the sources, older
 * than them — so a fresh clone works without a build. Nothing is fetched from the network.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import type { BuildOptions } from 'esbuild';

/** The package's root: two levels above src/inspect, three above dist/src/inspect. */
export const packageRoot = (() => {
  const up2 = dirname(dirname(import.meta.dirname));
  return basename(up2) === 'dist' ? dirname(up2) : up2;
})();
const runningFromSources = !import.meta.dirname.split(/[\\/]/).includes('dist');

const bundleDir = join(packageRoot, 'dist', 'inspector');
const uiDir = join(packageRoot, 'src', 'inspect', 'ui');

export interface Assets {
  readonly js: Buffer;
  readonly css: Buffer;
  /** Where the bundle came from: `dist/inspector` or `built in memory`. */
  readonly source: string;
}

function bundleOptions(): BuildOptions {
  return {
    entryPoints: [
      { in: join(uiDir, 'main.ts'), out: 'app' },
      { in: join(uiDir, 'style.css'), out: 'app' },
    ],
    bundle: true,
    format: 'iife',
    platform: 'browser',
    target: ['es2020'],
    minify: true,
    // elkjs probes for the optional `web-worker` package; the page lays out on its main thread.
    external: ['web-worker'],
    logLevel: 'silent',
    outdir: bundleDir,
    absWorkingDir: packageRoot,
  };
}

/** Writes dist/inspector/app.js and app.css (the build step). */
export async function writeBundle(): Promise<string[]> {
  const esbuild = await loadEsbuild();
  mkdirSync(bundleDir, { recursive: true });
  const result = await esbuild.build({ ...bundleOptions(), write: false });
  const written: string[] = [];
  for (const file of result.outputFiles ?? []) {
    writeFileSync(file.path, file.contents);
    written.push(file.path);
  }
  return written;
}

async function loadEsbuild(): Promise<typeof import('esbuild')> {
  try {
    return await import('esbuild');
  } catch (error) {
    throw new Error(
      `the inspector's page is not built (${join(bundleDir, 'app.js')} is missing) and esbuild is not ` +
        `installed to build it: run \`npm ci\` (or \`npm run build\`) in ${packageRoot}. (${(error as Error).message})`,
    );
  }
}

function newestSourceMs(dir: string): number {
  let newest = 0;
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    const stat = statSync(path);
    newest = Math.max(newest, stat.isDirectory() ? newestSourceMs(path) : stat.mtimeMs);
  }
  return newest;
}

function bundleIsFresh(): boolean {
  const js = join(bundleDir, 'app.js');
  const css = join(bundleDir, 'app.css');
  if (!existsSync(js) || !existsSync(css)) return false;
  if (!runningFromSources || !existsSync(uiDir)) return true;
  return Math.min(statSync(js).mtimeMs, statSync(css).mtimeMs) >= newestSourceMs(uiDir);
}

/** The bundle, read once into memory (or built in memory). */
export async function loadAssets(): Promise<Assets> {
  if (bundleIsFresh()) {
    return {
      js: readFileSync(join(bundleDir, 'app.js')),
      css: readFileSync(join(bundleDir, 'app.css')),
      source: 'dist/inspector',
    };
  }
  const esbuild = await loadEsbuild();
  const result = await esbuild.build({ ...bundleOptions(), write: false });
  const pick = (ext: string) => {
    const file = result.outputFiles?.find((f) => f.path.endsWith(ext));
    if (file === undefined) throw new Error(`esbuild produced no ${ext} for the inspector`);
    return Buffer.from(file.contents);
  };
  return { js: pick('.js'), css: pick('.css'), source: 'built in memory' };
}

export const indexHtml = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>vole inspector</title>
<link rel="icon" href="/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/app.css">
</head>
<body>
<noscript>The vole inspector needs JavaScript.</noscript>
<script src="/app.js"></script>
</body>
</html>
`;

export const faviconSvg = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="7" fill="#1f6feb"/><circle cx="16" cy="16" r="7" fill="none" stroke="#fff" stroke-width="3"/><circle cx="16" cy="16" r="2.5" fill="#fff"/></svg>`;
