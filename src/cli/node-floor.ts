/**
 * The oldest Node.js line dagbot runs on, read from package.json's `engines.node` (">=22"), and the
 * refusal a `dagbot` started on an older one prints instead of loading its SQLite driver, which
 * crashes there without a word (better-sqlite3 13 needs Node 22; README, Set up).
 */

/** The major version a range of the form `>=N` (or `>=N.x.y`) asks for at least; null for other shapes. */
export function floorMajor(range: unknown): number | null {
  if (typeof range !== "string") return null;
  const m = /^\s*>=\s*v?(\d+)(?:\.\d+){0,2}\s*$/.exec(range);
  return m === null ? null : Number(m[1]);
}

/** The line to print when `version` (process.versions.node) is older than `range`; null when it is not. */
export function tooOldNode(version: string, range: unknown): string | null {
  const floor = floorMajor(range);
  const major = Number(version.split(".")[0]);
  if (floor === null || !Number.isInteger(major) || major >= floor) return null;
  return (
    `dagbot: Node.js ${floor} or later is needed; this is Node.js ${version}. ` +
    `Install Node.js ${floor} or 24 and run npm install again (README, Set up).`
  );
}
