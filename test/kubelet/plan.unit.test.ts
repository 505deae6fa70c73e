import { test } from 'node:test';
import type { NewEvent } from '../../src/events/index.js';
import { plan } from '../../src/kubelet/planner.js';
import { fold, initialWorld } from '../../src/kubelet/index.js';
import {
  claim,
  configMap,
  diskObjects,
  emptyDir,
  engineStarted,
  operation,
  podUpserted,
  sourcesReady,
} from '../support/builders.js';
import { PlanSpecification } from '../support/plan-spec.js';

const spec = PlanSpecification.for({ fold, plan, initialWorld });
const vol = 'fake.disk/disk-1';
const kubeletMode = [
  engineStarted({ controllerAttachDetach: false }),
  sourcesReady,
  ...diskObjects('disk-1'),
];
const controllerMode = [
  engineStarted({ controllerAttachDetach: true }),
  sourcesReady,
  ...diskObjects('disk-1'),
];
const podA = podUpserted('uid-a', [claim('disk-1')]);

/** History up to a mounted disk-1 for pod uid-a (kubelet attach mode). seqs: 1..4 then ops. */
function mountedHistory(): NewEvent[] {
  const base = [...kubeletMode, podA];
  const attach = operation(base.length + 1, { op: 'attach', volume: vol }, [
    { call: 'attach', devicePath: '/dev/x' },
  ]);
  const afterAttach = [...base, ...attach];
  const mount = operation(afterAttach.length + 1, { op: 'mount', volume: vol, pod: 'uid-a' }, [
    { call: 'waitForAttach', devicePath: '/dev/x' },
    { call: 'mountDevice', deviceMountPath: '/g/disk-1' },
    { call: 'setUp' },
  ]);
  return [...afterAttach, ...mount];
}

test('plan: attach: a desired attachable volume is attached in kubelet attach mode', () => {
  spec
    .given(kubeletMode)
    .when(podA, { nowMs: 0 })
    .then([{ op: 'attach', volume: vol }]);
});

test('plan: attach: controller mode waits (no operation) until reported in use and listed attached', () => {
  spec.given(controllerMode).when(podA, { nowMs: 0 }).thenNothingPlanned();
  spec
    .given([...controllerMode, podA])
    .when({ type: 'VolumesReportedInUse', tsMs: 0, volumes: [vol] }, { nowMs: 0 })
    .thenNothingPlanned();
  spec
    .given([...controllerMode, podA, { type: 'VolumesReportedInUse', tsMs: 0, volumes: [vol] }])
    .when(
      {
        type: 'NodeStatusObserved',
        tsMs: 0,
        node: 'node-1',
        volumesAttached: [{ name: vol, devicePath: '/dev/sdb' }],
      },
      { nowMs: 0 },
    )
    .then([{ op: 'verifyControllerAttached', volume: vol }]);
});

test('plan: attach: a non-attachable volume is verified at once, in both modes', () => {
  const scratch = 'kubernetes.io/empty-dir/uid-a-scratch';
  for (const mode of [kubeletMode, controllerMode]) {
    spec
      .given(mode)
      .when(podUpserted('uid-a', [emptyDir()]), { nowMs: 0 })
      .then([{ op: 'verifyControllerAttached', volume: scratch }]);
  }
});

test('plan: mount: an attached volume is mounted; a mounted one is left alone', () => {
  const history = mountedHistory();
  const withoutMount = history.slice(
    0,
    history.findIndex((e) => e.type === 'OperationStarted' && e.op === 'mount'),
  );
  spec
    .given(withoutMount.slice(0, -1))
    .when(withoutMount.at(-1)!, { nowMs: 0 })
    .then([{ op: 'mount', volume: vol, pod: 'uid-a' }]);
  spec.given(history.slice(0, -1)).when(history.at(-1)!, { nowMs: 0 }).thenNothingPlanned();
});

test('plan: mount: two pods of one attachable volume mount one at a time (one key)', () => {
  const history = mountedHistory();
  const upToAttach = history.slice(
    0,
    history.findIndex((e) => e.type === 'OperationStarted' && e.op === 'mount'),
  );
  spec
    .given(upToAttach)
    .when(podUpserted('uid-b', [claim('disk-1')]), { nowMs: 0 })
    .then([{ op: 'mount', volume: vol, pod: 'uid-a' }]);
});

test('plan: mount: per-pod volumes of two pods are set up in parallel', () => {
  const a = 'kubernetes.io/empty-dir/uid-a-scratch';
  const b = 'kubernetes.io/empty-dir/uid-b-scratch';
  const history = [
    ...kubeletMode,
    podUpserted('uid-a', [emptyDir()]),
    podUpserted('uid-b', [emptyDir()]),
  ];
  const verifyA = operation(history.length + 1, { op: 'verifyControllerAttached', volume: a }, [
    { call: 'verifyControllerAttached' },
  ]);
  const verifyB = operation(
    history.length + verifyA.length + 1,
    { op: 'verifyControllerAttached', volume: b },
    [{ call: 'verifyControllerAttached' }],
  );
  const all = [...history, ...verifyA, ...verifyB];
  spec
    .given(all.slice(0, -1))
    .when(all.at(-1)!, { nowMs: 0 })
    .then([
      { op: 'mount', volume: a, pod: 'uid-a' },
      { op: 'mount', volume: b, pod: 'uid-b' },
    ]);
});

test('plan: backoff: a failed attach is retried at 500 ms, not before', () => {
  const history = [...kubeletMode, podA];
  const failed = operation(history.length + 1, { op: 'attach', volume: vol }, [
    { call: 'attach', kind: 'transient' },
  ]);
  const all = [...history, ...failed];
  spec.given(all.slice(0, -1)).when(all.at(-1)!, { nowMs: 499 }).thenRetryAt(vol, 500);
  spec
    .given(all.slice(0, -1))
    .when(all.at(-1)!, { nowMs: 500 })
    .then([{ op: 'attach', volume: vol }]);
});

test('plan: backoff: the second consecutive failure doubles the wait to 1 s', () => {
  const history = [...kubeletMode, podA];
  const first = operation(history.length + 1, { op: 'attach', volume: vol }, [
    { call: 'attach', kind: 'transient' },
  ]);
  const second = operation(
    history.length + first.length + 1,
    { op: 'attach', volume: vol },
    [{ call: 'attach', kind: 'transient' }],
    { tsMs: 500 },
  );
  const all = [...history, ...first, ...second];
  spec.given(all.slice(0, -1)).when(all.at(-1)!, { nowMs: 1499 }).thenRetryAt(vol, 1500);
  spec
    .given(all.slice(0, -1))
    .when(all.at(-1)!, { nowMs: 1500 })
    .then([{ op: 'attach', volume: vol }]);
});

test("plan: unmount: a removed pod's mount is torn down, then the device, then it is detached", () => {
  const mounted = mountedHistory();
  spec
    .given(mounted)
    .when({ type: 'PodRemoved', tsMs: 0, uid: 'uid-a' }, { nowMs: 0 })
    .then([{ op: 'unmount', volume: vol, pod: 'uid-a' }]);
  const removed = [...mounted, { type: 'PodRemoved', tsMs: 0, uid: 'uid-a' } as NewEvent];
  const unmount = operation(removed.length + 1, { op: 'unmount', volume: vol, pod: 'uid-a' }, [
    { call: 'tearDown' },
  ]);
  const afterUnmount = [...removed, ...unmount];
  spec
    .given(afterUnmount.slice(0, -1))
    .when(afterUnmount.at(-1)!, { nowMs: 0 })
    .then([{ op: 'unmountDevice', volume: vol }]);
  const unmountDevice = operation(afterUnmount.length + 1, { op: 'unmountDevice', volume: vol }, [
    { call: 'unmountDevice' },
  ]);
  const afterDevice = [...afterUnmount, ...unmountDevice];
  spec
    .given(afterDevice.slice(0, -1))
    .when(afterDevice.at(-1)!, { nowMs: 0 })
    .then([{ op: 'detach', volume: vol }]);
});

test('plan: unmount: nothing is torn down before the sources are ready after a restart', () => {
  const mounted = mountedHistory();
  const restarted = [...mounted, { type: 'PodRemoved', tsMs: 0, uid: 'uid-a' } as NewEvent];
  spec
    .given(restarted)
    .when(engineStarted({ controllerAttachDetach: false }), { nowMs: 0 })
    .thenNothingPlanned();
  spec
    .given([...restarted, engineStarted({ controllerAttachDetach: false })])
    .when(sourcesReady, { nowMs: 0 })
    .then([{ op: 'unmount', volume: vol, pod: 'uid-a' }]);
});

test('plan: unmountDevice: an uncertain pod mount blocks unmounting the device and detach', () => {
  const mounted = mountedHistory();
  const removed = [...mounted, { type: 'PodRemoved', tsMs: 0, uid: 'uid-a' } as NewEvent];
  const failedTearDown = operation(
    removed.length + 1,
    { op: 'unmount', volume: vol, pod: 'uid-a' },
    [{ call: 'tearDown', kind: 'final' }],
  );
  const all = [...removed, ...failedTearDown];
  // The unmount is in backoff; nothing else may act on the volume meanwhile.
  spec.given(all.slice(0, -1)).when(all.at(-1)!, { nowMs: 100 }).thenRetryAt(vol, 500);
  spec
    .given(all.slice(0, -1))
    .when(all.at(-1)!, { nowMs: 500 })
    .then([{ op: 'unmount', volume: vol, pod: 'uid-a' }]);
});

test('plan: detach: controller mode forgets the volume instead of detaching it', () => {
  const vol2 = 'kubernetes.io/empty-dir/uid-a-scratch';
  const history = [...controllerMode, podUpserted('uid-a', [emptyDir()])];
  const verify = operation(history.length + 1, { op: 'verifyControllerAttached', volume: vol2 }, [
    { call: 'verifyControllerAttached' },
  ]);
  spec
    .given([...history, ...verify])
    .when({ type: 'PodRemoved', tsMs: 0, uid: 'uid-a' }, { nowMs: 0 })
    .then([{ op: 'markDetached', volume: vol2 }]);
});

test('plan: remount: a configMap volume is set up again when its pod is updated', () => {
  const cm = 'kubernetes.io/configmap/uid-a-config';
  const history = [...kubeletMode, podUpserted('uid-a', [configMap()])];
  const verify = operation(history.length + 1, { op: 'verifyControllerAttached', volume: cm }, [
    { call: 'verifyControllerAttached' },
  ]);
  const afterVerify = [...history, ...verify];
  const mount = operation(
    afterVerify.length + 1,
    { op: 'mount', volume: cm, pod: 'uid-a', key: { volume: cm, pod: 'uid-a', node: '' } },
    [{ call: 'setUp' }],
  );
  const mounted = [...afterVerify, ...mount];
  spec
    .given(mounted)
    .when(podUpserted('uid-a', [configMap()]), { nowMs: 0 })
    .then([{ op: 'mount', volume: cm, pod: 'uid-a', remount: true }]);
});

test('plan: invariants: starting an operation on a busy key fails loudly', () => {
  const history = [...kubeletMode, podA];
  const running = operation(history.length + 1, { op: 'attach', volume: vol }, [], {
    finished: false,
  });
  const second = operation(history.length + running.length + 1, { op: 'attach', volume: vol }, [], {
    finished: false,
  });
  spec
    .given([...history, ...running])
    .when(second, { nowMs: 0 })
    .thenAsserts(/never two operations on one key/);
});

test('plan: invariants: an event the pair cannot take is an error naming the pair and seq', () => {
  const history = [...kubeletMode, podA];
  const badDetach = operation(history.length + 1, { op: 'detach', volume: vol }, [
    { call: 'detach' },
  ]);
  spec
    .given(history)
    .when(badDetach, { nowMs: 0 })
    .thenAsserts(/attachment fake\.disk\/disk-1@node-1: .*\(seq 7\)/);
  const mounted = mountedHistory();
  const tearDownUnmounted = operation(
    mounted.length + 1,
    { op: 'unmount', volume: vol, pod: 'uid-b' },
    [{ call: 'tearDown' }],
  );
  spec
    .given(mounted)
    .when(tearDownUnmounted, { nowMs: 0 })
    .thenAsserts(/mount fake\.disk\/disk-1 × pod uid-b: no spec to create it \(seq \d+\)/);
});

test('plan: restart: a host check that finds an uncertain mount absent settles it; present keeps it', () => {
  const mounted = mountedHistory();
  const removed = [...mounted, { type: 'PodRemoved', tsMs: 0, uid: 'uid-a' } as NewEvent];
  const cutTearDown = operation(
    removed.length + 1,
    { op: 'unmount', volume: vol, pod: 'uid-a' },
    [{ call: 'tearDown' }],
    { finished: false },
  ).slice(0, 2);
  const crashed = [
    ...removed,
    ...cutTearDown,
    engineStarted({ controllerAttachDetach: false }),
    sourcesReady,
  ];
  const absent: NewEvent = {
    type: 'HostObserved',
    tsMs: 1000,
    attachments: [],
    mounts: [{ volume: vol, pod: 'uid-a', mounted: false }],
  };
  const present: NewEvent = {
    type: 'HostObserved',
    tsMs: 1000,
    attachments: [],
    mounts: [{ volume: vol, pod: 'uid-a', mounted: true }],
  };
  // Absent: nothing left to tear down for the pod; the device is next.
  spec
    .given(crashed)
    .when(absent, { nowMs: 1000 })
    .then([{ op: 'unmountDevice', volume: vol }]);
  // Present: still uncertain, so it is torn down again (after the cut-off attempt's backoff).
  spec
    .given(crashed)
    .when(present, { nowMs: 1000 })
    .then([{ op: 'unmount', volume: vol, pod: 'uid-a' }]);
});
