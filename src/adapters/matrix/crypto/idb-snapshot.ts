/**
 * Keeps the WASM crypto's IndexedDB on disk. Node has no IndexedDB; fake-indexeddb provides one in
 * memory, and this file saves the databases of one store name (WASM makes `<name>::matrix-sdk-crypto`
 * and `<name>::matrix-sdk-crypto-meta`) to one file, and loads them back at start. Every record is
 * read in one read-only transaction per database, so a snapshot is consistent, and written with
 * v8.serialize (the structured clone IndexedDB itself uses: typed arrays, Maps, nested keys) to a
 * temporary file that is flushed and renamed over the old one, owner-only. The caller saves before
 * the sync position moves on (intake) and after each encryption; a crash in between replays the
 * batch, whose to-device messages the server delivers again.
 */
import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, writeSync } from "node:fs";
import { dirname } from "node:path";
import { deserialize, serialize } from "node:v8";
import * as fake from "fake-indexeddb";

// The part of the IndexedDB API used here (the project builds without the DOM typings).
type IDBValidKey = unknown;
interface IDBRequest<T> {
  result: T;
  error: unknown;
  onsuccess: (() => void) | null;
  onerror: (() => void) | null;
}
interface IDBOpenDBRequest extends IDBRequest<IDBDatabase> {
  onupgradeneeded: (() => void) | null;
}
interface IDBTransaction {
  error: unknown;
  objectStore(name: string): IDBObjectStore;
  oncomplete: (() => void) | null;
  onerror: (() => void) | null;
  onabort: (() => void) | null;
}
interface IDBIndex {
  keyPath: string | string[];
  unique: boolean;
  multiEntry: boolean;
}
interface IDBObjectStore {
  keyPath: string | string[] | null;
  autoIncrement: boolean;
  indexNames: Iterable<string>;
  index(name: string): IDBIndex;
  createIndex(
    name: string,
    keyPath: string | string[],
    options: { unique: boolean; multiEntry: boolean },
  ): unknown;
  getAll(): IDBRequest<unknown[]>;
  getAllKeys(): IDBRequest<IDBValidKey[]>;
  put(value: unknown, key?: IDBValidKey): unknown;
}
interface IDBDatabase {
  version: number;
  objectStoreNames: Iterable<string>;
  transaction(stores: string[], mode: "readonly" | "readwrite"): IDBTransaction;
  createObjectStore(
    name: string,
    options: { keyPath: string | string[] | null; autoIncrement: boolean },
  ): IDBObjectStore;
  close(): void;
}
export interface IDBFactory {
  open(name: string, version?: number): IDBOpenDBRequest;
  databases(): Promise<{ name?: string; version?: number }[]>;
  deleteDatabase(name: string): IDBRequest<unknown>;
}

interface IndexShape {
  name: string;
  keyPath: string | string[];
  unique: boolean;
  multiEntry: boolean;
}

interface StoreShape {
  name: string;
  keyPath: string | string[] | null;
  autoIncrement: boolean;
  indexes: IndexShape[];
  keys: IDBValidKey[];
  values: unknown[];
}

interface DatabaseShape {
  name: string;
  version: number;
  stores: StoreShape[];
}

interface SnapshotFile {
  format: "dagbot-idb-snapshot";
  version: 1;
  storeName: string;
  databases: DatabaseShape[];
}

/** Sets fake-indexeddb's globals once (the WASM store reads `indexedDB` and `IDBKeyRange` globally). */
export function ensureIndexedDb(): IDBFactory {
  const g = globalThis as unknown as Record<string, unknown>;
  if (g["indexedDB"] === undefined) {
    for (const [key, value] of Object.entries(fake)) {
      if (key !== "default" && g[key] === undefined) g[key] = value;
    }
  }
  return g["indexedDB"] as IDBFactory;
}

const failure = (e: unknown, what: string): Error => (e instanceof Error ? e : new Error(what));

const request = <T>(req: IDBRequest<T>): Promise<T> =>
  new Promise((resolve, reject) => {
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(failure(req.error, "IndexedDB request failed"));
  });

const done = (tx: IDBTransaction): Promise<void> =>
  new Promise((resolve, reject) => {
    tx.oncomplete = () => resolve();
    tx.onerror = () => reject(failure(tx.error, "IndexedDB transaction failed"));
    tx.onabort = () => reject(failure(tx.error, "IndexedDB transaction aborted"));
  });

async function dumpDatabase(factory: IDBFactory, name: string): Promise<DatabaseShape> {
  const db = await request(factory.open(name));
  try {
    const storeNames = [...db.objectStoreNames];
    const stores: StoreShape[] = [];
    if (storeNames.length > 0) {
      const tx = db.transaction(storeNames, "readonly");
      const reads = storeNames.map(async (storeName) => {
        const store = tx.objectStore(storeName);
        const [keys, values] = await Promise.all([request(store.getAllKeys()), request(store.getAll())]);
        stores.push({
          name: storeName,
          keyPath: store.keyPath,
          autoIncrement: store.autoIncrement,
          indexes: [...store.indexNames].map((indexName) => {
            const index = store.index(indexName);
            return {
              name: indexName,
              keyPath: index.keyPath,
              unique: index.unique,
              multiEntry: index.multiEntry,
            };
          }),
          keys,
          values,
        });
      });
      await Promise.all([...reads, done(tx)]);
      stores.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    }
    return { name, version: db.version, stores };
  } finally {
    db.close();
  }
}

async function restoreDatabase(factory: IDBFactory, shape: DatabaseShape): Promise<void> {
  const open = factory.open(shape.name, shape.version);
  open.onupgradeneeded = () => {
    const db = open.result;
    for (const s of shape.stores) {
      const store = db.createObjectStore(s.name, { keyPath: s.keyPath, autoIncrement: s.autoIncrement });
      for (const i of s.indexes)
        store.createIndex(i.name, i.keyPath, { unique: i.unique, multiEntry: i.multiEntry });
    }
  };
  const db = await request(open);
  try {
    if (shape.stores.length === 0) return;
    const tx = db.transaction(
      shape.stores.map((s) => s.name),
      "readwrite",
    );
    for (const s of shape.stores) {
      const store = tx.objectStore(s.name);
      s.values.forEach((value, i) => {
        if (s.keyPath === null) store.put(value, s.keys[i]);
        else store.put(value);
      });
    }
    await done(tx);
  } finally {
    db.close();
  }
}

export class IdbSnapshotFile {
  private lastWritten: Buffer | null = null;

  constructor(
    readonly path: string,
    readonly storeName: string,
  ) {}

  private async databaseNames(factory: IDBFactory): Promise<string[]> {
    const all = await factory.databases();
    return all
      .map((d) => d.name)
      .filter(
        (n): n is string => n !== undefined && (n === this.storeName || n.startsWith(`${this.storeName}::`)),
      )
      .sort();
  }

  /**
   * Loads the file into the (fresh) IndexedDB. "missing" when there is no file; throws when the file
   * exists but cannot be read or is not a snapshot of this store (never silently starts empty then).
   */
  async load(): Promise<"loaded" | "missing"> {
    const factory = ensureIndexedDb();
    let bytes: Buffer;
    try {
      bytes = readFileSync(this.path);
    } catch (e) {
      if ((e as { code?: unknown }).code === "ENOENT") return "missing";
      throw e;
    }
    const data = deserialize(bytes) as Partial<SnapshotFile> | null;
    if (data?.format !== "dagbot-idb-snapshot" || data.version !== 1 || !Array.isArray(data.databases)) {
      throw new Error(`${this.path} is not a dagbot crypto store snapshot`);
    }
    if (data.storeName !== this.storeName) {
      throw new Error(
        `${this.path} holds the crypto store "${String(data.storeName)}", not "${this.storeName}"`,
      );
    }
    if ((await this.databaseNames(factory)).length > 0) {
      throw new Error(`the crypto store "${this.storeName}" is already open in this process`);
    }
    for (const shape of data.databases) await restoreDatabase(factory, shape);
    this.lastWritten = bytes;
    return "loaded";
  }

  /** Writes the current databases; skipped when nothing changed since the last write. */
  async save(): Promise<boolean> {
    const factory = ensureIndexedDb();
    const databases: DatabaseShape[] = [];
    for (const name of await this.databaseNames(factory)) databases.push(await dumpDatabase(factory, name));
    const file: SnapshotFile = {
      format: "dagbot-idb-snapshot",
      version: 1,
      storeName: this.storeName,
      databases,
    };
    const bytes = serialize(file);
    if (this.lastWritten !== null && bytes.equals(this.lastWritten)) return false;
    mkdirSync(dirname(this.path), { recursive: true, mode: 0o700 });
    const tmp = `${this.path}.${process.pid}.tmp`;
    const fd = openSync(tmp, "w", 0o600);
    try {
      writeSync(fd, bytes);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, this.path);
    this.lastWritten = bytes;
    return true;
  }
}
