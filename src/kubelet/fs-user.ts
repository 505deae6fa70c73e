/**
 * The owner the kubelet gives a pod's projected service-account token files (FsUserFrom,
 * pkg/volume/util/util.go): the one user every container runs as (its own runAsUser, else
 * the pod's), or none when a container names no user or two containers differ.
 */
import type { Pod } from '../events/k8s.js';

export function fsUserOf(pod: Pod): number | null {
  const { spec } = pod;
  const all = [
    ...(spec.initContainers ?? []),
    ...(spec.containers ?? []),
    ...(spec.ephemeralContainers ?? []),
  ];
  let user: number | null = null;
  for (const c of all) {
    const runAsUser = c.securityContext?.runAsUser ?? spec.securityContext?.runAsUser;
    if (runAsUser === undefined || (user !== null && user !== runAsUser)) return null;
    user = runAsUser;
  }
  return user;
}
