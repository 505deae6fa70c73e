/**
 * `vole csi-driver --faults FILE`: faults a test (or an operator rehearsing an incident)
 * switches on and off while the driver runs. The file is read before every RPC, so writing
 * or removing it takes effect at the next call; a missing file means no faults. It is JSON,
 * one entry per RPC name:
 *
 *   {"NodeUnpublishVolume": {"error": "disk busy", "code": "INTERNAL"},
 *    "ControllerPublishVolume": {"delaySeconds": 5, "times": 1}}
 *
 * `error` answers that gRPC status (default INTERNAL) without doing the work; `delaySeconds`
 * waits before doing it (a caller with a shorter deadline sees DeadlineExceeded, as with a
 * slow cloud API); `times` limits the entry to the first N calls since the file last
 * changed (default: every call).
 */
import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import { DriverError } from './errors.js';
import type { Handler } from './common.js';

const faultSchema = z
  .object({
    error: z.string().optional(),
    code: z.string().optional(),
    delaySeconds: z.number().nonnegative().optional(),
    times: z.number().int().positive().optional(),
  })
  .strict();
const faultsSchema = z.record(z.string(), faultSchema);
type Fault = z.infer<typeof faultSchema>;

/** Reads the faults file at each call; counts each RPC's faulted calls since it changed. */
export class FaultFile {
  private text = '';
  private readonly used = new Map<string, number>();

  constructor(private readonly path: string) {}

  /** The fault for this call of `rpc`, if one applies (and counts it). */
  async next(rpc: string): Promise<Fault | undefined> {
    const text = await readFile(this.path, 'utf8').catch(() => '');
    if (text !== this.text) {
      this.text = text;
      this.used.clear();
    }
    if (text.trim() === '') return undefined;
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch (error) {
      throw this.invalid((error as Error).message);
    }
    const parsed = faultsSchema.safeParse(json);
    if (!parsed.success)
      throw this.invalid(
        parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '),
      );
    const fault = parsed.data[rpc];
    if (fault === undefined) return undefined;
    const used = this.used.get(rpc) ?? 0;
    if (fault.times !== undefined && used >= fault.times) return undefined;
    this.used.set(rpc, used + 1);
    return fault;
  }

  private invalid(why: string): DriverError {
    return new DriverError(
      'INTERNAL',
      `faults file ${this.path} is not valid: ${why}; fix or remove it`,
    );
  }
}

/** Every handler behind the faults file: an error instead of the work, or a delay before it. */
export function withFaults(
  handlers: Record<string, Handler>,
  path: string,
): Record<string, Handler> {
  const faults = new FaultFile(path);
  return Object.fromEntries(
    Object.entries(handlers).map(([rpc, handler]): [string, Handler] => [
      rpc,
      async (request) => {
        const fault = await faults.next(rpc);
        if (fault?.delaySeconds !== undefined)
          await new Promise((resolve) => setTimeout(resolve, fault.delaySeconds! * 1000));
        if (fault?.error !== undefined)
          throw new DriverError(fault.code ?? 'INTERNAL', `${rpc}: ${fault.error}`);
        return handler(request);
      },
    ]),
  );
}
