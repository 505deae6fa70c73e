/**
 * The restart bench's large log: the generated log's rows repeated `times` times, seqs
 * renumbered one after another and checksums recomputed, so the file is `times` as large
 * while what a restart reads is the same (the same snapshot, the same real tail, renumbered).
 * It isolates what the restart must not depend on: the size of the history before the
 * snapshot. Folding it from seq 1 would not make sense (the same pods added again), so it
 * is only ever read from a snapshot.
 *
 * The generator holds every event in memory, so it cannot write 10,000,000 real events on
 * this machine; copying rows in SQL can. The file is cached outside the work tree
 * (VOLE_BENCH_CACHE, default $TMPDIR/vole-bench-cache), keyed by the generated log it
 * repeats and by bigLogVersion.
 */
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import Database from 'better-sqlite3';
import { eventCodec, type VoleEvent } from '../../src/events/index.js';
import { eventChecksum } from '../../src/log/checksum.js';
import { openLog } from '../../src/log/store.js';
import { nowMs, progress, removeDb } from './util.js';

/** Bump when the way the file is built changes. */
const bigLogVersion = 1;

export function benchCacheDir(): string {
  return process.env.VOLE_BENCH_CACHE ?? join(tmpdir(), 'vole-bench-cache');
}

/** `basePath`'s rows `times` times over (cached); see the file comment. */
export function repeatedLog(basePath: string, baseEvents: number, times: number): string {
  const dir = benchCacheDir();
  mkdirSync(dir, { recursive: true });
  const stem = `repeated-v${bigLogVersion}-x${times}-`;
  const path = join(dir, `${stem}${basename(basePath)}`);
  if (existsSync(path)) {
    progress(`restart: reusing ${path}`);
    return path;
  }
  for (const old of readdirSync(dir)) {
    if (old.startsWith(stem)) rmSync(join(dir, old), { force: true });
  }
  const started = nowMs();
  const tmp = `${path}.tmp`;
  removeDb(tmp);
  openLog<VoleEvent>(tmp, { codec: eventCodec, mode: 'create', durability: 'normal' }).close();
  const db = new Database(tmp);
  db.pragma('journal_mode = DELETE'); // one bulk copy: no WAL to checkpoint afterwards
  db.pragma('synchronous = OFF');
  db.function('vole_crc', { deterministic: true }, (seq, tsMs, type, data) =>
    eventChecksum(Number(seq), Number(tsMs), String(type), String(data)),
  );
  db.prepare('ATTACH DATABASE ? AS base').run(basePath);
  const copy = db.prepare(
    'INSERT INTO events (seq, ts_ms, type, data, crc) ' +
      'SELECT seq + @offset, ts_ms, type, data, vole_crc(seq + @offset, ts_ms, type, data) ' +
      'FROM base.events ORDER BY seq',
  );
  for (let k = 0; k < times; k++) {
    db.transaction(() => copy.run({ offset: k * baseEvents }))();
    progress(
      `restart: repeated log ${k + 1}/${times} (${((nowMs() - started) / 1000).toFixed(0)} s)`,
    );
  }
  db.prepare('DETACH DATABASE base').run();
  db.pragma('journal_mode = WAL');
  db.close();
  renameSync(tmp, path);
  removeDb(tmp);
  progress(`restart: wrote ${path} in ${((nowMs() - started) / 1000).toFixed(0)} s`);
  return path;
}
