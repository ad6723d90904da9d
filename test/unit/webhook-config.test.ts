// [[webhooks]] in the node config: the schema's checks, the secret read from an owner-only file or
// an environment variable (never from the config itself), redaction, masking and the environment
// variables the node takes out of its own environment.
import { randomBytes } from "node:crypto";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { LoadConfigResult } from "../../src/config/load-config.js";
import { parseConfig } from "../../src/config/load-config.js";
import type { NodeConfig } from "../../src/config/node-config.js";
import { consumedSecretEnv, nodeSecrets } from "../../src/config/node-secrets.js";
import { redactConfig } from "../../src/config/redact-config.js";

const dir = mkdtempSync(join(tmpdir(), "dagbot-hook-config-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const secret = randomBytes(32).toString("hex");
const secretFile = join(dir, "hook.secret");
writeFileSync(secretFile, `${secret}\n`);
chmodSync(secretFile, 0o600);

const http = { listen: "127.0.0.1:0", tokens: [{ name: "ops", sha256: "0".repeat(64), level: "operate" }] };

function load(
  webhooks: unknown[],
  env: Record<string, string> = {},
  more: Record<string, unknown> = {},
): LoadConfigResult {
  return parseConfig({ node_id: "n1", http, webhooks, ...more }, { env });
}

function ok(result: LoadConfigResult): NodeConfig {
  if (!result.ok) throw new Error(JSON.stringify(result.issues));
  return result.config;
}

const messages = (result: LoadConfigResult): string[] =>
  result.ok ? [] : result.issues.map((i) => `${i.path}: ${i.message}`);

describe("[[webhooks]]", () => {
  it("reads the secret from an owner-only file or a variable, and keeps it out of logs and output", () => {
    const config = ok(
      load(
        [
          {
            id: "tags",
            dag: "release",
            kind: "github",
            secret_file: secretFile,
            params: { tag: "/ref" },
            filter: [{ pointer: "/ref", pattern: "refs/tags/.*" }],
            events: ["push"],
          },
          { id: "alerts", dag: "page", kind: "hmac", secret_env: "HOOK_SECRET", timestamp_header: "X-Time" },
        ],
        { HOOK_SECRET: `env-${secret}` },
      ),
    );
    const [tags, alerts] = config.webhooks;
    expect(tags).toMatchObject({
      id: "tags",
      room: "local",
      dag: "release",
      kind: "github",
      params: { tag: "/ref" },
      filters: [{ pointer: "/ref", pattern: "refs/tags/.*" }],
      events: ["push"],
      bodyLimitBytes: 1024 * 1024,
      secret,
    });
    expect(alerts).toMatchObject({
      secret: `env-${secret}`,
      timestampHeader: "x-time",
      replayWindowMs: 300_000,
    });
    const redacted = JSON.stringify(redactConfig(config));
    expect(redacted).not.toContain(secret);
    expect(redacted).toContain("[redacted]");
    // Masked in every task's output, and the variable leaves the node's environment.
    expect(nodeSecrets(config, {})).toEqual(expect.arrayContaining([secret, `env-${secret}`]));
    expect(consumedSecretEnv(config)).toContain("HOOK_SECRET");
  });

  it("refuses a secret in no place, in two, missing, readable by others or too short, naming where", () => {
    const base = { id: "h", dag: "d", kind: "github" };
    expect(messages(load([base]))).toEqual([
      "webhooks[0].secret_file: set secret_file or secret_env (one of them)",
    ]);
    expect(messages(load([{ ...base, secret_file: secretFile, secret_env: "X" }]))[0]).toMatch(/one of them/);
    expect(messages(load([{ ...base, secret: secret }]))[0]).toMatch(/^webhooks\[0\]\.secret:/);
    expect(messages(load([{ ...base, secret_env: "NOPE" }]))).toEqual([
      "webhooks[0].secret_env: the environment variable NOPE is not set",
    ]);
    expect(messages(load([{ ...base, secret_env: "SHORT" }], { SHORT: "abc" }))[0]).toMatch(
      /shorter than 16/,
    );
    const open = join(dir, "open.secret");
    writeFileSync(open, secret);
    chmodSync(open, 0o644);
    const opened = messages(load([{ ...base, secret_file: open }]));
    expect(opened[0]).toMatch(/^webhooks\[0\]\.secret_file: .*chmod 600/);
    expect(opened.join()).not.toContain(secret);
  });

  it("checks ids, rooms, pointers, patterns and the HTTP API", () => {
    const hook = { id: "h", dag: "d", kind: "gitlab", secret_file: secretFile };
    expect(messages(load([hook, hook]))).toEqual(["webhooks[1].id: is used twice"]);
    expect(messages(load([{ ...hook, room: "elsewhere" }]))[0]).toMatch(
      /^webhooks\[0\]\.room: is not one of this node's rooms/,
    );
    expect(messages(load([{ ...hook, params: { tag: "ref" } }]))[0]).toMatch(
      /^webhooks\[0\]\.params\.tag: must be a JSON pointer/,
    );
    expect(messages(load([{ ...hook, filter: [{ pointer: "/ref", pattern: "(a" }] }]))[0]).toMatch(
      /^webhooks\[0\]\.filter\[0\]\.pattern: is not a usable RE2 pattern/,
    );
    expect(messages(load([{ ...hook, kind: "svn" }]))[0]).toMatch(/^webhooks\[0\]\.kind:/);
    expect(messages(load([{ ...hook, sign: "x" }]))[0]).toMatch(/^webhooks\[0\]\.sign:/);
    expect(messages(parseConfig({ node_id: "n1", webhooks: [hook] }, { env: {} }))[0]).toMatch(
      /^webhooks\[0\]: needs an \[http\] section/,
    );
  });

  it("hook_auto_confirm is a permission of its own", () => {
    const config = ok(load([], {}, { permissions: { hook_auto_confirm: ["tags"] } }));
    expect(config.permissions.hookAutoConfirm).toEqual(["tags"]);
    expect(config.permissions.stated).toContain("hook_auto_confirm");
  });
});
