/**
 * A scratch folder for one test file: made before its tests, removed after them unless a tracked
 * step failed, in which case it is kept and named so the failure can be looked at.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll } from "vitest";

export interface ScratchFolder {
  /** The folder; available from the file's first beforeAll on. */
  readonly path: string;
  /** Passes `p` through, marking the folder to be kept when it rejects. */
  track<T>(p: Promise<T>): Promise<T>;
}

export function scratchFolder(label: string): ScratchFolder {
  let path: string | null = null;
  let failed = false;
  beforeAll(() => {
    path = mkdtempSync(join(tmpdir(), `dagbot-${label}-`));
  });
  afterAll(() => {
    if (path === null) return;
    if (failed) console.warn(`kept ${path}`);
    else rmSync(path, { recursive: true, force: true });
  });
  return {
    get path(): string {
      if (path === null) throw new Error("the scratch folder is made in beforeAll; it was used before");
      return path;
    },
    track: <T>(p: Promise<T>): Promise<T> =>
      p.catch((e: unknown) => {
        failed = true;
        throw e;
      }),
  };
}
