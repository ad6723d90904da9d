// The config's optional sections ([matrix], [http], [edge], [[webhooks]]) have their schemas built
// only when a file has them (src/config/node-config.ts, nodeConfigSchemaFor), and a file is checked
// exactly as with every section's schema: the same data, the same issues. Its one check a process
// compiles no parser (zod's fast path, a `new Function`).
import { describe, expect, it, vi } from "vitest";

const HASH = "a".repeat(64);
const matrix = {
  homeserver_url: "https://matrix.example.org",
  user_id: "@bot:example.org",
  access_token: "secret-token",
  rooms: ["!a:example.org"],
};
const http = { listen: "127.0.0.1:8080", tokens: [{ name: "ci", sha256: HASH, level: "read" }] };
const runConfig = {
  node_id: "floor",
  labels: ["linux"],
  capacity: 4,
  store: "sqlite:./dagbot.db",
  actions: { true: { argv: ["true"], timeout: "1m" } },
  limits: { global_cap: 8 },
};

/** node-config.ts and load-config.ts as a new process has them: no section built yet. */
async function fresh() {
  vi.resetModules();
  const config = await import("../../src/config/node-config.js");
  const load = await import("../../src/config/load-config.js");
  const built = () =>
    Object.entries(config.OPTIONAL_SECTIONS)
      .filter(([, schema]) => schema.built)
      .map(([key]) => key);
  return { ...config, ...load, built };
}

describe("the config's optional sections", () => {
  it("are not built for a file without them, as dagbot run's", async () => {
    const m = await fresh();
    expect(m.built()).toEqual([]);
    const r = m.parseConfig(runConfig, { env: {} });
    expect(r.ok).toBe(true);
    expect(r.ok && r.config.http).toBeNull();
    expect(r.ok && r.config.webhooks).toEqual([]);
    expect(m.built()).toEqual([]);
  });

  it("are built one by one, as a file has them", async () => {
    const m = await fresh();
    const r = m.parseConfig({ ...runConfig, matrix, http }, { env: {} });
    expect(r.ok && r.config.http?.listen).toBe("127.0.0.1:8080");
    expect(m.built().sort()).toEqual(["http", "matrix"]);
    // The whole file's schema (the reference's) builds them all.
    m.nodeConfigFileSchema();
    expect(m.built().sort()).toEqual(["edge", "http", "matrix", "webhooks"]);
  });

  it("check a file as the schema with every section does: its data or its issues", async () => {
    const m = await fresh();
    const docs: Record<string, unknown>[] = [
      runConfig,
      { ...runConfig, matrix },
      { ...runConfig, http },
      { ...runConfig, matrix, http, webhooks: [] },
      // Invalid: a section of the wrong type, a bad key in one, hooks without [http], an unknown key.
      { ...runConfig, http: "127.0.0.1:8080" },
      { ...runConfig, matrix: { ...matrix, homeserver_url: "ftp://x" } },
      { ...runConfig, webhooks: [{ id: "gh", dag: "d", kind: "github", secret_env: "S" }] },
      { ...runConfig, edge: { cores: [], token_file: "/t" } },
      { ...runConfig, htp: http },
      { ...runConfig, matrix: { ...matrix, command_window: "2d" }, retention: { finished: "1h" } },
    ];
    for (const doc of docs) {
      const partial = m.nodeConfigSchemaFor(doc).safeParse(doc);
      const whole = m.nodeConfigFileSchema().safeParse(doc);
      expect(partial.success, JSON.stringify(doc)).toBe(whole.success);
      if (whole.success) expect(partial.data).toEqual(whole.data);
      else expect(partial.error?.issues).toEqual(whole.error.issues);
    }
  });

  it("are checked without compiling zod's fast path, which one check a process would not repay", async () => {
    const m = await fresh();
    const compiled: string[] = [];
    const real = globalThis.Function;
    globalThis.Function = new Proxy(real, {
      construct(target, args: string[]) {
        if (/payload/.test(args.at(-1) ?? "")) compiled.push(args.at(-1)!);
        return Reflect.construct(target, args) as object;
      },
    });
    try {
      const r = m.parseConfig({ ...runConfig, matrix, http }, { env: {} });
      expect(r.ok).toBe(true);
      expect(compiled).toEqual([]);
      // The same schema, checked as zod would by default, does compile it: the spy sees it.
      m.nodeConfigFileSchema().safeParse({ ...runConfig, node_id: "n1" });
      expect(compiled.length).toBeGreaterThan(0);
    } finally {
      globalThis.Function = real;
    }
  });
});
