/**
 * Every scenario under test/scenarios/ runs through the real engine: its expectations
 * hold, two runs give byte-identical results, and the fold of its log equals the live
 * world (docs/design.md rule 3).
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { MemorySink } from '../src/engine/sink.js';
import type { VoleEvent } from '../src/events/index.js';
import { parseScenario } from '../src/sim/scenario.js';
import { simulate } from '../src/sim/simulate.js';
import { controllerCore } from '../src/engine/cores.js';
import { foldAll } from '../src/kubelet/index.js';
import type { World } from '../src/kubelet/types.js';
import { assertSameWorld } from './support/world-equal.js';

const dir = join(import.meta.dirname, 'scenarios');
const files = readdirSync(dir)
  .filter((f) => /\.(ya?ml|json)$/.test(f))
  .sort();

for (const file of files) {
  test(`scenario: ${file}`, async () => {
    const scenario = parseScenario(readFileSync(join(dir, file), 'utf8'), file);
    const sink = new MemorySink();
    let live: World | undefined;
    const first = await simulate(scenario, {
      log: { sink, readAll: () => sink.events },
      onEvent: (_e: VoleEvent, world: World) => {
        live = world;
      },
    });
    assert.deepEqual(first.failures, [], `${file}: expectations`);
    assert.ok(first.ok);
    const second = await simulate(scenario);
    assert.equal(JSON.stringify(second), JSON.stringify(first), `${file}: deterministic`);
    assert.ok(live !== undefined);
    const replayed =
      scenario.mode === 'controller'
        ? sink.events.reduce(controllerCore.fold, controllerCore.initialWorld())
        : foldAll(sink.events);
    assertSameWorld(
      replayed as unknown as World,
      live,
      `${file}: the fold of the log equals the live world`,
    );
  });
}

test('scenario: the directory holds scenarios', () => {
  assert.ok(files.length > 0);
});
