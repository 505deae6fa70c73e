/**
 * The engine's CallTarget makes its AbortSignal only when a plugin asks for it, and the
 * signal says the same whenever it is asked: aborted once the engine stopped or the call
 * timed out, and not by an engine stop after the call returned.
 */
import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import { test } from 'node:test';
import { callCutOff, EngineCallTarget } from '../../src/plugins/call-target.js';

const targetOf = (engine: AbortController) =>
  new EngineCallTarget('node-1', 'pod-1', engine.signal);

test('no signal and no listener on the engine until a plugin asks', () => {
  const engine = new AbortController();
  const target = targetOf(engine);
  assert.equal(callCutOff(target), false);
  assert.equal(getEventListeners(engine.signal, 'abort').length, 0, 'cutOff made no signal');
  const signal = target.signal;
  assert.equal(target.signal, signal, 'one signal a call');
  assert.equal(getEventListeners(engine.signal, 'abort').length, 1);
  target.end();
  assert.equal(getEventListeners(engine.signal, 'abort').length, 0, 'removed when the call ends');
});

test('the engine stopping during the call aborts a signal made before or after', () => {
  const before = new AbortController();
  const early = targetOf(before);
  const signal = early.signal;
  before.abort();
  assert.equal(signal.aborted, true);
  assert.equal(callCutOff(early), true);

  const after = new AbortController();
  const late = targetOf(after);
  after.abort();
  assert.equal(callCutOff(late), true, 'cut off without a signal');
  assert.equal(late.signal.aborted, true, 'made after the stop: aborted at once');
  assert.equal(getEventListeners(after.signal, 'abort').length, 0);
});

test('a timeout aborts the signal, made before or after; a stop after the call ends does not', () => {
  const engine = new AbortController();
  const made = targetOf(engine);
  const signal = made.signal;
  made.end();
  made.timeOut();
  assert.equal(signal.aborted, true);
  const notMade = targetOf(engine);
  notMade.end();
  notMade.timeOut();
  assert.equal(callCutOff(notMade), true);
  assert.equal(notMade.signal.aborted, true);

  const returned = targetOf(engine);
  const kept = returned.signal;
  returned.end();
  engine.abort();
  assert.equal(kept.aborted, false, 'the call had returned before the engine stopped');
});

test('a target made elsewhere answers from its own signal', () => {
  const controller = new AbortController();
  const target = { node: 'node-1', pod: null, signal: controller.signal };
  assert.equal(callCutOff(target), false);
  controller.abort();
  assert.equal(callCutOff(target), true);
});
