/**
 * The crypto store's snapshot file: what it holds comes back (keys, values, indexes), an unchanged
 * store is not rewritten, and a damaged or foreign file is an error, never a silently empty store.
 */
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { serialize } from "node:v8";
import { afterAll, describe, expect, it } from "vitest";
import {
  IdbSnapshotFile,
  ensureIndexedDb,
  type IDBFactory,
} from "../../src/adapters/matrix/crypto/idb-snapshot.js";

const folder = mkdtempSync(join(tmpdir(), "dagbot-snapshot-"));
afterAll(() => rmSync(folder, { recursive: true, force: true }));

type Req<T> = { result: T; onsuccess: (() => void) | null; onerror: (() => void) | null; error: unknown };
const done = <T>(req: Req<T>): Promise<T> =>
  new Promise((resolve, reject) => {
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error);
  });

async function seed(factory: IDBFactory, name: string): Promise<void> {
  const open = factory.open(name, 3);
  open.onupgradeneeded = () => {
    const db = open.result;
    const store = db.createObjectStore("sessions", { keyPath: null, autoIncrement: false });
    store.createIndex("by_sender", "sender", { unique: false, multiEntry: false });
  };
  const db = await done(open);
  const tx = db.transaction(["sessions"], "readwrite");
  tx.objectStore("sessions").put({ sender: "abc", key: new Uint8Array([1, 2, 3]) }, ["room", 7]);
  await new Promise<void>((resolve) => (tx.oncomplete = () => resolve()));
  db.close();
}

describe("IdbSnapshotFile", () => {
  it("saves owner-only, skips an unchanged store, and loads what it saved", async () => {
    const factory = ensureIndexedDb();
    await seed(factory, "snap-a::crypto");
    const snapshot = new IdbSnapshotFile(join(folder, "a.idb"), "snap-a");
    expect(await snapshot.save()).toBe(true);
    expect(statSync(snapshot.path).mode & 0o777).toBe(0o600);
    expect(await snapshot.save()).toBe(false);

    // The same bytes under another store name, loaded into a fresh database.
    const data = readFileSync(snapshot.path);
    const { deserialize } = await import("node:v8");
    const file = deserialize(data) as { storeName: string; databases: { name: string }[] };
    file.storeName = "snap-b";
    for (const db of file.databases) db.name = db.name.replace("snap-a", "snap-b");
    writeFileSync(join(folder, "b.idb"), serialize(file));
    expect(await new IdbSnapshotFile(join(folder, "b.idb"), "snap-b").load()).toBe("loaded");
    const db = await done(
      factory.open("snap-b::crypto") as unknown as Req<{
        version: number;
        transaction(
          s: string[],
          m: string,
        ): {
          objectStore(n: string): {
            get(k: unknown): Req<unknown>;
            index(n: string): { get(k: unknown): Req<unknown> };
          };
        };
        close(): void;
      }>,
    );
    expect(db.version).toBe(3);
    const store = db.transaction(["sessions"], "readonly").objectStore("sessions");
    expect(await done(store.get(["room", 7]))).toEqual({ sender: "abc", key: new Uint8Array([1, 2, 3]) });
    expect(await done(store.index("by_sender").get("abc"))).toMatchObject({ sender: "abc" });
    db.close();
  });

  it("a missing file is 'missing'; a damaged or another store's file is an error", async () => {
    expect(await new IdbSnapshotFile(join(folder, "none.idb"), "snap-c").load()).toBe("missing");
    writeFileSync(join(folder, "bad.idb"), "not a snapshot");
    await expect(new IdbSnapshotFile(join(folder, "bad.idb"), "snap-d").load()).rejects.toThrow();
    writeFileSync(
      join(folder, "other.idb"),
      serialize({ format: "dagbot-idb-snapshot", version: 1, storeName: "someone-else", databases: [] }),
    );
    await expect(new IdbSnapshotFile(join(folder, "other.idb"), "snap-e").load()).rejects.toThrow(
      /someone-else/,
    );
  });
});
