#!/usr/bin/env node
// The modules importing one entry loads: `node [--import tsx] scripts/load-graph.mjs ENTRY`
// prints them as JSON (absolute paths, ES modules and CommonJS ones alike). A resolve hook
// sees every ES module; require.cache holds the CommonJS modules the packages load inside.
import { createRequire, register } from 'node:module';
import { resolve as resolvePath } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { MessageChannel } from 'node:worker_threads';

const entry = process.argv[2];
if (entry === undefined) {
  console.error('usage: node scripts/load-graph.mjs ENTRY (a file or a package specifier)');
  process.exit(2);
}
const { port1, port2 } = new MessageChannel();
const resolved = new Set();
port1.on('message', (url) => resolved.add(url));
const hook = `
let port;
export function initialize(data) { port = data.port; }
export async function resolve(specifier, context, next) {
  const result = await next(specifier, context);
  port.postMessage(result.url);
  return result;
}`;
register(`data:text/javascript,${encodeURIComponent(hook)}`, {
  data: { port: port2 },
  transferList: [port2],
});
const isPath = entry.startsWith('.') || entry.startsWith('/');
await import(isPath ? pathToFileURL(resolvePath(entry)).href : entry);
// The hook's messages arrive on this thread's next turns: wait until they stop coming.
let seen = -1;
while (seen !== resolved.size) {
  seen = resolved.size;
  await new Promise((done) => setTimeout(done, 50));
}
port1.close();
const self = fileURLToPath(import.meta.url);
const loaders = /\/node_modules\/(tsx|esbuild|get-tsconfig|resolve-pkg-maps)\//;
const modules = [
  ...[...resolved].filter((url) => url.startsWith('file:')).map((url) => fileURLToPath(url)),
  ...Object.keys(createRequire(import.meta.url).cache),
].filter((path) => path !== self && !loaders.test(path));
console.log(JSON.stringify([...new Set(modules)].sort(), null, 1));
