/**
 * The kubelet's atomic-writer volumes: kubernetes.io/configmap (on disk), and on a tmpfs of
 * their own, never on disk, kubernetes.io/secret, kubernetes.io/downward-api and
 * kubernetes.io/projected: each of the three kubelet plugins wraps an emptyDir of medium
 * Memory (`wrappedVolumeSpec` in pkg/volume/secret, downwardapi and projected), while
 * the configmap plugin wraps a plain emptyDir. setUp builds the payload — ConfigMap and
 * Secret data read now from the agent's contents store, never from the log — and writes it
 * through the AtomicWriter; setUp again (the remount) swaps in the new content without
 * unmounting.
 */
import { chmod, stat } from 'node:fs/promises';
import { type Payload, type PayloadFile, writeAtomically } from '../../host/atomic-writer.js';
import { HostError } from '../../host/errors.js';
import { isMountPoint, tmpfs } from '../../host/mount.js';
import type { ObjectContents } from '../../sources/contents.js';
import { requiredContents } from '../../kubelet/content-invariant.js';
import { contentPluginNames } from '../../desired/resolve-content.js';
import type {
  ContentOptions,
  DownwardFile,
  ResolvedVolume,
  ServiceAccountTokenPart,
} from '../../operations/volume-spec.js';
import { caps, type SetUpOptions, type VolumePlugin } from '../types.js';
import {
  type BuiltinOptions,
  makeVolumeDir,
  present,
  removeVolumeDir,
  volumeDir,
} from './common.js';

/**
 * Where serviceAccountToken projections get their tokens (Kubernetes mode: the API
 * server's TokenRequest API, src/kube/tokens.ts). Throws with a message that says why not.
 */
export interface ServiceAccountTokens {
  token(namespace: string, part: ServiceAccountTokenPart): Promise<string>;
}

/** Each serviceAccountToken file of a projected volume, by path, asked for now. */
async function fetchTokens(
  spec: ResolvedVolume,
  tokens: ServiceAccountTokens | undefined,
): Promise<Map<string, string>> {
  const fetched = new Map<string, string>();
  const s = spec.source;
  if (s.kind !== 'projected') return fetched;
  for (const part of s.sources) {
    if (part.kind !== 'serviceAccountToken') continue;
    if (tokens === undefined)
      throw new HostError(
        'final',
        'serviceAccountToken projection needs a token issuer; none is configured',
      );
    try {
      fetched.set(part.path, await tokens.token(s.namespace, part));
    } catch (error) {
      throw new HostError(
        'transient',
        `cannot get a token for service account "${part.serviceAccountName}": ` +
          (error as Error).message,
      );
    }
  }
  return fetched;
}

const contentKindOf = (kind: ContentKind) => (kind === 'configMap' ? 'ConfigMap' : 'Secret');

/**
 * The kubelet's words for an object its manager does not have: apierrors.NewNotFound of
 * the "configmap" or "secret" resource (`secret "s" not found`), the FailedMount Event's
 * text word for word. The wait itself is explained by `vole why` (what to create).
 */
function notFound(kind: 'ConfigMap' | 'Secret', name: string): string {
  return `${kind === 'ConfigMap' ? 'configmap' : 'secret'} "${name}" not found`;
}

/**
 * Several errors as one, as utilerrors.NewAggregate prints them (the projected plugin's
 * collectData gathers one per source): the one message alone, else `[a, b]`.
 */
export function aggregateMessage(messages: readonly string[]): string {
  return messages.length === 1 ? messages[0]! : `[${messages.join(', ')}]`;
}

/**
 * Why the volume cannot be set up from `contents` now: the not-found message of each
 * ConfigMap or Secret it must read that the store lacks, aggregated as the kubelet's
 * projected plugin does; undefined when it has them all.
 */
export function missingContent(spec: ResolvedVolume, contents: ObjectContents): string | undefined {
  const missing = requiredContents(spec)
    .filter(({ kind, namespace, name }) => contents.get(kind, namespace, name) === undefined)
    .map(({ kind, name }) => notFound(kind, name));
  return missing.length === 0 ? undefined : aggregateMessage(missing);
}

/** Kubernetes' default file mode of these volumes (0644). */
const defaultContentModeBits = 0o644;

type ContentKind = 'configMap' | 'secret';

function addFile(payload: Map<string, PayloadFile>, path: string, file: PayloadFile): void {
  if (payload.has(path))
    throw new HostError('final', `two sources of the volume write the file "${path}"`);
  payload.set(path, file);
}

/** A configMap's or secret's files: all keys, or the `items` asked for, with their modes. */
function addContent(
  payload: Map<string, PayloadFile>,
  contents: ObjectContents,
  kind: ContentKind,
  source: ContentOptions,
  defaultMode: number,
): void {
  const kindName = kind === 'configMap' ? 'configmap' : 'secret';
  const what = `${kindName} "${source.namespace ?? 'default'}/${source.name}"`;
  const data = contents.get(contentKindOf(kind), source.namespace ?? 'default', source.name);
  if (data === undefined) {
    if (source.optional === true) return;
    throw new HostError('transient', notFound(contentKindOf(kind), source.name));
  }
  if (source.items === undefined) {
    for (const [key, bytes] of data) addFile(payload, key, { data: bytes, mode: defaultMode });
    return;
  }
  for (const [j, item] of source.items.entries()) {
    const bytes = data.get(item.key);
    if (bytes === undefined) {
      if (source.optional === true) continue;
      const field = `${source.field === undefined ? '' : `${source.field}.`}items[${j}].key`;
      const keys = [...data.keys()].sort().join(', ');
      throw new HostError(
        'final',
        `${field}: ${what} has no key "${item.key}" (its keys: ${keys || 'none'}); ` +
          'fix the key in the pod, or add it to the object',
      );
    }
    addFile(payload, item.path, { data: bytes, mode: item.mode ?? defaultMode });
  }
}

function addDownward(
  payload: Map<string, PayloadFile>,
  files: readonly DownwardFile[],
  mode: number,
): void {
  for (const f of files)
    addFile(payload, f.path, { data: Buffer.from(f.content), mode: f.mode ?? mode });
}

/**
 * A token file as the kubelet's projected plugin writes it: owned by the pod's one
 * runAsUser when there is one, and 0600 when a user or an fsGroup owns it (SetVolumeOwnership
 * then adds the group's read), so no other user of the node reads the pod's credentials.
 */
function tokenFile(
  token: string,
  mode: number,
  owner: Pick<SetUpOptions, 'fsGroup' | 'fsUser'>,
): PayloadFile {
  const fsUser = owner.fsUser ?? null;
  const data = Buffer.from(token);
  if (fsUser === null) return { data, mode: owner.fsGroup === null ? mode : 0o600 };
  return { data, mode: 0o600, fsUser };
}

/** The files the volume must hold now. */
function buildPayload(
  spec: ResolvedVolume,
  contents: ObjectContents,
  tokens: ReadonlyMap<string, string> = new Map(),
  owner: Pick<SetUpOptions, 'fsGroup' | 'fsUser'> = { fsGroup: null },
): Payload {
  const s = spec.source;
  const payload = new Map<string, PayloadFile>();
  switch (s.kind) {
    case 'configMap':
    case 'secret':
      addContent(payload, contents, s.kind, s, s.defaultMode ?? defaultContentModeBits);
      return payload;
    case 'downwardAPI':
      addDownward(payload, s.files, s.defaultMode ?? defaultContentModeBits);
      return payload;
    case 'projected': {
      const mode = s.defaultMode ?? defaultContentModeBits;
      // Every source is tried and their errors gathered, as the kubelet's collectData does.
      const errors: HostError[] = [];
      for (const part of s.sources) {
        try {
          if (part.kind === 'downwardAPI') addDownward(payload, part.files, mode);
          else if (part.kind === 'serviceAccountToken') {
            const token = tokens.get(part.path);
            if (token === undefined)
              throw new HostError('final', `no token fetched for "${part.path}"`);
            addFile(payload, part.path, tokenFile(token, part.mode ?? mode, owner));
          } else
            addContent(payload, contents, part.kind, { ...part, namespace: s.namespace }, mode);
        } catch (error) {
          if (!(error instanceof HostError)) throw error;
          errors.push(error);
        }
      }
      if (errors.length === 0) return payload;
      // Retried unless one of them cannot heal by itself (a missing key, a path twice).
      const kind = errors.some((e) => e.kind === 'final') ? 'final' : 'transient';
      throw new HostError(kind, aggregateMessage(errors.map((e) => e.message)));
    }
    default:
      throw new HostError('final', `${spec.traits.pluginName} cannot set up a ${s.kind} volume`);
  }
}

function contentPlugin(
  name: string,
  opts: BuiltinOptions & { contents: ObjectContents; tokens?: ServiceAccountTokens },
  onTmpfs: boolean,
): VolumePlugin {
  return {
    name,
    caps: caps(name, { requiresRemount: true }),
    pod: {
      podVolumePath: (spec, uid) => volumeDir(opts.root, spec, uid),
      isSetUp: (spec, uid) => present(volumeDir(opts.root, spec, uid)),
      async setUp(spec, setUpOpts, target) {
        const tokens = await fetchTokens(spec, opts.tokens);
        // Built before the host is touched.
        const payload = buildPayload(spec, opts.contents, tokens, setUpOpts);
        const dir = volumeDir(opts.root, spec, target.pod!);
        await makeVolumeDir(opts.root, dir, 0o777);
        // The wrapped emptyDir's 0777, whatever the umask (a tmpfs root is 1777 of itself).
        if (!onTmpfs) await chmod(dir, ((await stat(dir)).mode & 0o7000) | 0o777);
        // Secrets never touch a disk: the volume is a tmpfs of its own.
        if (onTmpfs && !(await isMountPoint(dir))) {
          await tmpfs(dir, {
            sizeBytes: 'tmpfsBytes' in spec.source ? spec.source.tmpfsBytes : undefined,
          });
        }
        await writeAtomically(dir, payload, { nowMs: Date.now(), fsGroup: setUpOpts.fsGroup });
      },
      async tearDown(spec, target) {
        await removeVolumeDir(opts.root, volumeDir(opts.root, spec, target.pod!), {
          recursive: true,
        });
      },
    },
  };
}

/**
 * The four atomic-writer plugins, reading ConfigMap and Secret data from `contents`; all but
 * configMap on a tmpfs, as the kubelet's wrappedVolumeSpec of each puts them.
 */
export function contentPlugins(
  opts: BuiltinOptions & { contents: ObjectContents; tokens?: ServiceAccountTokens },
): VolumePlugin[] {
  return [
    contentPlugin(contentPluginNames.configMap, opts, false),
    contentPlugin(contentPluginNames.secret, opts, true),
    contentPlugin(contentPluginNames.downwardAPI, opts, true),
    contentPlugin(contentPluginNames.projected, opts, true),
  ];
}
