/**
 * The heap of a controller world read back from its snapshot against the world that wrote
 * it: `node --import tsx --expose-gc scripts/bench/revive-heap.ts [pods]` (20,000 by
 * default). Builds the world (`buildWorld`, one attached disk a pod), measures its heap,
 * encodes it, lets it go, decodes the snapshot in slices as a replica that takes over
 * does, and measures the world read back. Heap bytes do not move with the machine's load.
 */
import { getHeapStatistics } from 'node:v8';
import type { ControllerWorld } from '../../src/controller/types.js';
import { controllerCore } from '../../src/engine/cores.js';
import { buildWorld } from './controller.js';
import { gc } from './util.js';

function heapBytes(): number {
  gc();
  return getHeapStatistics().used_heap_size;
}

async function main(): Promise<void> {
  const pods = Number(process.argv[2] ?? 20_000);
  const nodes = Math.max(1, Math.round(pods / 30));
  const before = heapBytes();
  let world: ControllerWorld | undefined = buildWorld(pods, nodes);
  const built = heapBytes() - before;
  const data = controllerCore.snapshot.encode(world);
  world = undefined;
  const empty = heapBytes();
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  let turnMs = started;
  let sliceMsMax = 0;
  const yieldTurn = async () => {
    sliceMsMax = Math.max(sliceMsMax, performance.now() - turnMs);
    await new Promise<void>((resolve) => setImmediate(resolve));
    turnMs = performance.now();
  };
  const { format } = controllerCore.snapshot;
  const revived = await controllerCore.snapshot.decodeSliced(data, format, yieldTurn);
  const decodeMs = performance.now() - started;
  const cpu = process.cpuUsage(cpuBefore);
  const cpuMs = (cpu.user + cpu.system) / 1000;
  if (revived === undefined) throw new Error('revive-heap: the snapshot did not decode');
  const read = heapBytes() - empty;
  const perPod = (bytes: number) => Math.round(bytes / pods).toLocaleString('en-US');
  console.log(
    `${pods.toLocaleString('en-US')} pods over ${nodes} nodes, snapshot ` +
      `${(data.length / 2 ** 20).toFixed(1)} MiB, decoded in ${decodeMs.toFixed(0)} ms ` +
      `(CPU ${cpuMs.toFixed(0)} ms, GC threads included) ` +
      `(longest slice ${sliceMsMax.toFixed(1)} ms)`,
  );
  console.log(`built world:  ${perPod(built)} bytes a pod`);
  console.log(`read back:    ${perPod(read)} bytes a pod (${revived.pods.size} pods)`);
}

await main();
