/** Checking a scenario's `expect` step against the world (docs/scenarios.md expectation keys). */
import type { UniquePodName, UniqueVolumeName } from '../ids.js';
import type { FakeCallRecord } from '../plugins/fake.js';
import {
  type BindingReader,
  claimBindings,
  getVolumesInUse,
  podWaitStatus,
} from '../kubelet/queries.js';
import type { World } from '../kubelet/types.js';
import type { Expectation } from './scenario.js';
import { podEntry } from '../kubelet/by-pod.js';
import { persistentVolumes, type PvWorld } from '../binding/claims-view.js';

export interface Failure {
  readonly step: number;
  readonly key: string;
  readonly expected: unknown;
  readonly actual: unknown;
  readonly message: string;
}

export function countCalls(
  journal: readonly FakeCallRecord[],
): Record<string, Record<string, number>> {
  const counts: Record<string, Record<string, number>> = {};
  for (const c of journal) {
    const perPlugin = (counts[c.plugin] ??= {});
    perPlugin[c.call] = (perPlugin[c.call] ?? 0) + 1;
  }
  return counts;
}

/** The attachment state of a volume as a dotted path; `detached` when there is none. */
function attachmentState(world: World, volume: string): string {
  return world.attachments.get(volume as UniqueVolumeName)?.value ?? 'detached';
}

/** `POD_UID/OUTER_VOLUME_NAME` → the mount state; `unmounted` when there is none. */
function mountState(world: World, podSlashOuter: string): string {
  const slash = podSlashOuter.indexOf('/');
  const pod = podSlashOuter.slice(0, slash) as UniquePodName;
  const outer = podSlashOuter.slice(slash + 1);
  const resolved = world.pods.get(pod)?.volumes.find((v) => v.outerVolumeSpecName === outer);
  if (resolved !== undefined)
    return podEntry(world.mounts.get(resolved.volume), pod)?.value ?? 'unmounted';
  for (const byPod of world.mounts.values()) {
    const record = podEntry(byPod, pod);
    if (record?.context.outerVolumeSpecName === outer) return record.value;
  }
  return 'unmounted';
}

/** "a prefix of the path matches": `attached` matches `attached.deviceMounted`. */
export function pathMatches(actual: string, expected: string): boolean {
  return actual === expected || actual.startsWith(`${expected}.`);
}

export type Miss = (key: string, expected: unknown, actual: unknown) => void;

/** A recorder of misses for one expect step. */
export function missRecorder(step: number, failures: Failure[]): Miss {
  return (key, expected, actual) =>
    failures.push({
      step,
      key,
      expected,
      actual,
      message: `step ${step}: ${key}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`,
    });
}

/** `counts`: exact call counts so far for the plugins and calls named. */
export function checkCounts(
  journal: readonly FakeCallRecord[],
  expectation: Expectation,
  miss: Miss,
): void {
  const counts = countCalls(journal);
  for (const [plugin, calls] of Object.entries(expectation.counts ?? {})) {
    for (const [call, expected] of Object.entries(calls)) {
      const actual = counts[plugin]?.[call] ?? 0;
      if (actual !== expected) miss(`counts.${plugin}.${call}`, expected, actual);
    }
  }
}

/** `bindings`: each claim named is bound to that PV, or (null) not bound. */
export function checkBindings(world: BindingReader, expectation: Expectation, miss: Miss): void {
  if (expectation.bindings === undefined) return;
  const bound = new Map(claimBindings(world).map((b) => [b.claim, b.volume]));
  for (const [claim, expected] of Object.entries(expectation.bindings)) {
    const actual = bound.get(claim) ?? null;
    if (actual !== expected) miss(`bindings.${claim}`, expected, actual);
  }
}

/** `state.pvs`, the same in both modes: each PV the world knows, by name. */
export function pvStates(world: PvWorld) {
  return persistentVolumes(world).map((pv) => ({
    name: pv.name,
    phase: pv.phase,
    claim: pv.claim,
    volumeHandle: pv.volumeHandle,
    capacityBytes: pv.capacityBytes,
    reclaimPolicy: pv.reclaimPolicy,
    zone: pv.zone,
  }));
}

/** `pvs`: each PV named has that phase, is absent (null), or has the fields named. */
export function checkPvs(world: PvWorld, expectation: Expectation, miss: Miss): void {
  if (expectation.pvs === undefined) return;
  const byName = new Map(persistentVolumes(world).map((pv) => [pv.name, pv]));
  for (const [name, expected] of Object.entries(expectation.pvs)) {
    const actual = byName.get(name);
    if (expected === null || typeof expected === 'string') {
      const phase = actual?.phase ?? null;
      if (phase !== expected) miss(`pvs.${name}`, expected, phase);
      continue;
    }
    for (const [field, value] of Object.entries(expected)) {
      const fields = actual as unknown as Record<string, unknown> | undefined;
      const got = fields === undefined ? null : fields[field];
      if (got !== value) miss(`pvs.${name}.${field}`, value, got ?? null);
    }
  }
}

export function checkExpectation(
  world: World,
  journal: readonly FakeCallRecord[],
  expectation: Expectation,
  step: number,
): Failure[] {
  const failures: Failure[] = [];
  const miss = missRecorder(step, failures);
  checkCounts(journal, expectation, miss);
  for (const [volume, expected] of Object.entries(expectation.attachments ?? {})) {
    const actual = attachmentState(world, volume);
    if (!pathMatches(actual, expected)) miss(`attachments.${volume}`, expected, actual);
  }
  for (const [key, expected] of Object.entries(expectation.mounts ?? {})) {
    const actual = mountState(world, key);
    if (!pathMatches(actual, expected)) miss(`mounts.${key}`, expected, actual);
  }
  if (expectation.volumesInUse !== undefined) {
    const actual = getVolumesInUse(world);
    const expected = [...expectation.volumesInUse].sort();
    if (JSON.stringify(actual) !== JSON.stringify(expected)) miss('volumesInUse', expected, actual);
  }
  checkBindings(world, expectation, miss);
  checkPvs(world, expectation, miss);
  const ready = expectation.podReady === undefined ? [] : [expectation.podReady].flat();
  for (const pod of ready) {
    const status = podWaitStatus(world, pod as UniquePodName);
    if (!status.ready)
      miss(`podReady.${pod}`, 'all volumes mounted', { unmounted: status.unmounted });
  }
  return failures;
}
