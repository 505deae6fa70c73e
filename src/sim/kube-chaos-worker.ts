/** One worker thread of `vole chaos --kube` (kube-chaos-workers.ts): a seed in, its summary out. */
import { parentPort, workerData } from 'node:worker_threads';
import { type KubeRunLength, runKubeSeed, summarize } from './kube-chaos.js';

const { length } = workerData as { length: KubeRunLength };
parentPort?.on('message', (seed: number) => {
  void runKubeSeed(seed, { length }).then((result) => parentPort?.postMessage(summarize(result)));
});
