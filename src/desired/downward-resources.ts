/**
 * downwardAPI `resourceFieldRef` files (pure): a container's declared limits and requests,
 * with the node's allocatable standing in for a limit it does not set, divided by the
 * divisor and rounded up, as the kubelet writes them.
 */
import { assert } from '../assert.js';
import type { Pod } from '../events/k8s.js';
import { quantityMillis, quantityValue } from '../events/quantity.js';
import type { NodeAllocatable } from '../events/types.js';

/** The resources a volume file may name (validation's validVolumeDownwardAPIResources). */
export const downwardResources = [
  'limits.cpu',
  'limits.memory',
  'limits.ephemeral-storage',
  'requests.cpu',
  'requests.memory',
  'requests.ephemeral-storage',
] as const;

type Container = NonNullable<Pod['spec']['containers']>[number];
type ResourceName = 'cpu' | 'memory' | 'ephemeral-storage';

export interface ResourceFieldRef {
  readonly resource: string;
  readonly containerName?: string | undefined;
  readonly divisor?: string | number | undefined;
}

/** findContainerInPod: the app containers first, then the init containers. */
function findContainer(pod: Pod, name: string): Container | undefined {
  const all = [...(pod.spec.containers ?? []), ...(pod.spec.initContainers ?? [])];
  return all.find((c) => c.name === name);
}

/** A quantity in the unit the kubelet divides in: millicores for cpu, else whole units. */
function amount(resource: ResourceName, q: string | number | undefined): number | undefined {
  return resource === 'cpu' ? quantityMillis(q) : quantityValue(q);
}

function allocatableOf(allocatable: NodeAllocatable, resource: ResourceName): number {
  if (resource === 'cpu') return allocatable.cpuMillis;
  return resource === 'memory' ? allocatable.memoryBytes : allocatable.ephemeralStorageBytes;
}

/**
 * The declared amount, in millicores or bytes. A limit not set (or zero) is the node's
 * allocatable (MergeContainerResourceLimits); a request not set is the declared limit, as
 * the API server's defaulting (SetDefaults_Pod) copies limits into missing requests, else 0.
 */
function declared(
  container: Container,
  kind: 'limits' | 'requests',
  resource: ResourceName,
  allocatable: NodeAllocatable | undefined,
): number | string {
  const limit = amount(resource, container.resources?.limits?.[resource]);
  if (kind === 'requests') {
    const request = amount(resource, container.resources?.requests?.[resource]);
    return request ?? limit ?? 0;
  }
  if (limit !== undefined && limit > 0) return limit;
  if (allocatable === undefined)
    return (
      `no ${resource} limit is set and the node's allocatable is not known ` +
      '(start the agent with --allocatable)'
    );
  return allocatableOf(allocatable, resource);
}

/**
 * ExtractResourceValueByContainerNameAndNodeAllocatable then ExtractContainerResourceValue
 * (pkg/api/v1/resource/helpers.go): the file's content, or an error that says what to fix.
 * cpu is ceil(millicores / divisor in millicores); memory and ephemeral-storage are
 * ceil(bytes / divisor); an absent or zero divisor is 1.
 */
export function resourceFieldValue(
  pod: Pod,
  ref: ResourceFieldRef,
  allocatable: NodeAllocatable | undefined,
): { ok: true; content: string } | { ok: false; error: string } {
  const match = /^(limits|requests)\.(cpu|memory|ephemeral-storage)$/.exec(ref.resource);
  if (match === null) return { ok: false, error: `resource "${ref.resource}" is not supported` };
  const kind = match[1] as 'limits' | 'requests';
  const resource = match[2] as ResourceName;
  if (ref.containerName === undefined || ref.containerName === '')
    return { ok: false, error: 'containerName is required in volumes' };
  const container = findContainer(pod, ref.containerName);
  if (container === undefined)
    return { ok: false, error: `container "${ref.containerName}" not found in the pod` };
  const value = declared(container, kind, resource, allocatable);
  if (typeof value === 'string') return { ok: false, error: value };
  const divisor = ref.divisor === undefined ? 0 : amount(resource, ref.divisor);
  if (divisor === undefined)
    return { ok: false, error: `divisor "${ref.divisor}" is not a quantity` };
  const by = BigInt(divisor === 0 ? amount(resource, 1)! : divisor);
  assert(by > 0n, `resourceFieldRef ${ref.resource}: divisor must be positive`);
  // Integer ceiling: a float quotient may round a fraction just above a whole number down.
  return { ok: true, content: String((BigInt(value) + by - 1n) / by) };
}

/**
 * The pod's memory limit as the kubelet's ResourceConfigForPod sets its cgroup: PodLimits
 * (pkg/kubelet/cm/helpers_linux.go, component-helpers resource/helpers.go) — the app
 * containers' and sidecars' sum, or an init container's need if larger (itself plus the
 * sidecars started before it), a pod-level limit instead when set, plus the overhead — and
 * only when every container declares a memory limit or the pod itself does; else none.
 */
export function podMemoryLimitBytes(pod: Pod): number | undefined {
  const limitOf = (c: Container) => quantityValue(c.resources?.limits?.memory) ?? 0;
  const all = [...(pod.spec.initContainers ?? []), ...(pod.spec.containers ?? [])];
  const podLevel = quantityValue(pod.spec.resources?.limits?.memory) ?? 0;
  if (podLevel === 0 && (all.length === 0 || all.some((c) => limitOf(c) === 0))) return undefined;
  let sidecars = 0;
  let initNeed = 0;
  for (const c of pod.spec.initContainers ?? []) {
    if (c.restartPolicy === 'Always') sidecars += limitOf(c);
    else initNeed = Math.max(initNeed, sidecars + limitOf(c));
  }
  const apps = (pod.spec.containers ?? []).reduce((sum, c) => sum + limitOf(c), 0);
  const limit = podLevel > 0 ? podLevel : Math.max(apps + sidecars, initNeed);
  return limit + (quantityValue(pod.spec.overhead?.memory) ?? 0);
}

/**
 * The size of a memory-backed emptyDir's tmpfs (calculateEmptyDirMemorySize,
 * pkg/volume/emptydir/empty_dir.go): the node's allocatable memory, lowered to the pod's
 * memory limit, then to the volume's sizeLimit, each only when positive and not larger.
 * undefined (the kernel's default, half of RAM) only when none of the three is known.
 */
export function emptyDirMemoryBytes(
  pod: Pod,
  sizeLimitBytes: number,
  allocatable: NodeAllocatable | undefined,
): number | undefined {
  let size = allocatable?.memoryBytes;
  for (const bound of [podMemoryLimitBytes(pod), sizeLimitBytes]) {
    if (bound !== undefined && bound > 0 && (size === undefined || bound <= size)) size = bound;
  }
  return size;
}
