/** Where `dagbot` keeps Node's compile cache (src/cli.ts turns the cache on): a folder of the user's own. */
import { mkdirSync, statSync } from "node:fs";
import { isAbsolute, join } from "node:path";

/**
 * XDG_CACHE_HOME (when absolute) or ~/.cache, then dagbot/compile-cache; never Node's default in the
 * shared temporary folder. Bytecode found there runs as this process, so the folder and its parent
 * must be this user's and writable by nobody else (docs/security.md); otherwise, or when it cannot
 * be made, null: no cache. `uid` undefined (no getuid, as on Windows) skips the owner check.
 */
export function privateCacheDir(
  env: Readonly<Record<string, string | undefined>>,
  home: string,
  uid: number | undefined,
): string | null {
  const xdg = env["XDG_CACHE_HOME"];
  const base = xdg !== undefined && isAbsolute(xdg) ? xdg : join(home, ".cache");
  const parent = join(base, "dagbot");
  const dir = join(parent, "compile-cache");
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    for (const d of [parent, dir]) {
      const st = statSync(d);
      if (!st.isDirectory() || (uid !== undefined && st.uid !== uid) || (st.mode & 0o022) !== 0) return null;
    }
    return dir;
  } catch {
    return null;
  }
}
