import { chmodSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { privateCacheDir } from "../../src/cli/compile-cache.js";

const scratch = mkdtempSync(join(tmpdir(), "dagbot-compile-cache-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
const uid = process.getuid?.();
const fresh = (name: string): string => {
  const d = join(scratch, name);
  mkdirSync(d);
  return d;
};

describe("privateCacheDir (where Node's compile cache goes)", () => {
  it("makes XDG_CACHE_HOME/dagbot/compile-cache, private to its owner", () => {
    const xdg = fresh("xdg");
    const dir = privateCacheDir({ XDG_CACHE_HOME: xdg }, "/nonexistent-home", uid);
    expect(dir).toBe(join(xdg, "dagbot", "compile-cache"));
    expect(statSync(dir!).mode & 0o777).toBe(0o700);
  });

  it("uses ~/.cache when XDG_CACHE_HOME is unset or relative", () => {
    const home = fresh("home");
    expect(privateCacheDir({}, home, uid)).toBe(join(home, ".cache", "dagbot", "compile-cache"));
    expect(privateCacheDir({ XDG_CACHE_HOME: "relative/cache" }, home, uid)).toBe(
      join(home, ".cache", "dagbot", "compile-cache"),
    );
  });

  it("refuses a folder, or its parent, that others may write to", () => {
    const open = fresh("open");
    mkdirSync(join(open, "dagbot", "compile-cache"), { recursive: true, mode: 0o700 });
    chmodSync(join(open, "dagbot"), 0o777);
    expect(privateCacheDir({ XDG_CACHE_HOME: open }, "/nonexistent-home", uid)).toBeNull();
    chmodSync(join(open, "dagbot"), 0o700);
    chmodSync(join(open, "dagbot", "compile-cache"), 0o775);
    expect(privateCacheDir({ XDG_CACHE_HOME: open }, "/nonexistent-home", uid)).toBeNull();
    chmodSync(join(open, "dagbot", "compile-cache"), 0o700);
    expect(privateCacheDir({ XDG_CACHE_HOME: open }, "/nonexistent-home", uid)).toBe(
      join(open, "dagbot", "compile-cache"),
    );
  });

  it("refuses a folder owned by another user", () => {
    const xdg = fresh("other");
    mkdirSync(join(xdg, "dagbot", "compile-cache"), { recursive: true, mode: 0o700 });
    const owner = statSync(join(xdg, "dagbot")).uid;
    expect(privateCacheDir({ XDG_CACHE_HOME: xdg }, "/nonexistent-home", owner + 1)).toBeNull();
  });

  it("gives up (no cache) when the folder cannot be made", () => {
    const blocked = fresh("blocked");
    writeFileSync(join(blocked, "dagbot"), "a file where the folder would go");
    expect(privateCacheDir({ XDG_CACHE_HOME: blocked }, "/nonexistent-home", uid)).toBeNull();
  });
});
