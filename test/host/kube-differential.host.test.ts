/**
 * The real kubelet as the reference: one API server, a kubemark hollow node (the kubelet's
 * own volume manager and volume plugins over a fake runtime and a fake mounter, so its
 * ConfigMap, Secret, downwardAPI and projected files are really written under its root
 * directory) and a vole node (`vole run --kubeconfig`). The same pods go to each (same
 * names and specs, in namespaces `kubelet` and `vole`), and each check compares what the
 * two nodes did: the files each wrote for every volume (paths, the atomic writer's symlink
 * layout, modes, owner and group, contents), the pod's own directories, a downwardAPI file
 * of the pod's annotations, the FailedMount messages of missing objects, a ConfigMap that
 * appears later, an update reaching the files, and what each wrote on its Node and CSINode.
 *
 * The hollow kubelet records its Events with a fake recorder (pkg/kubemark/hollow_kubelet.go),
 * so its FailedMount messages are read from its log: the operation's detailed error, which
 * generateVolumeMsg (pkg/volume/util/operationexecutor/operation_executor.go) makes from the
 * Event's message by adding `(UniqueName: …) pod "…" (UID: …)` after the volume's name.
 *
 * The table (volume type × check: same, fixed in vole, differs with its reason) is printed;
 * every difference must be one docs/kubernetes.md lists with its reason (`documented`
 * below), and anything else fails the test.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import { type AgentProcess, startVole } from '../support/agent-process.js';
import { hostSandbox } from '../support/host.js';
import { type KubeCluster, kubeTestSkipReason, useKubeCluster } from '../support/kube.js';
import { podSkeleton, treeDiff, treeLines, volumeTree } from '../support/volume-tree.js';

const hollow = 'node-k1';
const voleNode = 'node-v1';
const skip = kubeTestSkipReason();

/** The objects and pods of one namespace, the pods on `node`. */
const manifests = (namespace: string, node: string) => `apiVersion: v1
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
metadata:
  name: probe
  namespace: ${namespace}
  labels: {app: probe, tier: test}
  annotations: {team: storage}
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
        - {name: optional, mountPath: /optional}
        - {name: optional-secret, mountPath: /optional-secret}
        - {name: annotations, mountPath: /annotations}
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
    - {name: optional, configMap: {name: absent, optional: true}}
    - {name: optional-secret, secret: {secretName: absent, optional: true}}
    - name: annotations
      downwardAPI: {items: [{path: annotations, fieldRef: {fieldPath: metadata.annotations}}]}
---
apiVersion: v1
kind: Pod
metadata: {name: missing, namespace: ${namespace}}
spec:
  nodeName: ${node}
  containers:
    - name: app
      image: busybox
      volumeMounts:
        - {name: x, mountPath: /x}
        - {name: both, mountPath: /both}
        - {name: badkey, mountPath: /badkey}
  volumes:
    - {name: x, secret: {secretName: x}}
    - {name: both, projected: {sources: [{configMap: {name: a}}, {secret: {name: b}}]}}
    - {name: badkey, configMap: {name: settings, items: [{key: nokey, path: k}]}}
---
apiVersion: v1
kind: Pod
metadata: {name: late, namespace: ${namespace}}
spec:
  nodeName: ${node}
  containers:
    - name: app
      image: busybox
      volumeMounts: [{name: late, mountPath: /late}]
  volumes:
    - {name: late, configMap: {name: late}}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-${namespace}}
spec:
  capacity: {storage: 64Mi}
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  claimRef: {namespace: ${namespace}, name: data}
  csi:
    driver: disk.csi.vole.dev
    volumeHandle: disk-${namespace}
    fsType: ext4
    volumeAttributes: {size: 64Mi}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: ${namespace}}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  volumeName: pv-${namespace}
  resources: {requests: {storage: 64Mi}}
---
apiVersion: v1
kind: Pod
metadata: {name: disk, namespace: ${namespace}}
spec:
  nodeName: ${node}
  securityContext: {fsGroup: 2000}
  containers:
    - name: app
      image: busybox
      volumeMounts: [{name: data, mountPath: /data}]
  volumes:
    - {name: data, persistentVolumeClaim: {claimName: data}}
`;

/**
 * The driver both nodes call: attachRequired false, so neither attaches (the hollow kubelet
 * would attach itself, controller attach being off there, and vole here likewise).
 */
const csiDriver = `apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {name: disk.csi.vole.dev}
spec: {attachRequired: false}
`;

/** The CSI calls that act on a volume; the others only ask the driver what it is and can. */
const volumeCalls = new Set([
  'NodeStageVolume',
  'NodePublishVolume',
  'NodeUnpublishVolume',
  'NodeUnstageVolume',
]);

/**
 * One side's requests to its driver (`--request-log`), with what names the side made plain:
 * its root, the pod's UID, the volume handle, the PV and the handle's SHA-256 in paths.
 */
function csiRequests(
  file: string,
  side: { root: string; uid: string; handle: string; pv: string },
): { rpc: string; request: Record<string, unknown> }[] {
  const digest = createHash('sha256').update(side.handle).digest('hex');
  const plain = (text: string) =>
    text
      .replaceAll(side.root, '<root>')
      .replaceAll(side.uid, '<uid>')
      .replaceAll(digest, 'sha256(<handle>)')
      .replaceAll(side.handle, '<handle>')
      .replaceAll(`/${side.pv}/`, '/<pv>/');
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(plain(line)) as { rpc: string; request: Record<string, unknown> });
}

/** A request as sorted `field=value` lines. */
const requestLines = (request: Record<string, unknown> | undefined) =>
  Object.entries(request ?? {})
    .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
    .sort();

/** One row of the table: what each node showed for one check. */
interface Row {
  readonly type: string;
  readonly check: string;
  readonly kubelet: readonly string[];
  readonly vole: readonly string[];
}

/**
 * Differences kept on purpose, each explained in docs/kubernetes.md ("Beside the real
 * kubelet"), by `type check`: the lines only the kubelet's side has, and only vole's.
 */
const tmpfsRoot: [string[], string[]] = [['dir . 2777 0:2000'], ['dir . 3777 0:2000']];
const documented: Record<string, [string[], string[]]> = {
  // A memory-backed volume is a tmpfs, whose root is 1777; fsGroup adds setgid: 3777, as a
  // real kubelet's. The hollow kubelet's fake mounter mounts no tmpfs, so its root is the
  // directory's own 0777 (+ setgid).
  'Secret files': tmpfsRoot,
  'downwardAPI files': tmpfsRoot,
  'projected files': tmpfsRoot,
  'Secret optional, absent': tmpfsRoot,
  'downwardAPI annotations file': tmpfsRoot,
  'projected updated: files': tmpfsRoot,
  // vole's message names the item's field and the object's keys, so the fix is plain.
  'ConfigMap FailedMount, item key absent': [
    [
      'MountVolume.SetUp failed for volume "badkey" : configmap references non-existent config key: nokey',
    ],
    [
      'MountVolume.SetUp failed for volume "badkey" : spec.volumes[2].configMap.items[0].key: ' +
        'configmap "vole/settings" has no key "nokey" (its keys: a.txt, b.txt); fix the key in ' +
        'the pod, or add it to the object',
    ],
  ],
  // The kubelet asks the driver's node capabilities before each operation; vole asks once,
  // at registration, also its plugin info and controller capabilities (into the log).
  'CSI static PV probing calls': [
    [],
    ['ControllerGetCapabilities', 'GetPluginCapabilities', 'GetPluginInfo'],
  ],
  // The kubelet names the publish directory after the PV (csi_mounter.go's specVolumeID),
  // vole after the pod's volume; moving it needs live mounts moved with it.
  'CSI static PV NodePublishVolume': [
    ['target_path="<root>/pods/<uid>/volumes/kubernetes.io~csi/<pv>/mount"'],
    ['target_path="<root>/pods/<uid>/volumes/kubernetes.io~csi/data/mount"'],
  ],
  'CSI static PV NodeUnpublishVolume': [
    ['target_path="<root>/pods/<uid>/volumes/kubernetes.io~csi/<pv>/mount"'],
    ['target_path="<root>/pods/<uid>/volumes/kubernetes.io~csi/data/mount"'],
  ],
  // vole writes no vol_data.json (its log holds what the kubelet keeps there) and does not
  // apply fsGroup to a CSI volume yet (the kubelet's csi_mounter does, for fsGroupPolicy
  // File, or ReadWriteOnceWithFSType with an fsType and ReadWriteOnce).
  'CSI static PV volume directory and fsGroup': [
    ['vol_data.json', 'dir . 2775 0:2000', 'dir lost+found 2770 0:2000'],
    ['dir . 0755 0:0', 'dir lost+found 0700 0:0'],
  ],
  // vole translates no in-tree plugin to CSI, so it claims none as migrated.
  'node CSINode annotations': [
    [
      'storage.alpha.kubernetes.io/migrated-plugins=kubernetes.io/aws-ebs,kubernetes.io/azure-disk,' +
        'kubernetes.io/azure-file,kubernetes.io/cinder,kubernetes.io/gce-pd,' +
        'kubernetes.io/portworx-volume,kubernetes.io/vsphere-volume',
    ],
    [],
  ],
};

/** Checks that differed on the first runs and that vole now does as the kubelet does. */
const fixedInVole = new Set([
  'pod directory',
  'downwardAPI annotations file',
  'Secret FailedMount, object absent',
  'projected FailedMount, two objects absent',
  'ConfigMap FailedMount, object absent',
]);

const volumes: readonly [string, string, string][] = [
  ['emptyDir', 'scratch', 'kubernetes.io~empty-dir'],
  ['ConfigMap', 'settings', 'kubernetes.io~configmap'],
  ['ConfigMap items', 'settings-items', 'kubernetes.io~configmap'],
  ['Secret', 'credentials', 'kubernetes.io~secret'],
  ['downwardAPI', 'podinfo', 'kubernetes.io~downward-api'],
  ['projected', 'all-in-one', 'kubernetes.io~projected'],
];

/** `..<timestamp>` is already plain; the time the kubelet first saw the pod is too. */
const plainSeen = (line: string) =>
  line.replace(
    /kubernetes\.io\/config\.seen=\\"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z\\"/,
    'kubernetes.io/config.seen=\\"<time>\\"',
  );

/** What a FailedMount Event of the kubelet says, from its log's detailed error. */
function kubeletFailedMounts(log: string, pod: string): string[] {
  const detailed =
    /Error: (MountVolume\.SetUp failed for volume "[^"]+") \(UniqueName: "[^"]+"\) pod "([^"]+)" \(UID: "[^"]+"\) (: .*)$/gm;
  const out = new Set<string>();
  for (const m of log.matchAll(detailed)) if (m[2] === pod) out.add(`${m[1]} ${m[3]}`);
  return [...out].sort();
}

function voleFailedMounts(cluster: KubeCluster, pod: string): string[] {
  const events = cluster.json<{
    items: { involvedObject: { name: string }; reason: string; message: string }[];
  }>(['-n', 'vole', 'get', 'events']).items;
  const out = events
    .filter((e) => e.involvedObject.name === pod && e.reason === 'FailedMount')
    .map((e) => e.message);
  return [...new Set(out)].sort();
}

/** The Node's and CSINode's fields the volume managers write, as `key=value` lines. */
function nodeWrites(cluster: KubeCluster, node: string): Record<string, string[]> {
  const n = cluster.json<{
    metadata: { annotations?: Record<string, string> };
    status: { volumesInUse?: string[]; volumesAttached?: { name: string }[] };
  }>(['get', 'node', node]);
  const csiNode = cluster.json<{
    metadata: { annotations?: Record<string, string>; ownerReferences?: { kind: string }[] };
    spec: { drivers: unknown };
  }>(['get', 'csinode', node]);
  const attachAnnotation = 'volumes.kubernetes.io/controller-managed-attach-detach';
  return {
    'Node status.volumesInUse': (n.status.volumesInUse ?? []).map((v) => `in use ${v}`),
    'Node status.volumesAttached': (n.status.volumesAttached ?? []).map(
      (v) => `attached ${v.name}`,
    ),
    'Node attach annotation': [`${attachAnnotation}=${n.metadata.annotations?.[attachAnnotation]}`],
    // Each node's driver has its own node ID.
    'CSINode drivers': [
      JSON.stringify(csiNode.spec.drivers ?? null).replace(/"nodeID":"[^"]*"/g, '"nodeID":"<id>"'),
    ],
    'CSINode owner': (csiNode.metadata.ownerReferences ?? []).map((o) => `owned by a ${o.kind}`),
    'CSINode annotations': Object.entries(csiNode.metadata.annotations ?? {}).map(
      ([k, v]) => `${k}=${v}`,
    ),
  };
}

/** The table's lines; the rows neither the same nor documented, with their lines. */
function judge(rows: readonly Row[]): { table: string[]; unexpected: string[] } {
  const table = [`${'volume type'.padEnd(16)} ${'check'.padEnd(42)} result`];
  const unexpected: string[] = [];
  for (const row of rows) {
    const key = `${row.type} ${row.check}`;
    const [onlyKubelet, onlyVole] = treeDiff(row.kubelet, row.vole);
    const same = onlyKubelet.length === 0 && onlyVole.length === 0;
    const known =
      !same && JSON.stringify([onlyKubelet, onlyVole]) === JSON.stringify(documented[key]);
    const result = same
      ? fixedInVole.has(key) || fixedInVole.has(row.check)
        ? 'same (fixed in vole)'
        : 'same'
      : known
        ? 'differs (documented)'
        : 'DIFFERS';
    table.push(`${row.type.padEnd(16)} ${row.check.padEnd(42)} ${result}`);
    if (!same && !known)
      unexpected.push(
        `${key}:\n  only the kubelet:\n    ${onlyKubelet.join('\n    ')}\n  only vole:\n    ${onlyVole.join('\n    ')}`,
      );
  }
  return { table, unexpected };
}

describe('vole beside the real kubelet (kubemark hollow node)', { skip, timeout: 600_000 }, () => {
  const cluster = useKubeCluster(['kube-controller-manager', 'kubemark']);
  const { base, root } = skip === false ? hostSandbox('kubediff') : { base: '', root: '' };
  const { ok, json, wait } = cluster;
  let agent: AgentProcess | undefined;
  const rows: Row[] = [];
  const uid = (namespace: string, pod: string) =>
    json<{ metadata: { uid: string } }>(['-n', namespace, 'get', 'pod', pod]).metadata.uid;
  const podDir = (side: 'kubelet' | 'vole', pod: string) =>
    join(side === 'kubelet' ? cluster.hollowRoot(hollow) : root, 'pods', uid(side, pod));
  const hollowLog = () => readFileSync(join(cluster.dir(), `hollow-${hollow}.log`), 'utf8');
  const running = (pod: string) => () =>
    json<{ status: { phase: string } }>(['-n', 'kubelet', 'get', 'pod', pod]).status.phase ===
    'Running'
      ? true
      : undefined;
  /** A row per volume: what each node wrote under the volume's directory. */
  const volumeRow = (type: string, check: string, pod: string, plugin: string, name: string) => {
    const tree = (side: 'kubelet' | 'vole') =>
      treeLines(volumeTree(join(podDir(side, pod), 'volumes', plugin, name))).map(plainSeen);
    rows.push({ type, check, kubelet: tree('kubelet'), vole: tree('vole') });
  };

  /** `vole csi-driver` for one side, registered in its root's plugins_registry. */
  const startDriver = (side: 'kubelet' | 'vole', sideRoot: string, nodeId: string) => {
    const dir = join(base, `csi-${side}`);
    mkdirSync(dir, { recursive: true });
    cluster.started(
      startVole([
        'csi-driver',
        ...['--endpoint', `unix://${join(dir, 'disk.sock')}`, '--node-id', nodeId],
        ...['--state-dir', join(dir, 'state'), '--node-attach'],
        ...['--registration-dir', join(sideRoot, 'plugins_registry')],
        ...['--request-log', join(dir, 'requests.jsonl')],
      ]),
    );
  };
  const requestsOf = (side: 'kubelet' | 'vole', podUid: string) =>
    csiRequests(join(base, `csi-${side}`, 'requests.jsonl'), {
      root: side === 'kubelet' ? cluster.hollowRoot(hollow) : root,
      uid: podUid,
      handle: `disk-${side}`,
      pv: `pv-${side}`,
    });

  before(async () => {
    cluster.start(base, { controllers: '*,-attachdetach,-nodelifecycle', hollowNodes: [hollow] });
    ok(['create', '-f', '-'], csiDriver);
    // Each node its own driver process (its own node ID and disks), as on two machines.
    startDriver('kubelet', cluster.hollowRoot(hollow), 'k1-disk');
    startDriver('vole', root, 'v1-disk');
    // The hollow kubelet runs with EnableControllerAttachDetach off (hollow_kubelet.go):
    // the same here, so the Node's attach annotation compares.
    const args = ['run', '--kubeconfig', cluster.agentKubeconfig(voleNode), '--node', voleNode];
    agent = cluster.started(
      startVole([...args, '--root', root, '--no-controller-attach-detach']),
      'agent',
    );
    await agent.line(/CSI driver disk\.csi\.vole\.dev registered/);
    for (const [namespace, node] of [
      ['kubelet', hollow],
      ['vole', voleNode],
    ] as const) {
      ok(['create', 'namespace', namespace]);
      await cluster.defaultServiceAccount(namespace);
      // create, not apply: apply's last-applied annotation would hold the node's name.
      ok(['create', '-f', '-'], manifests(namespace, node));
    }
    await wait('the hollow kubelet to run its pod', running('probe'));
    await agent.line(/pod vole\/probe: mounted \[/, 120_000);
  });

  test('the same pod on each node: what each wrote for its volumes and the pod', () => {
    for (const [type, name, plugin] of volumes) volumeRow(type, 'files', 'probe', plugin, name);
    volumeRow('ConfigMap', 'optional, absent', 'probe', 'kubernetes.io~configmap', 'optional');
    volumeRow('Secret', 'optional, absent', 'probe', 'kubernetes.io~secret', 'optional-secret');
    volumeRow(
      'downwardAPI',
      'annotations file',
      'probe',
      'kubernetes.io~downward-api',
      'annotations',
    );
    const skeleton = (side: 'kubelet' | 'vole') => treeLines(podSkeleton(podDir(side, 'probe')));
    rows.push({
      type: 'pod',
      check: 'pod directory',
      kubelet: skeleton('kubelet'),
      vole: skeleton('vole'),
    });
  });

  test('FailedMount messages of missing objects, word for word', async () => {
    const both = await wait('each node to fail the three volumes of pod missing', () => {
      const kubelet = kubeletFailedMounts(hollowLog(), 'missing');
      const vole = voleFailedMounts(cluster, 'missing');
      return kubelet.length >= 3 && vole.length >= 3 ? { kubelet, vole } : undefined;
    });
    const of = (list: string[], volume: string) => list.filter((m) => m.includes(`"${volume}" :`));
    for (const [type, check, volume] of [
      ['Secret', 'FailedMount, object absent', 'x'],
      ['projected', 'FailedMount, two objects absent', 'both'],
      ['ConfigMap', 'FailedMount, item key absent', 'badkey'],
    ] as const)
      rows.push({ type, check, kubelet: of(both.kubelet, volume), vole: of(both.vole, volume) });
  });

  test('a ConfigMap that appears later: the FailedMount, then the files', async () => {
    const failed = await wait('each node to fail the volume of pod late', () => {
      const kubelet = kubeletFailedMounts(hollowLog(), 'late');
      const vole = voleFailedMounts(cluster, 'late');
      return kubelet.length > 0 && vole.length > 0 ? { kubelet, vole } : undefined;
    });
    rows.push({ type: 'ConfigMap', check: 'FailedMount, object absent', ...failed });
    for (const namespace of ['kubelet', 'vole'])
      ok(['-n', namespace, 'create', 'configmap', 'late', '--from-literal=key=value']);
    await wait('the hollow kubelet to run pod late', running('late'));
    await agent!.line(/pod vole\/late: mounted \[/, 60_000);
    volumeRow('ConfigMap', 'created later: files', 'late', 'kubernetes.io~configmap', 'late');
  });

  test('an update of the ConfigMap reaches the files on each node', async () => {
    for (const namespace of ['kubelet', 'vole'])
      ok([
        '-n',
        namespace,
        'patch',
        'configmap',
        'settings',
        '-p',
        '{"data":{"a.txt":"ALPHA","b.txt":"BETA"}}',
      ]);
    const updated = (side: 'kubelet' | 'vole') => {
      const volumesDir = join(podDir(side, 'probe'), 'volumes');
      const read = (path: string) => readFileSync(join(volumesDir, path), 'utf8');
      return read('kubernetes.io~configmap/settings/a.txt') === 'ALPHA' &&
        read('kubernetes.io~configmap/settings-items/sub/a.txt') === 'ALPHA' &&
        read('kubernetes.io~projected/all-in-one/b.txt') === 'BETA'
        ? true
        : undefined;
    };
    // The kubelet rewrites them on its pod's next sync (every 10 s on a hollow node).
    await wait('the update on the hollow node', () => updated('kubelet'), 60_000);
    await wait('the update on the vole node', () => updated('vole'), 60_000);
    volumeRow('ConfigMap', 'updated: files', 'probe', 'kubernetes.io~configmap', 'settings');
    volumeRow(
      'ConfigMap items',
      'updated: files',
      'probe',
      'kubernetes.io~configmap',
      'settings-items',
    );
    volumeRow('projected', 'updated: files', 'probe', 'kubernetes.io~projected', 'all-in-one');
  });

  test('a static CSI PV: the calls to the driver, the volume, the Node and CSINode', async () => {
    await wait('the hollow kubelet to run pod disk', running('disk'));
    await agent!.line(/pod vole\/disk: mounted \[/, 60_000);
    const uids = { kubelet: uid('kubelet', 'disk'), vole: uid('vole', 'disk') };
    const mountRoot = (side: 'kubelet' | 'vole', name: string) => {
      const dir = join(podDir(side, 'disk'), 'volumes/kubernetes.io~csi', name);
      return [
        ...readdirSync(dir).sort(),
        ...treeLines(volumeTree(join(dir, 'mount'))).filter((l) => !l.includes('lost+found/')),
      ];
    };
    rows.push({
      type: 'CSI static PV',
      check: 'volume directory and fsGroup',
      kubelet: mountRoot('kubelet', 'pv-kubelet'),
      vole: mountRoot(
        'vole',
        readdirSync(join(podDir('vole', 'disk'), 'volumes/kubernetes.io~csi'))[0]!,
      ),
    });
    const kubelet = nodeWrites(cluster, hollow);
    const vole = nodeWrites(cluster, voleNode);
    for (const check of Object.keys(kubelet))
      rows.push({ type: 'node', check, kubelet: kubelet[check]!, vole: vole[check]! });

    for (const namespace of ['kubelet', 'vole'])
      ok(['-n', namespace, 'delete', 'pod', 'disk', '--wait=false']);
    const unstaged = (side: 'kubelet' | 'vole') =>
      requestsOf(side, uids[side]).some((r) => r.rpc === 'NodeUnstageVolume') ? true : undefined;
    await wait('the hollow kubelet to unstage the volume', () => unstaged('kubelet'));
    await wait('vole to unstage the volume', () => unstaged('vole'));
    const calls = {
      kubelet: requestsOf('kubelet', uids.kubelet),
      vole: requestsOf('vole', uids.vole),
    };
    // The kubelet's volume stats collector calls NodeGetVolumeStats on its own period,
    // whether it falls in this window is timing; vole collects no volume stats.
    const names = (side: 'kubelet' | 'vole', acting: boolean) =>
      calls[side]
        .filter((r) => volumeCalls.has(r.rpc) === acting && r.rpc !== 'NodeGetVolumeStats')
        .map((r) => r.rpc);
    rows.push({
      type: 'CSI static PV',
      check: 'calls, in order',
      kubelet: names('kubelet', true).map((n, i) => `${i + 1} ${n}`),
      vole: names('vole', true).map((n, i) => `${i + 1} ${n}`),
    });
    rows.push({
      type: 'CSI static PV',
      check: 'probing calls',
      kubelet: [...new Set(names('kubelet', false))].sort(),
      vole: [...new Set(names('vole', false))].sort(),
    });
    for (const rpc of volumeCalls) {
      const request = (side: 'kubelet' | 'vole') =>
        requestLines(calls[side].find((r) => r.rpc === rpc)?.request);
      rows.push({
        type: 'CSI static PV',
        check: rpc,
        kubelet: request('kubelet'),
        vole: request('vole'),
      });
    }
  });

  test('the table: every difference is documented', () => {
    const { table, unexpected } = judge(rows);
    console.log(table.join('\n'));
    assert.deepEqual(unexpected, [], unexpected.join('\n'));
  });
});
