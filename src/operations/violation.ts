/**
 * A broken safety rule, as both cores' invariants report it (src/kubelet/invariants.ts,
 * src/controller/invariants.ts) and the engine collects it (src/engine/core.ts).
 */

/** A broken safety rule, naming the pair and the seq. */
export interface Violation {
  readonly seq: number;
  readonly invariant: string;
  readonly message: string;
}
