/**
 * The intake's sync position (next_batch token and the filter it was taken with) in one small JSON
 * file per node, implementing matrix-bot-sdk's IStorageProvider. Every write goes to a temporary
 * file that is flushed and then renamed over the old one, so a crash at any moment leaves either
 * the previous position or the new one, never a torn file (the SDK's SimpleFsStorageProvider
 * rewrites its file in place). A lost or unreadable file only costs a fresh sync, whose replays the
 * inbox deduplicates.
 */
import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, writeSync } from "node:fs";
import { dirname } from "node:path";
import type { IFilterInfo, IStorageProvider } from "matrix-bot-sdk";

interface SyncStateData {
  syncToken: string | null;
  filter: IFilterInfo | null;
  values: Record<string, string>;
}

const EMPTY: SyncStateData = { syncToken: null, filter: null, values: {} };

export class SyncStateFile implements IStorageProvider {
  private data: SyncStateData;
  /** Why the file could not be read at start (it is then replaced on the first write), for the log. */
  readonly loadProblem: string | null;

  constructor(readonly path: string) {
    const { data, problem } = load(path);
    this.data = data;
    this.loadProblem = problem;
  }

  getSyncToken(): string | null {
    return this.data.syncToken;
  }

  setSyncToken(token: string | null): void {
    if (token === this.data.syncToken) return;
    this.write({ ...this.data, syncToken: token });
  }

  getFilter(): IFilterInfo {
    // The SDK's own providers return undefined when there is none; its types say otherwise.
    return this.data.filter as IFilterInfo;
  }

  setFilter(filter: IFilterInfo): void {
    this.write({ ...this.data, filter });
  }

  storeValue(key: string, value: string): void {
    this.write({ ...this.data, values: { ...this.data.values, [key]: value } });
  }

  readValue(key: string): string | null | undefined {
    return this.data.values[key];
  }

  private write(next: SyncStateData): void {
    // Owner-only, like the files in it.
    mkdirSync(dirname(this.path), { recursive: true, mode: 0o700 });
    const tmp = `${this.path}.${process.pid}.tmp`;
    const fd = openSync(tmp, "w", 0o600);
    try {
      writeSync(fd, `${JSON.stringify(next)}\n`);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, this.path);
    this.data = next;
  }
}

function load(path: string): { data: SyncStateData; problem: string | null } {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (e) {
    const code = (e as { code?: unknown }).code;
    return { data: EMPTY, problem: code === "ENOENT" ? null : `cannot read ${path}: ${String(e)}` };
  }
  try {
    const parsed = JSON.parse(text) as Partial<SyncStateData> | null;
    if (parsed === null || typeof parsed !== "object") throw new Error("not an object");
    return {
      data: {
        syncToken: typeof parsed.syncToken === "string" ? parsed.syncToken : null,
        filter:
          parsed.filter !== null && typeof parsed.filter === "object" ? (parsed.filter as IFilterInfo) : null,
        values:
          parsed.values !== null && typeof parsed.values === "object"
            ? (parsed.values as Record<string, string>)
            : {},
      },
      problem: null,
    };
  } catch (e) {
    return { data: EMPTY, problem: `${path} is not valid JSON (${String(e)}); starting a fresh sync` };
  }
}
