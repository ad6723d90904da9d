/** The node config loader: example configs, defaults, exact key paths for bad input, env precedence, redaction. */
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { formatConfigIssues, loadConfig, parseConfig } from "../../src/config/load-config.js";
import type { ConfigIssue, LoadConfigResult } from "../../src/config/load-config.js";
import type { NodeConfig } from "../../src/config/node-config.js";
import { nodeSecrets } from "../../src/config/node-secrets.js";
import { redactConfig } from "../../src/config/redact-config.js";

const root = fileURLToPath(new URL("../../", import.meta.url));
const fixture = (name: string) => `${root}test/fixtures/configs/${name}`;

function ok(result: LoadConfigResult): NodeConfig {
  if (!result.ok) throw new Error(`expected a valid config, got:\n${formatConfigIssues(result.issues)}`);
  return result.config;
}

function issues(result: LoadConfigResult): ConfigIssue[] {
  if (result.ok) throw new Error("expected the config to be refused");
  return result.issues;
}

/** Sorted "path: message" lines, so the assertion reads like the output a person sees. */
function lines(result: LoadConfigResult): string[] {
  return issues(result)
    .map((issue) => formatConfigIssues([issue]))
    .sort();
}

describe("example node configs", () => {
  const examples = readdirSync(`${root}config`).filter((name) => name.endsWith(".toml"));

  it("ships local, node-a/b/c and the bot example", () => {
    expect(examples.sort()).toEqual([
      "bot.example.toml",
      "local.toml",
      "node-a.toml",
      "node-b.toml",
      "node-c.toml",
    ]);
  });

  it.each(examples)("%s loads (with the token from the environment)", (name) => {
    const config = ok(
      loadConfig({ file: `${root}config/${name}`, env: { DAGBOT_ACCESS_TOKEN: "syt_from_env" } }),
    );
    for (const action of ["echo", "sleep", "true", "fail"])
      expect(Object.keys(config.actions)).toContain(action);
  });

  it("local.toml is an engine-only SQLite node with the demo actions", () => {
    const config = ok(loadConfig({ file: `${root}config/local.toml`, env: {} }));
    expect(config.matrix).toBeNull();
    expect(config.rooms).toEqual(["local"]);
    expect(config.store).toEqual({ kind: "sqlite", path: "./data/dagbot.db" });
    expect(config.actions.echo).toEqual({
      name: "echo",
      argv: ["echo", "{message}"],
      args: { message: { pattern: "[^\\r\\n]{0,200}", allowLeadingDash: false } },
      cwd: null,
      env: {},
      timeoutMs: 60_000,
      outputLimitBytes: 65_536,
      killGraceMs: 5_000,
      runAs: null,
    });
    expect(config.actions.sleep?.args.seconds?.pattern).toBe("[0-9]{1,3}(\\.[0-9]{1,3})?");
  });

  it("node-a/b/c share one store under different ids, and one of them has the storage label", () => {
    const nodes = ["node-a", "node-b", "node-c"].map((id) =>
      ok(loadConfig({ file: `${root}config/${id}.toml`, env: {} })),
    );
    expect(nodes.map((n) => n.nodeId)).toEqual(["node-a", "node-b", "node-c"]);
    expect(new Set(nodes.map((n) => JSON.stringify(n.store))).size).toBe(1);
    expect(nodes.filter((n) => n.labels.includes("storage")).map((n) => n.nodeId)).toEqual(["node-c"]);
  });

  it.each(["node-a", "node-b", "node-c"])(
    "docker/nodes/%s.toml (the compose fleet) loads with its env",
    (name) => {
      const config = ok(
        loadConfig({
          file: `${root}docker/nodes/${name}.toml`,
          env: { DAGBOT_ACCESS_TOKEN: "syt_env", DAGBOT_STORE: "postgres://dagbot:pw@postgres:5432/dagbot" },
        }),
      );
      expect(config.nodeId).toBe(name);
      expect(config.store.kind).toBe("postgres");
      expect(config.matrix?.homeserverUrl).toBe("http://synapse:8008");
    },
  );

  it("secrets may come from files named by DAGBOT_ACCESS_TOKEN_FILE and DAGBOT_STORE_FILE (container secrets)", () => {
    const dir = mkdtempSync(join(tmpdir(), "dagbot-secrets-"));
    try {
      const token = join(dir, "token");
      const store = join(dir, "store");
      writeFileSync(token, "tok_from_file\n", { mode: 0o600 });
      writeFileSync(store, "postgres://dagbot:pw@postgres:5432/dagbot\n", { mode: 0o600 });
      const file = `${root}docker/nodes/node-a.toml`;
      const config = ok(
        loadConfig({ file, env: { DAGBOT_ACCESS_TOKEN_FILE: token, DAGBOT_STORE_FILE: store } }),
      );
      expect(config.matrix?.accessToken).toBe("tok_from_file");
      expect(config.store).toEqual({ kind: "postgres", url: "postgres://dagbot:pw@postgres:5432/dagbot" });

      const both = lines(
        loadConfig({ file, env: { DAGBOT_ACCESS_TOKEN: "x", DAGBOT_ACCESS_TOKEN_FILE: token } }),
      );
      expect(both).toEqual([
        "DAGBOT_ACCESS_TOKEN_FILE: set DAGBOT_ACCESS_TOKEN or DAGBOT_ACCESS_TOKEN_FILE, not both",
      ]);
      const missing = lines(
        loadConfig({ file, env: { DAGBOT_ACCESS_TOKEN_FILE: join(dir, "nope"), DAGBOT_STORE_FILE: store } }),
      );
      expect(missing).toEqual([`DAGBOT_ACCESS_TOKEN_FILE: cannot read ${join(dir, "nope")}: no such file`]);
      // One reader, one rule: the environment's files are held to store_file's mode check.
      chmodSync(token, 0o644);
      const open = lines(
        loadConfig({ file, env: { DAGBOT_ACCESS_TOKEN_FILE: token, DAGBOT_STORE_FILE: store } }),
      );
      expect(open).toEqual([
        `DAGBOT_ACCESS_TOKEN_FILE: ${token} is readable or writable by group or others (mode 0644); run chmod 600 on it`,
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a container's secret mount (/run/secrets/) is read whatever its mode; a look-alike folder is not", () => {
    // Docker and swarm mount secrets root-owned 0444: the one exception of readPrivateFile's mode rule.
    // The test needs to write under /run (root in the container); a real mount, no fake.
    const hadSecrets = existsSync("/run/secrets");
    mkdirSync("/run/secrets", { recursive: true });
    const inside = mkdtempSync("/run/secrets/dagbot-test-");
    const lookalike = mkdtempSync("/run/secrets-dagbot-test-");
    try {
      const token = join(inside, "token");
      const store = join(inside, "store");
      writeFileSync(token, "tok_from_mount\n", { mode: 0o444 });
      writeFileSync(store, "postgres://dagbot:pw@postgres:5432/dagbot\n", { mode: 0o444 });
      chmodSync(token, 0o444);
      chmodSync(store, 0o444);
      const file = `${root}docker/nodes/node-a.toml`;
      const config = ok(
        loadConfig({ file, env: { DAGBOT_ACCESS_TOKEN_FILE: token, DAGBOT_STORE_FILE: store } }),
      );
      expect(config.matrix?.accessToken).toBe("tok_from_mount");
      expect(config.store).toEqual({ kind: "postgres", url: "postgres://dagbot:pw@postgres:5432/dagbot" });

      // The exception is the folder, not a name that starts like it.
      const outside = join(lookalike, "token");
      writeFileSync(outside, "tok\n", { mode: 0o444 });
      chmodSync(outside, 0o444);
      expect(
        lines(loadConfig({ file, env: { DAGBOT_ACCESS_TOKEN_FILE: outside, DAGBOT_STORE_FILE: store } })),
      ).toEqual([
        `DAGBOT_ACCESS_TOKEN_FILE: ${outside} is readable or writable by group or others (mode 0444); run chmod 600 on it`,
      ]);
    } finally {
      rmSync(inside, { recursive: true, force: true });
      rmSync(lookalike, { recursive: true, force: true });
      if (!hadSecrets) rmSync("/run/secrets", { recursive: true, force: true });
    }
  });

  it("bot.example.toml needs its token from the environment and holds no secret itself", () => {
    expect(lines(loadConfig({ file: `${root}config/bot.example.toml`, env: {} }))).toEqual([
      "matrix.access_token: required: set it here or in DAGBOT_ACCESS_TOKEN",
    ]);
    const config = ok(
      loadConfig({ file: `${root}config/bot.example.toml`, env: { DAGBOT_ACCESS_TOKEN: "syt_env" } }),
    );
    expect(config.matrix).toMatchObject({ accessToken: "syt_env", rooms: ["!ops-room-id:example.org"] });
    expect(config.rooms).toEqual(config.matrix?.rooms);
  });
});

describe("defaults", () => {
  it("fills every key when there is no file, taking the node id from the host name", () => {
    const config = ok(loadConfig({ env: {}, hostname: "Build Host_01.example" }));
    expect(config).toEqual({
      nodeId: "build-host_01.example",
      labels: [],
      capacity: 2,
      store: { kind: "sqlite", path: "./data/dagbot.db" },
      storePoolSize: 2,
      storePooler: "none",
      sqliteSynchronous: "full",
      storeMigrate: "when_alone",
      dagLibrary: null,
      matrix: null,
      rooms: ["local"],
      permissions: {
        powerLevel: 50,
        allow: [],
        twoPersonRule: false,
        autoConfirm: [],
        hookAutoConfirm: [],
        logs: "operators",
        stated: [],
      },
      actions: {},
      lease: {
        ttlMs: 10_000,
        renewEveryMs: 3_000,
        acquireEveryMs: 1_000,
        marginMs: 1_000,
        taskTtlMs: 60_000,
        taskMarginMs: 6_000,
      },
      limits: { globalCap: 16, confirmTimeoutMs: 3_600_000 },
      retention: {
        finishedMs: 7 * 86_400_000,
        nodeGoneAfterMs: 30_000,
        forgetNodesAfterMs: 86_400_000,
        forgetKeysAfterMs: 30 * 86_400_000,
      },
      http: null,
      edge: null,
      webhooks: [],
      logLevel: "info",
      stopGraceMs: 8_000,
    } satisfies NodeConfig);
  });

  it("reads every key of a full JSON config", () => {
    const config = ok(loadConfig({ file: fixture("full.json"), env: {} }));
    expect(config.store).toEqual({
      kind: "postgres",
      url: "postgres://dagbot:s3cret-pw@127.0.0.1:5432/dagbot?sslmode=disable&password=q-secret",
    });
    expect(config.matrix).toEqual({
      homeserverUrl: "https://matrix.example.org",
      userId: "@bot:example.org",
      accessToken: "fake-file-token-value",
      deviceId: "DEVICE1",
      rooms: ["!room:example.org"],
      commandWindowMs: 1_800_000,
      decryptGraceMs: 5_000,
      // Its own account is not repeated among the others.
      fleet: ["@bot-b:example.org"],
      encryption: false,
      recoveryKey: null,
    });
    expect(config.actions.upload).toMatchObject({
      cwd: "/var/backups",
      timeoutMs: 5_400_000,
      outputLimitBytes: 1_048_576,
      killGraceMs: 500,
    });
    expect(config.http).toEqual({
      listen: "127.0.0.1:8080",
      host: "127.0.0.1",
      port: 8080,
      tokens: [
        {
          name: "ci",
          sha256: "a69d4fe70e8e39237828217232ba8f622d2e99bd1afbb26ccade716f4897a3fb",
          level: "operate",
        },
      ],
      openHealth: true,
      openMetrics: true,
      bodyLimitBytes: 262_144,
      // The largest output_limit of its actions (upload's 1MiB): an edge's finish may carry that.
      edgeOutputLimitBytes: 1_048_576,
      sseBufferBytes: 1_048_576,
      commandTimeoutMs: 30_000,
      heartbeatMs: 15_000,
      maxStreams: 200,
      maxConnections: 512,
      headerTimeoutMs: 10_000,
      requestTimeoutMs: 30_000,
      keepAliveTimeoutMs: 5_000,
    });
    expect(config.permissions).toEqual({
      powerLevel: 75,
      allow: ["@alice:example.org"],
      twoPersonRule: true,
      autoConfirm: ["@bob:example.org"],
      hookAutoConfirm: [],
      logs: "anyone",
      stated: ["power_level", "allow", "two_person_rule", "auto_confirm", "logs"],
    });
    expect(config.lease).toEqual({
      ttlMs: 20_000,
      renewEveryMs: 5_000,
      acquireEveryMs: 2_000,
      marginMs: 2_000,
      taskTtlMs: 60_000,
      taskMarginMs: 6_000,
    });
    expect(config.limits).toEqual({ globalCap: 4, confirmTimeoutMs: 7_200_000 });
    expect(config.retention).toEqual({
      finishedMs: 3 * 86_400_000,
      nodeGoneAfterMs: 60_000,
      forgetNodesAfterMs: 2 * 86_400_000,
      forgetKeysAfterMs: 14 * 86_400_000,
    });
    expect(config.logLevel).toBe("debug");
  });
});

describe("bad config files name the key path", () => {
  it.each([
    [
      "unknown-keys.toml",
      [
        'actions.echo.agrv: unknown key (did you mean "argv"?)',
        "actions.echo.args.message.default: unknown key (expected one of pattern, allow_leading_dash)",
        "actions.echo.argv: required",
        'lease.tll: unknown key (did you mean "ttl"?)',
        'storee: unknown key (did you mean "store"?)',
      ],
    ],
    [
      "unknown-key.json",
      ['matrix.homeserver: unknown key (did you mean "homeserver_url"?)', "matrix.homeserver_url: required"],
    ],
    [
      "wrong-types.toml",
      [
        "capacity: expected a number, got a string",
        "labels: expected an array, got a string",
        "permissions.two_person_rule: expected a boolean, got a string",
      ],
    ],
    [
      "bad-store.toml",
      ['store: must be "sqlite:PATH" (like "sqlite:./data/dagbot.db") or a postgres:// URL'],
    ],
    ["action-without-argv.toml", ["actions.pg_dump.argv: required"]],
    [
      "bad-regex.toml",
      [
        "actions.grep.args.word.pattern: is not a valid regular expression (RE2 syntax, matched in linear time: no backreferences or lookaround): missing closing ]: `[a-z`",
      ],
    ],
    [
      "bad-duration.toml",
      [
        'actions.sleep.kill_grace: expected a duration string like "30s", got a number',
        'actions.sleep.timeout: is not a duration; use a number and a unit like "500ms", "30s", "10m" or "1h"',
      ],
    ],
    ["renew-not-shorter.toml", ["lease.renew_every: must be shorter than lease.ttl"]],
    [
      "retention-too-short.toml",
      [
        "retention.finished: must be at least matrix.command_window plus 1h (180m here): a command forgotten sooner could be handled twice",
        "retention.forget_nodes_after: must be at least retention.node_gone_after",
        "retention.idempotency_keys: must be at least retention.finished (a key must outlive the command it answered)",
        "retention.node_gone_after: must be longer than two heartbeats (2 × lease.renew_every)",
      ],
    ],
  ])("%s", (name, expected) => {
    expect(lines(loadConfig({ file: fixture(name), env: {} }))).toEqual([...expected].sort());
  });

  it("never echoes a store string, which may carry a password", () => {
    const result = loadConfig({ file: fixture("bad-store.toml"), env: {} });
    expect(JSON.stringify(issues(result))).not.toContain("hunter2");
  });

  it("reports unreadable, unparsable and misnamed files as a whole", () => {
    expect(issues(loadConfig({ file: fixture("broken-syntax.toml"), env: {} }))).toEqual([
      {
        path: "",
        message: `config file "${fixture("broken-syntax.toml")}" is not valid TOML at line 3, column 1: invalid value`,
      },
    ]);
    expect(issues(loadConfig({ file: fixture("missing.toml"), env: {} }))[0]?.message).toBe(
      `cannot read config file "${fixture("missing.toml")}": no such file`,
    );
    expect(issues(loadConfig({ file: `${root}package.json.bak.yaml`, env: {} }))[0]?.message).toContain(
      "must end in .toml or .json",
    );
  });
});

describe("bad values in place", () => {
  const base = { node_id: "n1" };
  const check = (doc: Record<string, unknown>) => lines(parseConfig({ ...base, ...doc }, { env: {} }));
  const action = (extra: Record<string, unknown>) => ({ actions: { a: { argv: ["prog"], ...extra } } });

  it.each<[string, Record<string, unknown>, string[]]>([
    ["empty argv", action({ argv: [] }), ["actions.a.argv: must name the program to run"]],
    [
      "a placeholder as the program",
      action({ argv: ["{prog}"], args: { prog: { pattern: "[a-z]+" } } }),
      ["actions.a.argv[0]: must be the program itself: it cannot be empty or come from a placeholder"],
    ],
    [
      "an undeclared placeholder",
      action({ argv: ["echo", "--db={db}"] }),
      ["actions.a.argv[1]: placeholder {db} is not declared in args"],
    ],
    [
      "an unused argument",
      action({ args: { db: { pattern: "[a-z]+" } } }),
      ["actions.a.args.db: is not used: no {db} in argv"],
    ],
    [
      "a pattern that escapes its anchors",
      action({ argv: ["echo", "{v}"], args: { v: { pattern: "[a-z]+)|(.*" } } }),
      [
        "actions.a.args.v.pattern: is not a valid regular expression (RE2 syntax, matched in linear time: no backreferences or lookaround): unexpected ): `[a-z]+)|(.*`",
      ],
    ],
    [
      "DAGBOT_ in action env",
      action({ env: { DAGBOT_RUN_ID: "x" } }),
      ["actions.a.env.DAGBOT_RUN_ID: DAGBOT_* variables are set by dagbot itself"],
    ],
    [
      "a bad output limit",
      action({ output_limit: "lots" }),
      ['actions.a.output_limit: is not a size; use bytes (65536) or a unit like "64KiB" or "1MiB"'],
    ],
    [
      "a too large output limit",
      action({ output_limit: "1GiB" }),
      ["actions.a.output_limit: must be at most 64MiB"],
    ],
    ["a zero timeout", action({ timeout: "0s" }), ["actions.a.timeout: must be longer than 0"]],
    [
      "a bad action name",
      { actions: { "bad name": { argv: ["x"] } } },
      ['actions["bad name"]: is not a valid name: action names use 1-64 letters, digits, "_", "." or "-"'],
    ],
    ["capacity 0", { capacity: 0 }, ["capacity: must be at least 1"]],
    ["store_pool_size 0", { store_pool_size: 0 }, ["store_pool_size: must be at least 1"]],
    ["store_pool_size 101", { store_pool_size: 101 }, ["store_pool_size: must be at most 100"]],
    [
      "an unknown sqlite_synchronous",
      { sqlite_synchronous: "off" },
      ['sqlite_synchronous: must be one of "full", "normal"'],
    ],
    ["capacity 1.5", { capacity: 1.5 }, ["capacity: expected an integer, got a number (1.5)"]],
    ["a duplicate label", { labels: ["a", "a"] }, ['labels[1]: duplicate entry "a"']],
    [
      "a bad log level",
      { log_level: "loud" },
      ['log_level: must be one of "fatal", "error", "warn", "info", "debug", "trace", "silent"'],
    ],
    ["a bad node id", { node_id: "has space" }, ['node_id: use 1-64 letters, digits, "_", "." or "-"']],
    [
      "renew longer than ttl",
      { lease: { ttl: "2s", renew_every: "3s" } },
      ["lease.renew_every: must be shorter than lease.ttl"],
    ],
    [
      "renew plus margin not shorter than ttl",
      { lease: { ttl: "2s", renew_every: "1s", margin: "1s" } },
      ["lease.margin: lease.renew_every + lease.margin must be shorter than lease.ttl"],
    ],
    [
      "renew plus task margin not shorter than the task lease",
      { lease: { ttl: "10s", renew_every: "3s", task_ttl: "5s", task_margin: "2s" } },
      ["lease.task_ttl: lease.renew_every + lease.task_margin must be shorter than lease.task_ttl"],
    ],
    [
      "a kill_grace that leaves no time to renew a task's lease (the default 5s under a 2s ttl)",
      {
        lease: { ttl: "2s", renew_every: "500ms", task_ttl: "2s" },
        actions: { a: { argv: ["prog"] }, b: { argv: ["prog"], kill_grace: "1s" } },
      },
      [
        "actions.a.kill_grace: 5s is too long for the task lease: lease.renew_every (500ms) + lease.task_margin (200ms) + kill_grace must be shorter than lease.task_ttl (2s), so that a renewal can succeed before the worker must start stopping the action; shorten kill_grace, lease.renew_every or lease.task_margin, or lengthen lease.task_ttl",
      ],
    ],
    [
      "a kill_grace exactly filling the task lease",
      {
        lease: { ttl: "10s", renew_every: "3s", task_ttl: "10s", task_margin: "2s" },
        actions: { a: { argv: ["prog"], kill_grace: "5s" } },
      },
      [
        "actions.a.kill_grace: 5s is too long for the task lease: lease.renew_every (3s) + lease.task_margin (2s) + kill_grace must be shorter than lease.task_ttl (10s), so that a renewal can succeed before the worker must start stopping the action; shorten kill_grace, lease.renew_every or lease.task_margin, or lengthen lease.task_ttl",
      ],
    ],
    [
      "an empty sqlite path",
      { store: "sqlite:" },
      [
        'store: sqlite: needs a file path; use "sqlite:PATH" (like "sqlite:./data/dagbot.db") or a postgres://user@host/db URL',
      ],
    ],
    [
      "an http token given in clear instead of its hash",
      {
        http: {
          listen: "127.0.0.1:8080",
          tokens: [{ name: "ci", sha256: "http-token-0123456789abcdef", level: "read" }],
        },
      },
      [
        "http.tokens[0].sha256: must be the token's SHA-256 as 64 lower-case hex digits (printf %s TOKEN | sha256sum)",
      ],
    ],
    [
      "an http token level that does not exist",
      {
        http: {
          listen: "127.0.0.1:8080",
          tokens: [
            {
              name: "ci",
              sha256: "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
              level: "admin",
            },
          ],
        },
      },
      ['http.tokens[0].level: must be "read", "operate" or "edge"'],
    ],
    [
      "a bad listen address",
      {
        http: {
          listen: "8080",
          tokens: [
            {
              name: "ci",
              sha256: "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
              level: "read",
            },
          ],
        },
      },
      ['http.listen: must be HOST:PORT, like "127.0.0.1:8080"'],
    ],
    [
      "a port above 65535",
      {
        http: {
          listen: "127.0.0.1:70000",
          tokens: [
            {
              name: "ci",
              sha256: "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
              level: "read",
            },
          ],
        },
      },
      ["http.listen: the port must be at most 65535"],
    ],
    [
      "a matrix section with bad ids",
      { matrix: { homeserver_url: "ftp://x", user_id: "bot", access_token: "t", rooms: ["#alias:x"] } },
      [
        'matrix.homeserver_url: must be an http(s) URL like "https://matrix.example.org"',
        'matrix.rooms[0]: must be a Matrix room id like "!abc123:example.org"',
        'matrix.user_id: must be a Matrix user id like "@alice:example.org"',
      ],
    ],
    [
      "a reserved key",
      JSON.parse('{"actions": {"__proto__": {"argv": ["x"]}}}'),
      ["actions.__proto__: is a reserved name"],
    ],
  ])("%s", (_label, doc, expected) => {
    expect(check(doc)).toEqual([...expected].sort());
  });

  it("parses an IPv6 listen address", () => {
    const config = ok(
      parseConfig(
        {
          ...base,
          http: { listen: "[::1]:9000", tokens: [{ name: "ci", sha256: "b".repeat(64), level: "read" }] },
        },
        { env: {} },
      ),
    );
    expect(config.http).toMatchObject({ host: "::1", port: 9000 });
  });

  it("refuses a document that is not a table", () => {
    expect(issues(parseConfig([1, 2], { env: {} }))).toEqual([
      { path: "", message: "the config must be a table of settings" },
    ]);
  });
});

describe("environment and command-line overrides", () => {
  const file = fixture("full.json");

  it("env wins over the file, and the command line wins over both", () => {
    const env = {
      DAGBOT_STORE: "sqlite:/tmp/env.db",
      DAGBOT_NODE_ID: "env-node",
      DAGBOT_LOG_LEVEL: "warn",
      DAGBOT_ACCESS_TOKEN: "syt_env_token",
    };
    const fromEnv = ok(loadConfig({ file, env }));
    expect(fromEnv.store).toEqual({ kind: "sqlite", path: "/tmp/env.db" });
    expect(fromEnv.nodeId).toBe("env-node");
    expect(fromEnv.logLevel).toBe("warn");
    expect(fromEnv.matrix?.accessToken).toBe("syt_env_token");

    const fromArgs = ok(
      loadConfig({
        file,
        env,
        overrides: {
          store: "sqlite:/tmp/args.db",
          nodeId: "args-node",
          logLevel: "error",
          capacity: 7,
          labels: ["x"],
        },
      }),
    );
    expect(fromArgs.store).toEqual({ kind: "sqlite", path: "/tmp/args.db" });
    expect(fromArgs.nodeId).toBe("args-node");
    expect(fromArgs.logLevel).toBe("error");
    expect(fromArgs.capacity).toBe(7);
    expect(fromArgs.labels).toEqual(["x"]);
    expect(fromArgs.matrix?.accessToken).toBe("syt_env_token");
  });

  it("ignores empty environment variables", () => {
    const config = ok(loadConfig({ file, env: { DAGBOT_STORE: "", DAGBOT_ACCESS_TOKEN: "" } }));
    expect(config.store.kind).toBe("postgres");
    expect(config.matrix?.accessToken).toBe("fake-file-token-value");
  });

  it("does not invent a matrix section from DAGBOT_ACCESS_TOKEN alone", () => {
    const config = ok(loadConfig({ env: { DAGBOT_ACCESS_TOKEN: "syt_x" }, hostname: "h" }));
    expect(config.matrix).toBeNull();
  });

  it("says where a bad overriding value came from", () => {
    expect(lines(loadConfig({ file, env: { DAGBOT_STORE: "nonsense" } }))).toEqual([
      'store: must be "sqlite:PATH" (like "sqlite:./data/dagbot.db") or a postgres:// URL (set by DAGBOT_STORE)',
    ]);
    expect(lines(loadConfig({ file, env: {}, overrides: { capacity: 0 } }))).toEqual([
      "capacity: must be at least 1 (set by the command line)",
    ]);
  });
});

describe("redactConfig", () => {
  it("removes every secret and leaves the rest", () => {
    const config = ok(loadConfig({ file: fixture("full.json"), env: {} }));
    const redacted = redactConfig(config);
    const text = JSON.stringify(redacted);
    for (const secret of [
      "fake-file-token-value",
      "s3cret-pw",
      "q-secret",
      "http-token-0123456789abcdef",
      "aws-secret-value",
    ]) {
      expect(text).not.toContain(secret);
    }
    expect(redacted.matrix?.accessToken).toBe("[redacted]");
    expect(redacted.store).toEqual({
      kind: "postgres",
      url: "postgres://dagbot:[redacted]@127.0.0.1:5432/dagbot?sslmode=disable&password=[redacted]",
    });
    expect(redacted.http?.tokens).toEqual([{ name: "ci", sha256: "[redacted]", level: "operate" }]);
    expect(redacted.actions.upload?.env).toEqual({ AWS_SECRET_ACCESS_KEY: "[redacted]" });
    expect(redacted.nodeId).toBe("json-node");
    // The original stays usable.
    expect(config.matrix?.accessToken).toBe("fake-file-token-value");
  });

  it("reads the recovery key from matrix.recovery_key_file or DAGBOT_RECOVERY_KEY[_FILE], redacts and masks it", () => {
    const dir = mkdtempSync(join(tmpdir(), "dagbot-recovery-"));
    try {
      const key = "EsTD RwHE qzSK vWVe RVqi tTSc PDrx 8Wca RhsE Qe2b TG1f qds6";
      const keyFile = join(dir, "recovery-key");
      writeFileSync(keyFile, `${key}\n`, { mode: 0o600 });
      const matrix = {
        homeserver_url: "http://127.0.0.1:8008",
        user_id: "@dagbot:example.org",
        access_token: "fake-token-value",
        rooms: ["!r:example.org"],
      };
      const fromFile = ok(
        parseConfig({ node_id: "n1", matrix: { ...matrix, recovery_key_file: keyFile } }, { env: {} }),
      );
      expect(fromFile.matrix?.recoveryKey).toBe(key);
      expect(JSON.stringify(redactConfig(fromFile))).not.toContain("qzSK");
      expect(nodeSecrets(fromFile, {})).toEqual(expect.arrayContaining([key, key.replace(/ /g, "")]));
      const fromEnvFile = ok(
        parseConfig({ node_id: "n1", matrix }, { env: { DAGBOT_RECOVERY_KEY_FILE: keyFile } }),
      );
      expect(fromEnvFile.matrix?.recoveryKey).toBe(key);
      expect(ok(parseConfig({ node_id: "n1", matrix }, { env: {} })).matrix?.recoveryKey).toBeNull();
      chmodSync(keyFile, 0o644);
      expect(
        lines(parseConfig({ node_id: "n1", matrix: { ...matrix, recovery_key_file: keyFile } }, { env: {} })),
      ).toEqual([
        `matrix.recovery_key_file: ${keyFile} is readable or writable by group or others (mode 0644); run chmod 600 on it`,
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("redacts a token that came from the environment", () => {
    const config = ok(
      loadConfig({ file: fixture("full.json"), env: { DAGBOT_ACCESS_TOKEN: "fake-env-only-789" } }),
    );
    expect(JSON.stringify(redactConfig(config))).not.toContain("fake-env-only-789");
  });
});
