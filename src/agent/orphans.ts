/**
 * The orphan pass (behaviour K3.7 cleanOrphanVolumes, K6 reconstruction): what lies under the
 * agent's root that its log does not know — a log salvaged, started fresh, or older than
 * the host. Pod volume directories of pods the log never heard of, node-global device
 * mounts and Block maps of volumes no pod or attachment names, loop devices over the root's
 * disk images that no attachment names. Each is recorded (ReportRaised `OrphanFound`,
 * durable before anything is touched), then cleaned up, then recorded again
 * (`OrphanRemoved`, or `OrphanLeft` with the reason).
 *
 * Safety, as the kubelet's: a pod the log knows (desired, or with any mount record) is
 * never touched, nor a volume any desired pod or attachment names; a directory is removed
 * only after its own mount is gone and with no mount below it (removeVolumeDir); a loop
 * device still mounted somewhere is not detached, and none at all when a controller attaches
 * (controllerAttachDetach: the attachments are the controller's). Runs once, after the sources are ready
 * (every pod known) and before the manifest directory is watched, while the reconciler
 * runs: so it reads the world again before it touches each orphan.
 */
import { readdir, realpath } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { detachLoopForImage, listLoops } from '../host/loop.js';
import { readMountTable } from '../host/mountinfo.js';
import { removeVolumeDir } from '../plugins/builtin/common.js';
import type { World } from '../kubelet/types.js';
import { podEntries } from '../kubelet/by-pod.js';

export type OrphanKind = 'podVolume' | 'globalMount' | 'loopDevice';

export interface Orphan {
  readonly kind: OrphanKind;
  /** The directory, or the loop device's backing image. */
  readonly path: string;
  /** The pod UID (pod volumes) and the `<plugin>/<name>` the path names. */
  readonly pod: string;
  readonly volume: string;
  /** `/dev/loopN` for a loop device. */
  readonly device?: string;
}

export interface OrphanReport {
  readonly reason: 'OrphanFound' | 'OrphanRemoved' | 'OrphanLeft';
  readonly pod: string;
  readonly volume: string;
  readonly message: string;
}

/** Finds the orphans under `root`, records, cleans up, records; returns what it found. */
export async function cleanUpOrphans(opts: {
  readonly root: string;
  /**
   * The world now: read again before each orphan is touched, since the reconciler runs
   * while the pass does (a loop device attached since the look is no orphan).
   */
  readonly world: () => World;
  /** Appends a ReportRaised and resolves once it is durable. */
  readonly record: (report: OrphanReport) => Promise<void>;
}): Promise<{ found: Orphan[]; left: Orphan[] }> {
  const found = await findOrphans(opts.root, opts.world);
  for (const orphan of found) {
    await opts.record({ reason: 'OrphanFound', ...names(orphan), message: foundText(orphan) });
  }
  const left: Orphan[] = [];
  for (const orphan of found) {
    const why = await cleanUp(opts.root, orphan, opts.world);
    if (why !== undefined) left.push(orphan);
    await opts.record(
      why === undefined
        ? { reason: 'OrphanRemoved', ...names(orphan), message: `removed ${where(orphan)}` }
        : { reason: 'OrphanLeft', ...names(orphan), message: `left ${where(orphan)}: ${why}` },
    );
  }
  return { found, left };
}

const names = (o: Orphan) => ({ pod: o.pod, volume: o.volume });
const where = (o: Orphan) => (o.device === undefined ? o.path : `${o.device} over ${o.path}`);

function foundText(o: Orphan): string {
  switch (o.kind) {
    case 'podVolume':
      return `${o.path}: a volume of pod ${o.pod}, which the log does not know; unmounting and removing it`;
    case 'globalMount':
      return `${o.path}: a device mount of ${o.volume}, which the log does not know; unmounting and removing it`;
    case 'loopDevice':
      return `${o.device} over ${o.path}: a loop device of ${o.volume}, which the log does not know; detaching it`;
  }
}

/** Unique volume names and pods the log knows: none of their paths is an orphan. */
function known(world: World): { pods: Set<string>; volumes: Set<string> } {
  const pods = new Set<string>(world.pods.keys());
  const volumes = new Set<string>([...world.attachments.keys(), ...world.dsw.keys()]);
  for (const [volume, byPod] of world.mounts) {
    volumes.add(volume);
    for (const record of podEntries(byPod)) pods.add(record.pod);
  }
  for (const record of world.pods.values()) for (const v of record.volumes) volumes.add(v.volume);
  return { pods, volumes };
}

async function entries(dir: string): Promise<string[]> {
  return readdir(dir).catch(() => []);
}

async function findOrphans(root: string, worldNow: () => World): Promise<Orphan[]> {
  const world = worldNow();
  const { pods, volumes } = known(world);
  const found: Orphan[] = [];
  for (const pod of await entries(join(root, 'pods'))) {
    if (pods.has(pod)) continue;
    for (const kind of ['volumes', 'volumeDevices']) {
      for (const plugin of await entries(join(root, 'pods', pod, kind))) {
        for (const name of await entries(join(root, 'pods', pod, kind, plugin))) {
          const path = join(root, 'pods', pod, kind, plugin, name);
          found.push({ kind: 'podVolume', path, pod, volume: `${unescape(plugin)}/${name}` });
        }
      }
    }
  }
  for (const plugin of await entries(join(root, 'plugins'))) {
    for (const kind of ['mounts', 'volumeDevices']) {
      for (const handle of await entries(join(root, 'plugins', plugin, kind))) {
        const volume = `${unescape(plugin)}/${handle}`;
        if (volumes.has(volume)) continue;
        const path = join(root, 'plugins', plugin, kind, handle);
        found.push({ kind: 'globalMount', path, pod: '', volume });
      }
    }
  }
  // With a controller attaching (controllerAttachDetach), loop devices are its own.
  if (world.config.controllerAttachDetach) return found;
  // losetup reports the image's real path.
  const disks = join(await realpath(root).catch(() => root), 'disks');
  const loops = await listLoops();
  const handles = handlesOf(known(worldNow()).volumes); // after the list: attached since is known
  for (const loop of loops) {
    if (!loop.backFile.startsWith(`${disks}/`) || !loop.backFile.endsWith('.img')) continue;
    const handle = basename(loop.backFile, '.img');
    if (handles.has(handle)) continue;
    found.push({
      kind: 'loopDevice',
      path: loop.backFile,
      pod: '',
      volume: handle,
      device: loop.name,
    });
  }
  return found;
}

const unescape = (plugin: string) => plugin.replaceAll('~', '/');

const handlesOf = (volumes: Set<string>) =>
  new Set([...volumes].map((v) => v.slice(v.lastIndexOf('/') + 1)));

/** Why `orphan` is no longer one: the log came to know its pod or volume during the pass. */
function knownNow(orphan: Orphan, world: World): string | undefined {
  const { pods, volumes } = known(world);
  const knows =
    orphan.kind === 'podVolume'
      ? pods.has(orphan.pod)
      : orphan.kind === 'globalMount'
        ? volumes.has(orphan.volume)
        : handlesOf(volumes).has(orphan.volume);
  return knows ? 'the log came to know it during the pass; the reconciler has it' : undefined;
}

const scratchPlugins = new Set([
  'kubernetes.io/empty-dir',
  'kubernetes.io/configmap',
  'kubernetes.io/secret',
  'kubernetes.io/downward-api',
  'kubernetes.io/projected',
]);

/** Cleans one orphan up; returns why it was left, or undefined when it is gone. */
async function cleanUp(
  root: string,
  orphan: Orphan,
  world: () => World,
): Promise<string | undefined> {
  try {
    if (orphan.kind === 'loopDevice') {
      const table = await readMountTable();
      const users = table.filter((m) => m.source === orphan.device).map((m) => m.mountPoint);
      if (users.length > 0) return `still mounted at ${users.join(', ')}`;
      const known = knownNow(orphan, world());
      if (known !== undefined) return known;
      await detachLoopForImage(orphan.path);
      return undefined;
    }
    // An emptyDir's content is scratch space and a content volume's is written from the
    // API objects: their TearDown removes it. Any other directory must be empty once
    // unmounted.
    const known = knownNow(orphan, world());
    if (known !== undefined) return known;
    const plugin = orphan.volume.slice(0, orphan.volume.lastIndexOf('/'));
    const recursive = scratchPlugins.has(plugin);
    await removeVolumeDir(root, orphan.path, { recursive });
    return undefined;
  } catch (error) {
    return (error as Error).message;
  }
}
