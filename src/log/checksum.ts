/**
 * Checksums of what a restart reads (schema 3): a CRC-32 per event row and one per snapshot
 * blob, written with the row and compared when it is read, so that the snapshot and the
 * tail a restart folds are checked as they are read, and the whole-file PRAGMA quick_check
 * can run in the background (integrity.ts). CRC-32 is zlib's (in Node since 20.15); it
 * catches damage, not tampering.
 */
import { crc32 } from 'node:zlib';

const typeChecksums = new Map<string, number>();

/**
 * The row's checksum: the CRC-32 of its JSON, started from a value that mixes its seq,
 * timestamp and type, so a change to any of the four changes it (CRCs of the same bytes
 * from different start values differ). One native call per row: a string built per row to
 * hold the envelope cost more than the JSON's own CRC.
 */
export function eventChecksum(seq: number, tsMs: number, type: string, data: string): number {
  let typeChecksum = typeChecksums.get(type);
  if (typeChecksum === undefined) {
    typeChecksum = crc32(type);
    if (typeChecksums.size < 1_000) typeChecksums.set(type, typeChecksum);
  }
  const high = Math.floor(tsMs / 0x1_0000_0000);
  const start =
    (typeChecksum ^ Math.imul(seq | 0, 0x9e3779b1) ^ Math.imul(tsMs | 0, 0x85ebca6b) ^ high) >>> 0;
  return crc32(data, start);
}

export function snapshotChecksum(data: Buffer): number {
  return crc32(data);
}
