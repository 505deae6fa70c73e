/**
 * Invariant assertions for the core (docs/style.md rule 4). A failed assertion is a programmer
 * error or a corrupt log: it throws InvariantError and is never caught by the engine.
 */
export class InvariantError extends Error {
  override name = 'InvariantError';
}

export function assert(condition: unknown, message: string | (() => string)): asserts condition {
  if (!condition) {
    throw new InvariantError(typeof message === 'string' ? message : message());
  }
}

/**
 * The failing branch of an assertion, for hot paths: `if (bad) fail(\`...\`)` builds its
 * message only when it fails, where `assert(ok, () => ...)` allocates a closure per call.
 */
export function fail(message: string): never {
  throw new InvariantError(message);
}

/** Exhaustiveness check for discriminated unions. */
export function unreachable(value: never, what: string): never {
  throw new InvariantError(`unreachable ${what}: ${JSON.stringify(value)}`);
}
