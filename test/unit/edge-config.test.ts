// [edge] in the node config (docs/operations.md, "Edge nodes"): the cores, the token read from an
// owner-only file (never from the config itself), no store, no chat or HTTP API, redaction and
// masking; and the edge token level of [[http.tokens]], bound to one node id.
import { randomBytes } from "node:crypto";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { LoadConfigResult } from "../../src/config/load-config.js";
import { parseConfig } from "../../src/config/load-config.js";
import type { NodeConfig } from "../../src/config/node-config.js";
import { nodeSecrets } from "../../src/config/node-secrets.js";
import { redactConfig } from "../../src/config/redact-config.js";
import { resolveConfig } from "../../src/composition/config-resolve.js";

const dir = mkdtempSync(join(tmpdir(), "dagbot-edge-config-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const token = randomBytes(24).toString("hex");
const tokenFile = join(dir, "edge.token");
writeFileSync(tokenFile, `${token}\n`);
chmodSync(tokenFile, 0o600);

const edge = { cores: ["http://10.0.0.1:8080/", "https://core-2.example.org"], token_file: tokenFile };

function ok(result: LoadConfigResult): NodeConfig {
  if (!result.ok) throw new Error(JSON.stringify(result.issues));
  return result.config;
}
const messages = (result: LoadConfigResult): string[] =>
  result.ok ? [] : result.issues.map((i) => `${i.path}: ${i.message}`);

describe("[edge]", () => {
  it("reads the cores and the token from its file; the token is masked and redacted", () => {
    const config = ok(parseConfig({ node_id: "edge-1", edge }, { env: {} }));
    expect(config.edge).toEqual({
      cores: ["http://10.0.0.1:8080", "https://core-2.example.org"],
      tokenFile,
      token,
      requestTimeoutMs: 10_000,
    });
    expect(config.rooms).toEqual(["local"]);
    expect(nodeSecrets(config, {})).toContain(token);
    expect(JSON.stringify(redactConfig(config))).not.toContain(token);
    expect(config.http).toBeNull();
  });

  it("refuses a store, a chat, an HTTP API, a token file others may read, no cores", () => {
    expect(messages(parseConfig({ node_id: "e", edge, store: "sqlite:./x.db" }, { env: {} }))).toEqual([
      "store: an edge node holds no store connection: leave store out",
    ]);
    expect(
      messages(parseConfig({ node_id: "e", edge }, { env: { DAGBOT_STORE: "sqlite:./x.db" } }))[0],
    ).toContain("DAGBOT_STORE");
    const withHttp = parseConfig(
      {
        node_id: "e",
        edge,
        http: { listen: "127.0.0.1:0", tokens: [{ name: "o", sha256: "0".repeat(64), level: "operate" }] },
      },
      { env: {} },
    );
    expect(messages(withHttp).join("\n")).toContain("http: an edge node holds no store");
    const open = join(dir, "open.token");
    writeFileSync(open, token);
    chmodSync(open, 0o644);
    expect(
      messages(parseConfig({ node_id: "e", edge: { ...edge, token_file: open } }, { env: {} }))[0],
    ).toMatch(/^edge\.token_file: .*chmod 600/);
    expect(messages(parseConfig({ node_id: "e", edge: { ...edge, cores: [] } }, { env: {} }))[0]).toContain(
      "edge.cores",
    );
    expect(
      messages(
        parseConfig({ node_id: "e", edge: { ...edge, cores: ["file:///etc/passwd"] } }, { env: {} }),
      )[0],
    ).toContain("http(s) URL");
  });
});

describe("edge tokens in [[http.tokens]]", () => {
  const http = (t: Record<string, unknown>) => ({
    node_id: "core-1",
    http: { listen: "127.0.0.1:0", tokens: [t] },
  });
  it("an edge token names its node; no other level does", () => {
    const config = ok(
      parseConfig(http({ name: "e1", sha256: "1".repeat(64), level: "edge", node: "edge-1" }), { env: {} }),
    );
    expect(config.http?.tokens).toEqual([
      { name: "e1", sha256: "1".repeat(64), level: "edge", node: "edge-1" },
    ]);
    expect(
      messages(parseConfig(http({ name: "e1", sha256: "1".repeat(64), level: "edge" }), { env: {} })),
    ).toEqual(['http.tokens[0].node: required with level = "edge"']);
    expect(
      messages(
        parseConfig(http({ name: "o", sha256: "1".repeat(64), level: "operate", node: "edge-1" }), {
          env: {},
        }),
      ),
    ).toEqual(["http.tokens[0].node: only an edge token names a node"]);
  });
  it("an edge token may be kept to labels and actions; no other level names them", () => {
    const scoped = { name: "e1", sha256: "1".repeat(64), level: "edge", node: "edge-1" };
    const config = ok(parseConfig(http({ ...scoped, labels: ["gpu"], actions: [] }), { env: {} }));
    expect(config.http?.tokens[0]).toEqual({ ...scoped, labels: ["gpu"], actions: [] });
    expect(
      messages(
        parseConfig(http({ name: "r", sha256: "1".repeat(64), level: "read", labels: ["gpu"] }), {
          env: {},
        }),
      ),
    ).toEqual(["http.tokens[0].labels: only an edge token names labels"]);
    expect(messages(parseConfig(http({ ...scoped, actions: ["train", "train"] }), { env: {} }))[0]).toContain(
      "http.tokens[0].actions[1]",
    );
  });
});

describe("http.edge_output_limit", () => {
  const core = (extra: Record<string, unknown>) => ({
    node_id: "core-1",
    http: {
      listen: "127.0.0.1:0",
      tokens: [{ name: "e1", sha256: "1".repeat(64), level: "edge", node: "edge-1" }],
      ...extra,
    },
  });
  it("defaults to the largest output_limit of the node's actions, at least 64KiB; may be set", () => {
    expect(ok(parseConfig(core({}), { env: {} })).http?.edgeOutputLimitBytes).toBe(65_536);
    const actions = {
      small: { argv: ["true"], output_limit: "1KiB" },
      big: { argv: ["true"], output_limit: "2MiB" },
    };
    expect(ok(parseConfig({ ...core({}), actions }, { env: {} })).http?.edgeOutputLimitBytes).toBe(
      2 * 1024 * 1024,
    );
    expect(ok(parseConfig(core({ edge_output_limit: "8MiB" }), { env: {} })).http?.edgeOutputLimitBytes).toBe(
      8 * 1024 * 1024,
    );
    expect(messages(parseConfig(core({ edge_output_limit: "65MiB" }), { env: {} }))).toEqual([
      "http.edge_output_limit: must be at most 64MiB",
    ]);
  });
});

describe("commands given an edge node's config", () => {
  it("only `dagbot node` runs it; any other command is told it names no store", () => {
    const file = join(dir, "edge.toml");
    writeFileSync(
      file,
      `node_id = "edge-1"\n[edge]\ncores = ["http://127.0.0.1:1"]\ntoken_file = ${JSON.stringify(tokenFile)}\n`,
    );
    expect(resolveConfig({ config: file }, {}, { edge: true }).edge?.cores).toEqual(["http://127.0.0.1:1"]);
    expect(() => resolveConfig({ config: file }, {}, { storeOnly: true })).toThrow(
      /is an edge node's \(\[edge\]\): it names no store, and only 'dagbot node' runs it/,
    );
  });
});
