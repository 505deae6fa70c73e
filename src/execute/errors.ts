/**
 * Error classification (behaviour K0.5): a plugin's PluginError (or any error with a valid
 * `kind`, such as the host layer's) keeps its class; anything else is final, as in the
 * kubelet; a call that did not answer in time is uncertain (it may still take effect).
 */
import type { CallError, CallName } from '../events/index.js';

const kinds = new Set(['transient', 'uncertain', 'final']);

export function classify(prefix: string, error: unknown): CallError {
  const e = error as { kind?: unknown; message?: unknown; failedPrecondition?: unknown } | null;
  const message = `${prefix}: ${typeof e?.message === 'string' ? e.message : String(error)}`;
  const kind =
    typeof e?.kind === 'string' && kinds.has(e.kind) ? (e.kind as CallError['kind']) : 'final';
  return e?.failedPrecondition === true
    ? { kind, message, failedPrecondition: true }
    : { kind, message };
}

export function timeoutError(prefix: string, call: CallName, timeoutMs: number): CallError {
  return {
    kind: 'uncertain',
    message:
      `${prefix}: ${call} did not answer within ${timeoutMs / 1000} s and may still take ` +
      `effect; the pair is uncertain until a retry or teardown settles it`,
  };
}
