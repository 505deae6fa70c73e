import assert from 'node:assert/strict';
import type { World } from '../../src/kubelet/types.js';

/** docs/design.md rule 3: a world equals the fold of its log (the planner's dirty set aside). */
export function assertSameWorld(actual: World, expected: World, message: string): void {
  const { dirty: _a, ...a } = actual;
  const { dirty: _b, ...b } = expected;
  assert.deepStrictEqual(a, b, message);
}
