/**
 * The token manager's refresh (src/kube/tokens.ts): a TokensRefreshDue event in the log
 * makes the planner set up the pod's serviceAccountToken projections again, and nothing
 * else, as the kubelet's periodic remount does with a token past 80 % of its lifetime.
 */
import { test } from 'node:test';
import type { NewEvent } from '../../src/events/index.js';
import { plan } from '../../src/kubelet/planner.js';
import { fold, initialWorld } from '../../src/kubelet/index.js';
import { caps } from '../../src/plugins/types.js';
import {
  builtins,
  configMap,
  disk,
  engineStarted,
  operation,
  podUpserted,
  sourcesReady,
} from '../support/builders.js';
import { PlanSpecification } from '../support/plan-spec.js';

const spec = PlanSpecification.for({ fold, plan, initialWorld });
const cm = 'kubernetes.io/configmap/uid-a-config';
const token = 'kubernetes.io/projected/uid-a-token';
const projectedToken = {
  name: 'token',
  projected: { sources: [{ serviceAccountToken: { path: 'token', expirationSeconds: 600 } }] },
};

/** Pod uid-a with its configMap and token volumes set up (tokens served). */
function mountedHistory(): NewEvent[] {
  let history: NewEvent[] = [
    {
      ...engineStarted(),
      plugins: [disk, ...builtins, caps('kubernetes.io/projected', { requiresRemount: true })],
      tokenRequests: true,
    } as NewEvent,
    sourcesReady,
    podUpserted('uid-a', [configMap(), projectedToken]),
  ];
  for (const volume of [cm, token]) {
    const verify = operation(history.length + 1, { op: 'verifyControllerAttached', volume }, [
      { call: 'verifyControllerAttached' },
    ]);
    history = [...history, ...verify];
    const key = { volume, pod: 'uid-a', node: '' };
    const mount = operation(history.length + 1, { op: 'mount', volume, pod: 'uid-a', key }, [
      { call: 'setUp' },
    ]);
    history = [...history, ...mount];
  }
  return history;
}

test('token refresh: the due pod has its token projection set up again, nothing else', () => {
  spec
    .given(mountedHistory())
    .when({ type: 'TokensRefreshDue', tsMs: 480_000, pod: 'uid-a' }, { nowMs: 480_000 })
    .then([{ op: 'mount', volume: token, pod: 'uid-a', remount: true }]);
});

test('token refresh: time alone plans nothing; the event is the timer', () => {
  spec
    .given(mountedHistory())
    .when({ type: 'VolumesReportedInUse', tsMs: 480_000, volumes: [] }, { nowMs: 480_000 })
    .thenNothingPlanned();
});

test('token refresh: a pod gone meanwhile is a no-op', () => {
  spec
    .given(mountedHistory())
    .when({ type: 'TokensRefreshDue', tsMs: 480_000, pod: 'uid-gone' }, { nowMs: 480_000 })
    .thenNothingPlanned();
});
