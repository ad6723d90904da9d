/**
 * Builds the previous release before the tests start (minutes the first time, when npm ci compiles
 * its better-sqlite3; found in the cache afterwards), so that each test's own time limit is the
 * upgrade's alone.
 */
import { previousRelease } from "./releases.js";

export default function setup(): void {
  const started = Date.now();
  const release = previousRelease();
  console.log(
    `previous release ${release.label} at ${release.dir} (${Math.round((Date.now() - started) / 1000)} s)`,
  );
}
