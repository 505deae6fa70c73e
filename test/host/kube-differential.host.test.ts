/**
 * The real kubelet as the reference: one API server, a kubemark hollow node (the kubelet's
 * own volume manager and volume plugins over a fake runtime and a fake mounter, so its
 * ConfigMap, Secret, downwardAPI and projected files are really written under its root
 * directory) and a vole node (`vole run --kubeconfig`). The same pod goes to each (same
 * name and spec, in namespaces `kubelet` and `vole`), and what each node wrote for every
 * volume is compared entry by entry: paths, the atomic writer's symlink layout (`..data`,
 * the timestamped directory), modes, owner and group, contents. The table (volume ×
 * same/differs) is printed; every difference must be one docs/kubernetes.md lists with
 * its reason (`documented` below), and anything else fails the test.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import { type AgentProcess, startVole } from '../support/agent-process.js';
import { hostSandbox } from '../support/host.js';
import { kubeTestSkipReason, useKubeCluster } from '../support/kube.js';
import { treeDiff, treeLines, volumeTree } from '../support/volume-tree.js';

const hollow = 'node-k1';
const voleNode = 'node-v1';
const skip = kubeTestSkipReason();

/** The objects and the pod of one namespace, the pod on `node`. */
const manifests = (namespace: string, node: string) => `apiVersion: v1
kind: Namespace
metadata: {name: ${namespace}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: ${namespace}}
data: {a.txt: alpha, b.txt: beta}
---
apiVersion: v1
kind: Secret
metadata: {name: credentials, namespace: ${namespace}}
stringData: {user: admin, password: hunter2}
---
apiVersion: v1
kind: Pod
metadata: {name: probe, namespace: ${namespace}, labels: {app: probe, tier: test}}
spec:
  nodeName: ${node}
  securityContext: {fsGroup: 2000}
  containers:
    - name: app
      image: busybox
      resources: {limits: {cpu: 500m, memory: 64Mi}}
      volumeMounts:
        - {name: scratch, mountPath: /scratch}
        - {name: settings, mountPath: /settings}
        - {name: settings-items, mountPath: /settings-items}
        - {name: credentials, mountPath: /credentials}
        - {name: podinfo, mountPath: /podinfo}
        - {name: all-in-one, mountPath: /all-in-one}
  volumes:
    - {name: scratch, emptyDir: {}}
    - {name: settings, configMap: {name: settings}}
    - name: settings-items
      configMap:
        name: settings
        defaultMode: 0640
        items: [{key: a.txt, path: sub/a.txt, mode: 0600}]
    - {name: credentials, secret: {secretName: credentials}}
    - name: podinfo
      downwardAPI:
        items:
          - {path: labels, fieldRef: {fieldPath: metadata.labels}}
          - {path: name, fieldRef: {fieldPath: metadata.name}}
          - {path: cpu_limit, resourceFieldRef: {containerName: app, resource: limits.cpu, divisor: 1m}}
    - name: all-in-one
      projected:
        sources:
          - configMap: {name: settings, items: [{key: b.txt, path: b.txt}]}
          - secret: {name: credentials, items: [{key: user, path: user}]}
          - downwardAPI: {items: [{path: name, fieldRef: {fieldPath: metadata.name}}]}
`;

/** The volume directories of the pod, by name and the plugin directory they sit in. */
const volumes: readonly [string, string][] = [
  ['scratch', 'kubernetes.io~empty-dir'],
  ['settings', 'kubernetes.io~configmap'],
  ['settings-items', 'kubernetes.io~configmap'],
  ['credentials', 'kubernetes.io~secret'],
  ['podinfo', 'kubernetes.io~downward-api'],
  ['all-in-one', 'kubernetes.io~projected'],
];

/**
 * Differences kept on purpose, each explained in docs/kubernetes.md ("Beside the real
 * kubelet"): volume → the lines only the kubelet's tree has, and only vole's.
 */
const tmpfsRoot: [string[], string[]] = [['dir . 2777 0:2000'], ['dir . 3777 0:2000']];
const documented: Record<string, [string[], string[]]> = {
  // A memory-backed volume is a tmpfs, whose root is 1777; fsGroup adds setgid: 3777, as a
  // real kubelet's. The hollow kubelet's fake mounter mounts no tmpfs, so its root is the
  // directory's own 0777 (+ setgid).
  credentials: tmpfsRoot,
  podinfo: tmpfsRoot,
  'all-in-one': tmpfsRoot,
};

describe('vole beside the real kubelet (kubemark hollow node)', { skip, timeout: 600_000 }, () => {
  const cluster = useKubeCluster(['kube-controller-manager', 'kubemark']);
  const { base, root } = skip === false ? hostSandbox('kubediff') : { base: '', root: '' };
  const { ok, json, wait } = cluster;
  let agent: AgentProcess | undefined;

  before(() =>
    cluster.start(base, {
      controllers: '*,-attachdetach,-nodelifecycle',
      hollowNodes: [hollow],
    }),
  );

  test('the same pod on each node: what each wrote for its volumes', async () => {
    const agentKubeconfig = cluster.agentKubeconfig(voleNode);
    agent = cluster.started(
      startVole(['run', '--kubeconfig', agentKubeconfig, '--node', voleNode, '--root', root]),
      'agent',
    );
    for (const [namespace, node] of [
      ['kubelet', hollow],
      ['vole', voleNode],
    ] as const) {
      ok(['apply', '-f', '-'], manifests(namespace, node).split('---\n')[0]!);
      await cluster.defaultServiceAccount(namespace);
      ok(['apply', '-f', '-'], manifests(namespace, node));
    }
    const uid = (namespace: string) =>
      json<{ metadata: { uid: string } }>(['-n', namespace, 'get', 'pod', 'probe']).metadata.uid;
    await wait('the hollow kubelet to run its pod', () =>
      json<{ status: { phase: string } }>(['-n', 'kubelet', 'get', 'pod', 'probe']).status.phase ===
      'Running'
        ? true
        : undefined,
    );
    await agent.line(/pod vole\/probe: mounted \[/, 120_000);

    const kubeletPod = join(cluster.hollowRoot(hollow), 'pods', uid('kubelet'), 'volumes');
    const volePod = join(root, 'pods', uid('vole'), 'volumes');
    const rows: string[] = [];
    const unexpected: string[] = [];
    for (const [name, plugin] of volumes) {
      const kubelet = treeLines(volumeTree(join(kubeletPod, plugin, name)));
      const vole = treeLines(volumeTree(join(volePod, plugin, name)));
      const [onlyKubelet, onlyVole] = treeDiff(kubelet, vole);
      const expected = documented[name] ?? [[], []];
      const same = onlyKubelet.length === 0 && onlyVole.length === 0;
      const known = JSON.stringify([onlyKubelet, onlyVole]) === JSON.stringify(expected) && !same;
      rows.push(
        `${name.padEnd(16)} ${plugin.padEnd(26)} ${same ? 'same' : known ? 'differs (documented)' : 'DIFFERS'}`,
      );
      if (!same && !known)
        unexpected.push(
          `${name}:\n  only the kubelet:\n    ${onlyKubelet.join('\n    ')}\n  only vole:\n    ${onlyVole.join('\n    ')}`,
        );
    }
    console.log(['volume           plugin                     result', ...rows].join('\n'));
    assert.deepEqual(unexpected, [], unexpected.join('\n'));
  });
});
