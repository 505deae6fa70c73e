/**
 * The token manager's schedule (src/kube/tokens.ts), as the kubelet's: a token is asked for
 * again once older than 80 % of its lifetime or than 24 h, and a timer per pod says when.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { VirtualClock } from '../../src/clock.js';
import { TokenRequests, tokenAgeMsMaxDefault, tokenRefreshAtMs } from '../../src/kube/tokens.js';
import type { ServiceAccountTokenPart } from '../../src/operations/volume-spec.js';

const hourMs = 60 * 60 * 1000;

test('tokens: due at 80 % of the lifetime, or at 24 h for a longer one', () => {
  const tokenAgeMsMax = tokenAgeMsMaxDefault;
  assert.equal(tokenRefreshAtMs({ issuedMs: 0, expiresMs: 600_000, tokenAgeMsMax }), 480_000);
  assert.equal(
    tokenRefreshAtMs({ issuedMs: 1000, expiresMs: 1000 + hourMs, tokenAgeMsMax }),
    1000 + 0.8 * hourMs,
  );
  assert.equal(
    tokenRefreshAtMs({ issuedMs: 0, expiresMs: 48 * hourMs, tokenAgeMsMax }),
    24 * hourMs,
  );
  assert.equal(tokenRefreshAtMs({ issuedMs: 0, expiresMs: 600_000, tokenAgeMsMax: 3000 }), 3000);
  assert.throws(
    () => tokenRefreshAtMs({ issuedMs: 5, expiresMs: 5, tokenAgeMsMax }),
    /issued at 5/,
  );
});

const part: ServiceAccountTokenPart = {
  path: 'token',
  serviceAccountName: 'default',
  expirationSeconds: 600,
  podName: 'app',
  podUid: 'uid-a',
};

/** An API server that issues token-1, token-2, … with the asked lifetime, on the clock. */
function fakeApi(clock: VirtualClock) {
  const asked: string[] = [];
  return {
    asked,
    post: async (path: string, body: unknown) => {
      asked.push(path);
      const seconds = (body as { spec: { expirationSeconds: number } }).spec.expirationSeconds;
      const expirationTimestamp = new Date(clock.nowMs() + seconds * 1000).toISOString();
      return { status: { token: `token-${asked.length}`, expirationTimestamp } };
    },
  };
}

test('tokens: cached until due; the pod timer fires then, and a new token is asked for', async () => {
  const clock = new VirtualClock(1_000_000);
  const api = fakeApi(clock);
  const due: string[] = [];
  const tokens = new TokenRequests(api, { clock, onRefreshDue: (uid) => due.push(uid) });
  assert.equal(await tokens.token('default', part), 'token-1');
  assert.equal(clock.nextTimerAtMs(), 1_000_000 + 480_000, 'the timer is at 80 % of 600 s');
  assert.equal(clock.fireNext(1_000_000 + 479_999), false);
  assert.equal(await tokens.token('default', part), 'token-1', 'not due yet: the cached one');
  assert.deepEqual(due, []);
  assert.equal(clock.fireNext(Infinity), true);
  assert.deepEqual(due, ['uid-a'], 'the refresh is due for the pod');
  assert.equal(await tokens.token('default', part), 'token-2', 'due: a new token');
  assert.equal(api.asked.length, 2);
  assert.equal(clock.nextTimerAtMs(), 1_480_000 + 480_000, 'the next refresh is scheduled');
  tokens.forgetPod('uid-a');
  assert.equal(clock.nextTimerAtMs(), undefined, 'a pod gone keeps no timer');
});

test('tokens: a shorter tokenAgeMsMax refreshes sooner; stop clears the timers', async () => {
  const clock = new VirtualClock(0);
  const tokens = new TokenRequests(fakeApi(clock), {
    clock,
    tokenAgeMsMax: 3000,
    onRefreshDue: () => undefined,
  });
  await tokens.token('default', part);
  assert.equal(clock.nextTimerAtMs(), 3000);
  tokens.stop();
  assert.equal(clock.nextTimerAtMs(), undefined);
});
