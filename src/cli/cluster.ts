/**
 * `vole apply|delete|get --etcd URLS`: the cluster's objects in etcd, validated as the
 * manifest source validates them.
 */
import { writeFileSync } from 'node:fs';
import type { Etcd3 } from 'etcd3';
import { RealClock } from '../clock.js';
import { ClusterError, connect, describeEtcdError, withDeadline } from '../cluster/client.js';
import { loadLogHead, readLogEvents } from '../cluster/etcd-log.js';
import { ClusterKeys, defaultPrefix } from '../cluster/keys.js';
import type { VoleEvent } from '../events/index.js';
import type { ManifestObject } from '../events/k8s.js';
import { toJsonLines } from '../postmortem/jsonl.js';
import {
  applyManifestSet,
  deleteManifestSet,
  listState,
  readManifestPaths,
} from '../cluster/objects.js';
import { readVolumesAttached } from '../cluster/status.js';
import type { KvStore } from '../cluster/store.js';
import { EtcdStore } from '../cluster/store-etcd.js';
import { getKinds } from './get-kinds.js';
import { UsageError } from './postmortem.js';

export interface EtcdOptions {
  readonly etcd: string;
  readonly prefix?: string;
}

const commandDeadlineMs = 15_000;

/** Runs `body` with a client; etcd and input errors become UsageErrors (exit 2, one line). */
async function withCluster<T>(
  opts: EtcdOptions,
  body: (store: KvStore, keys: ClusterKeys) => Promise<T>,
): Promise<T> {
  let client: Etcd3;
  try {
    client = connect(opts.etcd);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  try {
    return await withDeadline(
      body(new EtcdStore(client), new ClusterKeys(opts.prefix ?? defaultPrefix)),
      commandDeadlineMs,
      `etcd at ${opts.etcd}`,
      new RealClock(),
    );
  } catch (error) {
    if (error instanceof UsageError) throw error;
    if (error instanceof ClusterError) throw new UsageError(error.message);
    throw new UsageError(describeEtcdError(error, opts.etcd));
  } finally {
    client.close();
  }
}

function readOrRefuse(files: readonly string[]) {
  if (files.length === 0) throw new UsageError('give the manifests with -f FILE|DIR');
  let set;
  try {
    set = readManifestPaths(files);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  if (set.problems.length > 0) {
    const lines = set.problems.map((p) => `  ${p.file}: ${p.message}`).join('\n');
    throw new UsageError(`nothing applied; fix these manifests first:\n${lines}`);
  }
  return set;
}

export async function applyCommand(opts: EtcdOptions & { filename: string[] }): Promise<number> {
  const set = readOrRefuse(opts.filename);
  const result = await withCluster(opts, (client, keys) => applyManifestSet(client, keys, set));
  for (const what of result.created) process.stdout.write(`${what} created\n`);
  for (const what of result.configured) process.stdout.write(`${what} configured\n`);
  for (const what of result.unchanged) process.stdout.write(`${what} unchanged\n`);
  return 0;
}

export async function deleteCommand(opts: EtcdOptions & { filename: string[] }): Promise<number> {
  const set = readOrRefuse(opts.filename);
  const result = await withCluster(opts, (client, keys) => deleteManifestSet(client, keys, set));
  for (const what of result.deleted) process.stdout.write(`${what} deleted\n`);
  for (const what of result.absent) process.stdout.write(`${what} not found\n`);
  return 0;
}

type GetKind = (typeof getKinds)[number];
const kindOf: Record<Exclude<GetKind, 'pods' | 'attachments'>, string> = {
  pvs: 'PersistentVolume',
  pvcs: 'PersistentVolumeClaim',
  nodes: 'Node',
  configmaps: 'ConfigMap',
  secrets: 'Secret',
};

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return (
    rows
      .map((r) =>
        r
          .map((c, i) => c.padEnd(widths[i]!))
          .join('  ')
          .trimEnd(),
      )
      .join('\n') + '\n'
  );
}

/** A claim's or PV's binding, as the leading controller wrote it (kubectl's STATUS and VOLUME/CLAIM). */
function bindingColumns(o: ManifestObject): Record<string, string> {
  if (o.kind === 'PersistentVolumeClaim')
    return { status: o.status?.phase ?? 'Pending', volume: o.spec.volumeName ?? '' };
  if (o.kind !== 'PersistentVolume') return {};
  const ref = o.spec.claimRef;
  return {
    status: o.status?.phase ?? 'Available',
    claim: ref?.name === undefined ? '' : `${ref.namespace ?? 'default'}/${ref.name}`,
  };
}

export async function getCommand(
  what: string,
  opts: EtcdOptions & { json?: boolean },
): Promise<number> {
  if (!(getKinds as readonly string[]).includes(what))
    throw new UsageError(`vole get: unknown kind "${what}"; use one of ${getKinds.join(', ')}`);
  const kind = what as GetKind;
  const rows = await withCluster(opts, async (client, keys) => {
    if (kind === 'attachments') {
      const attached = await readVolumesAttached(client, keys);
      return attached.flatMap(({ node, volumes, revision }) =>
        volumes.map((v) => ({
          node,
          volume: v.name,
          devicePath: v.devicePath ?? '',
          resourceVersion: String(revision),
        })),
      );
    }
    const state = await listState(client, keys);
    if (kind === 'pods')
      return state.pods.map((p) => ({
        namespace: p.metadata.namespace ?? 'default',
        name: p.metadata.name,
        node: p.spec.nodeName ?? '',
        uid: p.metadata.uid ?? '',
        resourceVersion: String(p.metadata.resourceVersion ?? ''),
      }));
    return state.objects
      .filter((o) => o.kind === kindOf[kind])
      .map((o) => ({
        ...(kind === 'pvcs' || kind === 'configmaps' || kind === 'secrets'
          ? { namespace: o.metadata.namespace ?? 'default' }
          : {}),
        name: o.metadata.name,
        ...bindingColumns(o),
        resourceVersion: String(o.metadata.resourceVersion ?? ''),
      }));
  });
  if (opts.json === true) {
    process.stdout.write(`${JSON.stringify(rows, null, 2)}\n`);
    return 0;
  }
  if (rows.length === 0) {
    process.stdout.write(`no ${what}\n`);
    return 0;
  }
  const header = Object.keys(rows[0]!);
  process.stdout.write(
    table([
      header.map((h) => h.toUpperCase()),
      ...rows.map((r) => header.map((h) => String((r as Record<string, string>)[h]))),
    ]),
  );
  return 0;
}

/**
 * `vole export --etcd URLS`: the controller log in etcd as JSON Lines, the format of
 * `vole export --db`; `vole import` makes it a log file every post-mortem tool reads.
 */
export async function exportEtcdCommand(opts: EtcdOptions & { out?: string }): Promise<number> {
  const lines: string[] = [];
  const loaded = await withCluster(opts, async (client, keys) => {
    const head = await loadLogHead(client, keys);
    const events: VoleEvent[] = [];
    await readLogEvents(client, keys, head.firstSeq, (event) => events.push(event));
    for (const line of toJsonLines(events)) lines.push(line);
    return head;
  });
  if (loaded.firstSeq > 1)
    process.stderr.write(
      `vole: the controller log before seq ${loaded.firstSeq} was compacted into a snapshot; ` +
        `exported seqs ${loaded.firstSeq}–${loaded.head} (start controllers with a larger --snapshot-every to keep more)\n`,
    );
  const text = lines.join('');
  if (opts.out === undefined) process.stdout.write(text);
  else writeFileSync(opts.out, text);
  process.stderr.write(
    `exported ${lines.length} events of the controller log (head ${loaded.head})\n`,
  );
  return 0;
}
