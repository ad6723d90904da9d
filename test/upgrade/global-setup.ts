/**
 * Builds the previous releases before the tests start (minutes the first time, when 0.1.0's npm ci
 * compiles its better-sqlite3; found in the cache afterwards), so that each test's own time limit is
 * the upgrade's alone.
 */
import type { PreviousVersion } from "./releases.js";
import { PREVIOUS_RELEASES, previousRelease } from "./releases.js";

export default function setup(): void {
  for (const version of Object.keys(PREVIOUS_RELEASES) as PreviousVersion[]) {
    const started = Date.now();
    const release = previousRelease(version);
    console.log(
      `previous release ${release.label} at ${release.dir} (${Math.round((Date.now() - started) / 1000)} s)`,
    );
  }
}
