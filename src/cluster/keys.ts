/**
 * Where everything lives in etcd, under one prefix (default `/vole/`). Each key has one
 * writer (docs/cluster.md):
 *
 *   objects/<Kind>/<namespace|_>/<name>   PVs, PVCs, ConfigMaps, Secrets, Nodes   `vole apply`
 *   pods/<node|_>/<namespace>/<name>       Pods, keyed by spec.nodeName           `vole apply`
 *   status/<node>/volumesInUse             the node's VolumesInUse                its node agent
 *   status/<node>/csiNodeIds               its CSI drivers' NodeGetInfo node_id   its node agent
 *   status/<node>/volumesAttached          what the controller reports attached   the leader (fenced)
 *   heartbeat/<node>                       bound to the agent's lease             its node agent
 *   controller/leader                      bound to the leader's lease            the campaign txn
 *   controller/log/head, log/s/<seq>       the controller's event log (segments)  the leader (fenced)
 *   controller/log/snapshot                the world at a seq                     the leader (fenced)
 */
import type { ClusterObject, Pod } from '../events/k8s.js';

export const defaultPrefix = '/vole/';

/** A name that cannot be a Kubernetes name: the namespace of cluster-scoped objects, the node of unscheduled pods. */
export const none = '_';

const namespaced = new Set(['PersistentVolumeClaim', 'ConfigMap', 'Secret']);

export function isNamespaced(kind: string): boolean {
  return namespaced.has(kind);
}

export class ClusterKeys {
  /** The controller's event log, whose one writer is the leader (fenced). */
  readonly log: LogKeys;

  constructor(readonly prefix: string = defaultPrefix) {
    this.log = new LogKeys(`${prefix}controller/log/`);
  }

  get objects(): string {
    return `${this.prefix}objects/`;
  }

  object(kind: string, name: string, namespace?: string): string {
    const ns = isNamespaced(kind) ? (namespace ?? 'default') : none;
    return `${this.objects}${kind}/${ns}/${name}`;
  }

  objectOf(object: Pick<ClusterObject, 'kind' | 'metadata'>): string {
    return this.object(object.kind, object.metadata.name, object.metadata.namespace);
  }

  get pods(): string {
    return `${this.prefix}pods/`;
  }

  podsOn(node: string): string {
    return `${this.pods}${node}/`;
  }

  pod(node: string | undefined, namespace: string, name: string): string {
    return `${this.podsOn(node ?? none)}${namespace}/${name}`;
  }

  podOf(pod: Pod): string {
    return this.pod(pod.spec.nodeName, pod.metadata.namespace ?? 'default', pod.metadata.name);
  }

  get status(): string {
    return `${this.prefix}status/`;
  }

  volumesInUse(node: string): string {
    return `${this.status}${node}/volumesInUse`;
  }

  /** The node agent's CSI drivers and their NodeGetInfo node_id (composed into the Node). */
  csiNodeIds(node: string): string {
    return `${this.status}${node}/csiNodeIds`;
  }

  volumesAttached(node: string): string {
    return `${this.status}${node}/volumesAttached`;
  }

  get heartbeats(): string {
    return `${this.prefix}heartbeat/`;
  }

  heartbeat(node: string): string {
    return `${this.heartbeats}${node}`;
  }

  get leader(): string {
    return `${this.prefix}controller/leader`;
  }

  /** The part of `key` after `base` (a listed key's relative name). */
  static rest(key: string, base: string): string {
    return key.startsWith(base) ? key.slice(base.length) : key;
  }
}

/** The keys of the controller's event log: its head, its segments and its snapshot. */
export class LogKeys {
  constructor(readonly prefix: string) {}

  get head(): string {
    return `${this.prefix}head`;
  }

  /** The log's segments: each holds the rows of consecutive seqs, keyed by its first. */
  get segments(): string {
    return `${this.prefix}s/`;
  }

  segment(firstSeq: number): string {
    return `${this.segments}${String(firstSeq).padStart(16, '0')}`;
  }

  /** Part `part` of `parts` of one row larger than a segment (sorts right after segment(seq)). */
  segmentPart(seq: number, part: number, parts: number): string {
    const of = `${String(part).padStart(4, '0')}/${String(parts).padStart(4, '0')}`;
    return `${this.segment(seq)}+${of}`;
  }

  get snapshot(): string {
    return `${this.prefix}snapshot`;
  }
}
