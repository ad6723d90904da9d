/**
 * Commits made to a SQLite database since its write-ahead log last restarted, read from the WAL
 * file itself (sqlite.org/fileformat.html, "The WAL File Format"): the frames of the current log
 * (their salts match the header's) that end a transaction (a non-zero "database size after
 * commit"). What every connection of every process committed, counted from outside the store.
 */
import { existsSync, readFileSync } from "node:fs";

const HEADER = 32;
const FRAME_HEADER = 24;

export function walCommits(dbPath: string): number {
  const path = `${dbPath}-wal`;
  if (!existsSync(path)) return 0;
  const wal = readFileSync(path);
  if (wal.length < HEADER) return 0;
  const pageSize = wal.readUInt32BE(8);
  const salt1 = wal.readUInt32BE(16);
  const salt2 = wal.readUInt32BE(20);
  let commits = 0;
  for (let at = HEADER; at + FRAME_HEADER + pageSize <= wal.length; at += FRAME_HEADER + pageSize) {
    if (wal.readUInt32BE(at + 8) !== salt1 || wal.readUInt32BE(at + 12) !== salt2) break;
    if (wal.readUInt32BE(at + 4) !== 0) commits += 1;
  }
  return commits;
}
