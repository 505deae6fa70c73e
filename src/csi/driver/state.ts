/**
 * The disk driver's own records under `--state-dir`: the images (`images/<id>.img`), the
 * volumes it created (`volumes/<id>.json`: the CreateVolume name, capacity and accessible
 * topology) and the
 * volumes it has staged (`staged/<id>.json`: where, and with which capability), so its
 * order and idempotency rules hold across restarts. Each record is one small file written
 * whole (write to a temporary name, then rename).
 */
import { createHash } from 'node:crypto';
import { mkdir, readdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { replaceFile } from '../../host/atomic-writer.js';
import { safeName } from '../../host/paths.js';
import { invalid } from './errors.js';

export interface VolumeRecord {
  readonly name: string;
  readonly capacityBytes: number;
  /** The topology segments the volume is accessible from (its node). */
  readonly segments?: Readonly<Record<string, string>>;
}

export interface StagedRecord {
  readonly stagingTargetPath: string;
  /** `mount:<fsType>` or `block`, and the access mode. */
  readonly accessType: string;
  readonly accessMode: string;
}

/** A volume id the driver accepts: one safe path component. */
export function checkVolumeId(id: string, rpc: string): string {
  try {
    return safeName('volume id', id);
  } catch (error) {
    throw invalid(
      `${rpc}: volume_id "${id}" is not a valid disk name: ${(error as Error).message}`,
    );
  }
}

/**
 * The volume id CreateVolume gives a name: the name itself when it is a plain file name
 * (as `pvc-<uid>` is), else a digest of it, so the same name always finds the same volume.
 */
export function volumeIdOf(name: string): string {
  if (/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/.test(name)) return name;
  return `vol-${createHash('sha256').update(name).digest('hex').slice(0, 40)}`;
}

export class DriverState {
  constructor(readonly dir: string) {}

  image(id: string): string {
    return join(this.dir, 'images', `${id}.img`);
  }

  async readVolume(id: string): Promise<VolumeRecord | undefined> {
    return this.read<VolumeRecord>('volumes', id);
  }

  writeVolume(id: string, record: VolumeRecord): Promise<void> {
    return this.write('volumes', id, record);
  }

  /** Every volume the driver created, by id, in id order. */
  async listVolumes(): Promise<{ id: string; record: VolumeRecord }[]> {
    const files = await readdir(join(this.dir, 'volumes')).catch(() => [] as string[]);
    const ids = files.filter((f) => f.endsWith('.json')).map((f) => f.slice(0, -'.json'.length));
    const volumes: { id: string; record: VolumeRecord }[] = [];
    for (const id of ids.sort()) {
      const record = await this.readVolume(id);
      if (record !== undefined) volumes.push({ id, record });
    }
    return volumes;
  }

  removeVolume(id: string): Promise<void> {
    return rm(join(this.dir, 'volumes', `${id}.json`), { force: true });
  }

  readStaged(id: string): Promise<StagedRecord | undefined> {
    return this.read<StagedRecord>('staged', id);
  }

  writeStaged(id: string, record: StagedRecord): Promise<void> {
    return this.write('staged', id, record);
  }

  removeStaged(id: string): Promise<void> {
    return rm(join(this.dir, 'staged', `${id}.json`), { force: true });
  }

  private async read<T>(kind: string, id: string): Promise<T | undefined> {
    const text = await readFile(join(this.dir, kind, `${id}.json`), 'utf8').catch(() => undefined);
    return text === undefined ? undefined : (JSON.parse(text) as T);
  }

  private async write(kind: string, id: string, record: object): Promise<void> {
    await mkdir(join(this.dir, kind), { recursive: true });
    const path = join(this.dir, kind, `${id}.json`);
    await replaceFile(path, JSON.stringify(record));
  }
}
