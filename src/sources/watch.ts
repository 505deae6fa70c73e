/**
 * Watches a manifest directory: reads it at start, then again shortly after every change
 * the OS reports (debounced) and at a fixed period (fs.watch can miss events on some
 * filesystems). Each read is diffed against the previous one.
 */
import { type FSWatcher, watch } from 'node:fs';
import type { FeatureGates } from './feature-gates.js';
import {
  diffManifests,
  identitiesOf,
  type ManifestChanges,
  type ManifestNotice,
  type ManifestProblem,
  type ManifestSet,
  readManifestDir,
} from './manifests.js';

export interface ManifestWatcherOptions {
  readonly dir: string;
  readonly onChanges: (changes: ManifestChanges) => void;
  /** New problems only: a problem is reported again only after it was fixed. */
  readonly onProblems: (problems: ManifestProblem[]) => void;
  /**
   * Fields dropped from pods because their feature gate is off (`featureGates`), new ones
   * only, as problems: a pod's is told again only after its manifest went without it.
   */
  readonly onNotices?: (notices: ManifestNotice[]) => void;
  /** The gates whose fields pods keep (default: Kubernetes' defaults). */
  readonly featureGates?: FeatureGates;
  readonly debounceMs?: number;
  readonly rescanMs?: number;
  /**
   * What the engine already knows (from its log): the first read is diffed against it, so
   * a pod deleted while the agent was down is removed, and unchanged ones are not re-sent.
   */
  readonly known?: ManifestSet;
}

/** The file a problem is about (`FILE (document 2)` → `FILE`). */
function fileOf(problem: ManifestProblem): string {
  return problem.file.replace(/ \(document \d+\)$/, '');
}

/**
 * A file with a refused document keeps what it gave before: as the API server refuses an
 * invalid update and the object stays as it was, a running pod is not torn down because
 * its manifest was saved half-written or wrong.
 */
function keepRefusedUpdates(before: ManifestSet | undefined, next: ManifestSet): ManifestSet {
  const origins = before?.origins;
  if (origins === undefined || next.problems.length === 0) return next;
  const refused = new Set(next.problems.map(fileOf));
  for (const [id, file] of origins) {
    if (!refused.has(file)) continue;
    if (id.startsWith('Pod/')) {
      const uid = id.slice('Pod/'.length);
      const pod = before!.pods.get(uid);
      if (pod === undefined || next.pods.has(uid)) continue;
      next.pods.set(uid, pod);
    } else {
      const object = before!.objects.get(id);
      if (object === undefined || next.objects.has(id)) continue;
      next.objects.set(id, object);
    }
    next.origins?.set(id, file);
  }
  return next;
}

export class ManifestWatcher {
  private current: ManifestSet | undefined;
  private reported = new Set<string>();
  private noticed = new Set<string>();
  private watcher: FSWatcher | undefined;
  private debounce: NodeJS.Timeout | undefined;
  private rescan: NodeJS.Timeout | undefined;

  constructor(private readonly opts: ManifestWatcherOptions) {
    this.current = opts.known;
  }

  /** Reads the directory once and reports everything in it; throws if it is unreadable. */
  sync(): void {
    // A pod without metadata.uid keeps the UID it has while it exists (identitiesOf).
    const read = readManifestDir(this.opts.dir, identitiesOf(this.current), this.opts.featureGates);
    const next = keepRefusedUpdates(this.current, read);
    const changes = diffManifests(this.current, next);
    this.current = next;
    const keys = new Set(next.problems.map((p) => `${p.file}\0${p.message}`));
    const fresh = next.problems.filter((p) => !this.reported.has(`${p.file}\0${p.message}`));
    this.reported = keys;
    if (fresh.length > 0) this.opts.onProblems(fresh);
    this.tell(read.notices ?? []);
    const any =
      changes.upsertObjects.length +
      changes.removeObjects.length +
      changes.upsertPods.length +
      changes.removePods.length;
    // ConfigMap and Secret data is handed over on every read: after a restart the log has
    // their hashes only, and the plugins need the data.
    if (any > 0 || changes.contents.length > 0) this.opts.onChanges(changes);
  }

  private tell(notices: readonly ManifestNotice[]): void {
    const keys = new Set(notices.map((n) => n.message));
    const fresh = notices.filter((n) => !this.noticed.has(n.message));
    this.noticed = keys;
    if (fresh.length > 0) this.opts.onNotices?.(fresh);
  }

  start(): void {
    this.sync();
    const debounceMs = this.opts.debounceMs ?? 100;
    this.watcher = watch(this.opts.dir, () => {
      clearTimeout(this.debounce);
      this.debounce = setTimeout(() => this.safeSync(), debounceMs);
    });
    this.watcher.on('error', () => undefined); // the periodic rescan still runs
    this.rescan = setInterval(() => this.safeSync(), this.opts.rescanMs ?? 5_000);
  }

  private safeSync(): void {
    try {
      this.sync();
    } catch (error) {
      this.opts.onProblems([
        {
          file: this.opts.dir,
          message: `cannot read the manifest directory: ${(error as Error).message}`,
        },
      ]);
    }
  }

  /** The manifest file a pod came from (by UID), as last read. */
  originOf(uid: string): string | undefined {
    return this.current?.origins?.get(`Pod/${uid}`);
  }

  stop(): void {
    this.watcher?.close();
    clearTimeout(this.debounce);
    clearInterval(this.rescan);
  }
}
