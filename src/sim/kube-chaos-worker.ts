/** One worker thread of `vole chaos --kube` (kube-chaos-workers.ts): a seed in, its summary out. */
import { parentPort, workerData } from 'node:worker_threads';
import { type KubeRunLength, runKubeSeed, summarize } from './kube-chaos.js';

const { length } = workerData as { length: KubeRunLength };
let running: number | undefined;
parentPort?.on('message', (seed: number) => {
  running = seed;
  void runKubeSeed(seed, { length }).then((result) => {
    running = undefined;
    parentPort?.postMessage(summarize(result));
  });
});
// An error no run caught (thrown from a timer of its processes) names the seed running,
// then ends the worker: the main thread reports it with that seed, not as a bare crash.
process.on('uncaughtException', (error) => {
  parentPort?.postMessage({ crashed: running, message: error.stack ?? String(error) });
  process.exit(1);
});
