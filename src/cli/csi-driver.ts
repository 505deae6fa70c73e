/**
 * `vole csi-driver`: the loop disk as a CSI driver process (`disk.csi.vole.dev`), serving
 * Identity, Controller and Node on its endpoint until SIGINT or SIGTERM; with
 * --registration-dir it also registers itself the kubelet's way.
 */
import { appendFileSync, mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { Logger } from 'pino';
import { parseQuantityBytes } from '../events/k8s.js';
import { diskCsiDriverName, diskDriverHandlers } from '../csi/driver/disk-driver.js';
import { withFaults } from '../csi/driver/faults.js';
import { serveCsiDriver, socketPathOf } from '../csi/driver/server.js';
import type { Handler } from '../csi/driver/common.js';
import { progressPrinter, runUntilStopped } from './lifecycle.js';
import { UsageError } from './postmortem.js';

export interface CsiDriverOptions {
  readonly endpoint: string;
  readonly nodeId: string;
  readonly stateDir: string;
  readonly registrationDir?: string;
  readonly maxVolumesPerNode?: string;
  readonly capacity?: string;
  readonly nodeAttach?: boolean;
  readonly requestLog?: string;
  /** `--faults FILE`: faults switched on and off while it runs (src/csi/driver/faults.ts). */
  readonly faults?: string;
}

/**
 * `--request-log`: each request appended as one JSON line `{rpc, request}` before it is
 * handled, so two nodes' calls to the same driver compare (order, contexts, paths). The
 * values of `secrets` are redacted: the file is for reading, not for keeping credentials.
 */
export function loggedHandlers(
  handlers: Readonly<Record<string, Handler>>,
  file: string,
): Record<string, Handler> {
  const logged: Record<string, Handler> = {};
  for (const [rpc, handler] of Object.entries(handlers)) {
    logged[rpc] = (request) => {
      const { secrets } = request as { secrets?: Record<string, string> };
      const shown =
        secrets === undefined
          ? request
          : {
              ...request,
              secrets: Object.fromEntries(Object.keys(secrets).map((k) => [k, '<redacted>'])),
            };
      appendFileSync(file, `${JSON.stringify({ rpc, request: shown })}\n`);
      return handler(request);
    };
  }
  return logged;
}

/** `--capacity`: a Kubernetes quantity (10Gi) or bytes; undefined when not given. */
function capacityBytesOf(capacity: string | undefined): number | undefined {
  if (capacity === undefined) return undefined;
  const bytes = parseQuantityBytes(capacity);
  if (bytes === undefined || !Number.isSafeInteger(bytes) || bytes <= 0)
    throw new UsageError(`--capacity ${capacity}: give a Kubernetes quantity such as 10Gi`);
  return bytes;
}

export async function csiDriverCommand(opts: CsiDriverOptions, logger: Logger): Promise<number> {
  let socketPath: string;
  try {
    socketPath = socketPathOf(opts.endpoint);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const maxVolumesPerNode = Number(opts.maxVolumesPerNode ?? '0');
  if (!Number.isSafeInteger(maxVolumesPerNode) || maxVolumesPerNode < 0)
    throw new UsageError(
      `--max-volumes-per-node ${opts.maxVolumesPerNode}: give a whole number ≥ 0`,
    );
  const capacityBytes = capacityBytesOf(opts.capacity);
  mkdirSync(opts.stateDir, { recursive: true });
  mkdirSync(dirname(socketPath), { recursive: true });
  if (opts.registrationDir !== undefined) mkdirSync(opts.registrationDir, { recursive: true });
  const holdIn = process.env.VOLE_CSI_DRIVER_HOLD;
  const disk = diskDriverHandlers({
    nodeId: opts.nodeId,
    stateDir: resolve(opts.stateDir),
    maxVolumesPerNode,
    ...(capacityBytes === undefined ? {} : { capacityBytes }),
    ...(opts.nodeAttach === true ? { nodeAttach: true } : {}),
    ...(holdIn === undefined || holdIn === '' ? {} : { holdIn }),
  });
  const handlers = opts.faults === undefined ? disk : withFaults(disk, resolve(opts.faults));
  const say = progressPrinter();
  const served = await serveCsiDriver({
    name: diskCsiDriverName,
    endpoint: `unix://${socketPath}`,
    handlers: opts.requestLog === undefined ? handlers : loggedHandlers(handlers, opts.requestLog),
    ...(opts.registrationDir === undefined ? {} : { registrationDir: opts.registrationDir }),
    logger,
  }).catch((error: unknown) => {
    throw new UsageError(`cannot serve on ${opts.endpoint}: ${(error as Error).message}`);
  });
  say(
    `${diskCsiDriverName} serving on unix://${served.socketPath} ` +
      `(node ${opts.nodeId}, state ${opts.stateDir}` +
      `${capacityBytes === undefined ? '' : `, capacity ${opts.capacity}`})` +
      (served.registrationSocketPath === undefined
        ? ''
        : `, registration ${served.registrationSocketPath}`),
  );
  return runUntilStopped({
    say,
    once: false,
    timeout: undefined,
    settled: () => false,
    settledMessage: () => '',
    shutdown: async () => served.close(),
  });
}
