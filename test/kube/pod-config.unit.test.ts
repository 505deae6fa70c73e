/**
 * The kubelet's config annotations on a pod from the API server (pkg/kubelet/config/
 * config.go): the source `api` and the first-seen time in the layout of its Timestamp
 * (nine digits of fraction, UTC), kept when the pod is seen again.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  configSeenAnnotation,
  configSourceAnnotation,
  kubeletTimestamp,
  withConfigAnnotations,
} from '../../src/kube/pod-config.js';

const at = Date.UTC(2026, 11, 7, 23, 13, 7, 955);
const pod = {
  metadata: { name: 'web', namespace: 'shop', uid: 'u1', annotations: { team: 'storage' } },
  spec: { volumes: [] },
};

test('kubeletTimestamp: RFC 3339 with nine digits of fraction, in UTC', () => {
  assert.equal(kubeletTimestamp(at), '2026-12-07T23:13:07.955000000Z');
  assert.equal(kubeletTimestamp(Date.UTC(2026, 0, 1)), '2026-01-01T00:00:00.000000000Z');
});

test("withConfigAnnotations: the pod's own annotations, the source api and the time first seen", () => {
  const seen = withConfigAnnotations(pod, undefined, at);
  assert.deepEqual(seen.metadata.annotations, {
    team: 'storage',
    [configSeenAnnotation]: '2026-12-07T23:13:07.955000000Z',
    [configSourceAnnotation]: 'api',
  });
  assert.deepEqual(pod.metadata.annotations, { team: 'storage' }, 'the input is not changed');
  // Seen again later: the first time stays (updateAnnotations keeps the local annotations).
  const again = withConfigAnnotations(pod, '2026-12-07T23:13:07.955000000Z', at + 60_000);
  assert.equal(
    again.metadata.annotations?.[configSeenAnnotation],
    '2026-12-07T23:13:07.955000000Z',
  );
});

test('withConfigAnnotations: a pod without annotations gets the two', () => {
  const bare = { metadata: { name: 'a', uid: 'u2' }, spec: { volumes: [] } };
  assert.deepEqual(
    Object.keys(withConfigAnnotations(bare, undefined, at).metadata.annotations ?? {}),
    [configSeenAnnotation, configSourceAnnotation],
  );
});
