/**
 * `vole chaos --kube` on worker threads: each worker runs the seeds it is handed, one at a
 * time, and answers each with its summary (the whole run when it failed). A run shares
 * nothing with another, so which worker runs a seed changes nothing in it.
 */
import { Worker } from 'node:worker_threads';

/** The worker's module: the same file type as this one (TypeScript under tsx, or dist/). */
const underTsx = import.meta.url.endsWith('.ts');
const workerUrl = new URL(
  underTsx ? './kube-chaos-worker.ts' : './kube-chaos-worker.js',
  import.meta.url,
).href;

/**
 * A worker thread does not inherit the loader hooks `--import tsx` registered on this one:
 * under tsx it registers them itself before it imports the TypeScript module.
 */
function startWorker(workerData: unknown): Worker {
  if (!underTsx) return new Worker(new URL(workerUrl), { workerData });
  const tsx = import.meta.resolve('tsx/esm/api');
  const source =
    `import(${JSON.stringify(tsx)}).then((tsx) => { tsx.register(); ` +
    `return import(${JSON.stringify(workerUrl)}); });`;
  return new Worker(source, { eval: true, workerData });
}

/**
 * Runs `seeds` on `count` workers (each given `workerData`), each free worker taking the
 * next; `add` hears each run's summary. (The types are kube-chaos.ts's, which imports this
 * module only when it runs on workers.)
 */
export async function runOnWorkers<Summary>(
  seeds: readonly number[],
  count: number,
  workerData: unknown,
  add: (summary: Summary) => void,
): Promise<void> {
  let next = 0;
  const one = () =>
    new Promise<void>((resolve, reject) => {
      const worker = startWorker(workerData);
      const feed = () => {
        if (next < seeds.length) worker.postMessage(seeds[next++]);
        else void worker.terminate().then(() => resolve());
      };
      worker.on('message', (message: Summary | { crashed?: number; message: string }) => {
        if (typeof message === 'object' && message !== null && 'crashed' in message)
          return reject(new Error(`seed ${message.crashed ?? '?'} threw: ${message.message}`));
        add(message as Summary);
        feed();
      });
      worker.once('error', reject);
      worker.once('exit', (code) => {
        if (next < seeds.length || code !== 1)
          reject(new Error(`a chaos worker exited (code ${code}) with seeds left to run`));
      });
      feed();
    });
  await Promise.all(Array.from({ length: count }, one));
}
