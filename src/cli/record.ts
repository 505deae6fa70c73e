/**
 * `vole record --kubeconfig FILE --db FILE`: a real cluster's volume history as a vole log
 * (src/kube/recorder.ts), read-only, until SIGINT or SIGTERM.
 */
import { RealClock } from '../clock.js';
import { KubeHttp } from '../kube/http.js';
import { Recorder } from '../kube/recorder.js';
import { progressPrinter } from './lifecycle.js';
import { UsageError } from './postmortem.js';

export interface RecordCommandOptions {
  readonly kubeconfig: string;
  readonly db: string;
}

export async function recordCommand(opts: RecordCommandOptions): Promise<number> {
  let http: KubeHttp;
  try {
    http = KubeHttp.fromFile(opts.kubeconfig);
  } catch (error) {
    throw new UsageError(`--kubeconfig ${opts.kubeconfig}: ${(error as Error).message}`);
  }
  const say = progressPrinter();
  const clock = new RealClock({ holdsProcess: true });
  const recorder = new Recorder({ http, server: http.server, clock, db: opts.db, say });
  const stopped = new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  say(`vole record: ${http.server} into ${opts.db} (from seq ${recorder.head + 1})`);
  await Promise.race([recorder.start(), stopped]);
  say(`recording: listed everything, log at seq ${recorder.head}`);
  await stopped;
  await recorder.stop();
  const { logged, refused } = recorder.counts;
  say(`stopped: ${logged} event(s) logged, ${refused} change(s) not recordable, log ${opts.db}`);
  return 0;
}
