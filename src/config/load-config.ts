/**
 * Loads a node config: the file (TOML or JSON), then environment variables, then command-line
 * overrides (args > env > file), validated in one pass with every problem named by its key path.
 */
import { readFileSync, statSync } from "node:fs";
import { hostname as osHostname } from "node:os";
import { extname, resolve } from "node:path";
import { parse as parseToml } from "smol-toml";
import type * as z from "zod";
import { knownKeysAt, nodeConfigSchemaFor, resolveRunAs, toNodeConfig } from "./node-config.js";
import type { NodeConfig } from "./node-config.js";

export interface ConfigIssue {
  /** The key path, like `actions.pg_dump.argv` or `lease.renew_every`; "" for the file as a whole. */
  path: string;
  message: string;
}

export type LoadConfigResult = { ok: true; config: NodeConfig } | { ok: false; issues: ConfigIssue[] };

/** Command-line values, which win over the environment and the file. */
export interface ConfigOverrides {
  store?: string;
  nodeId?: string;
  logLevel?: string;
  capacity?: number;
  labels?: string[];
}

export interface LoadConfigOptions {
  /** A .toml or .json file; without one, every key takes its default. */
  file?: string;
  env: Readonly<Record<string, string | undefined>>;
  overrides?: ConfigOverrides;
  /** Where the default node_id comes from; os.hostname() when absent. */
  hostname?: string;
  /**
   * False for commands that use only the store (status, nodes, submit, ...): a [matrix] section
   * without an access token is then accepted, and its token reads TOKEN_NOT_LOADED.
   */
  needsMatrixToken?: boolean;
}

/** The access token of a config loaded for a command that never talks to the homeserver. */
export const TOKEN_NOT_LOADED = "(not loaded: this command uses only the store)";

/** The environment variables the loader reads, for `--help` texts and docs/configuration.md. */
export const CONFIG_ENV_VARS = [
  { name: "DAGBOT_STORE", key: "store", description: 'store location: "sqlite:PATH" or a postgres:// URL' },
  { name: "DAGBOT_ACCESS_TOKEN", key: "matrix.access_token", description: "Matrix access token (secret)" },
  {
    name: "DAGBOT_RECOVERY_KEY",
    key: "matrix.recovery_key",
    description: "the bot account's recovery key, to cross-sign this node's device (secret)",
  },
  { name: "DAGBOT_NODE_ID", key: "node_id", description: "this node's id (default: from the hostname)" },
  {
    name: "DAGBOT_LOG_LEVEL",
    key: "log_level",
    description: "fatal, error, warn, info, debug, trace or silent",
  },
] as const;

/** The secrets that may also come from a file named by `<NAME>_FILE` (e.g. /run/secrets/...). */
export const SECRET_FILE_VARS = ["DAGBOT_STORE", "DAGBOT_ACCESS_TOKEN", "DAGBOT_RECOVERY_KEY"] as const;

/** One paragraph for `--help`: where values come from and which wins. */
export const CONFIG_PRECEDENCE_HELP =
  "Settings come from the config file, then environment variables, then command-line options; " +
  "later ones win (args > env > file). Environment: " +
  CONFIG_ENV_VARS.map((v) => `${v.name} (${v.key})`).join(", ") +
  `. ${SECRET_FILE_VARS.map((v) => `${v}_FILE`).join(" and ")} name a file to read the secret from instead ` +
  "(container secrets): like store_file and matrix.access_token_file, only its owner may read or write it " +
  "(chmod 600) unless it is under /run/secrets/, and a trailing newline is dropped.";

const MAX_FILE_BYTES = 1024 * 1024;
const RESERVED_KEYS = new Set(["__proto__", "constructor", "prototype"]);

/** A node id from a host name: lower case, only id characters, at most 64 long. */
export function nodeIdFromHostname(name: string): string {
  const cleaned = name
    .toLowerCase()
    .replace(/[^a-z0-9_.-]+/g, "-")
    .replace(/^[-.]+|[-.]+$/g, "")
    .slice(0, 64);
  return cleaned === "" ? "node" : cleaned;
}

/** `actions.pg_dump.argv[0]`; keys that are not plain words are quoted: `actions["my action"]`. */
export function formatKeyPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const segment of path) {
    if (typeof segment === "number") out += `[${segment}]`;
    else if (typeof segment === "string" && /^[A-Za-z_][A-Za-z0-9_-]*$/.test(segment)) {
      out += out === "" ? segment : `.${segment}`;
    } else out += `[${JSON.stringify(String(segment))}]`;
  }
  return out;
}

/** One issue per line, `path: message`, for printing at start-up. */
export function formatConfigIssues(issues: readonly ConfigIssue[]): string {
  return issues
    .map((issue) => (issue.path === "" ? issue.message : `${issue.path}: ${issue.message}`))
    .join("\n");
}

function isTable(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value) && !(value instanceof Date);
}

function describeType(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (value instanceof Date) return "a date";
  if (typeof value === "object") return "a table";
  // Strings are not quoted: a misplaced secret must not end up in an error message.
  if (typeof value === "string") return "a string";
  if (typeof value === "number" || typeof value === "boolean") return `a ${typeof value} (${String(value)})`;
  return typeof value;
}

const EXPECTED: Record<string, string> = {
  string: "a string",
  number: "a number",
  int: "an integer",
  boolean: "a boolean",
  array: "an array",
  object: "a table",
  record: "a table",
};

function messageFor(issue: z.core.$ZodRawIssue): string | undefined {
  switch (issue.code) {
    case "invalid_type":
      if (issue.input === undefined) return "required";
      return `expected ${EXPECTED[issue.expected] ?? issue.expected}, got ${describeType(issue.input)}`;
    case "invalid_value":
      return `must be one of ${issue.values.map((v) => JSON.stringify(v)).join(", ")}`;
    case "too_small":
    case "too_big": {
      const limit = Number(issue.code === "too_small" ? issue.minimum : issue.maximum);
      const word = issue.code === "too_small" ? "at least" : "at most";
      if (issue.origin === "array") return `must have ${word} ${limit} ${limit === 1 ? "entry" : "entries"}`;
      if (issue.origin === "string") {
        return limit === 1 && issue.code === "too_small"
          ? "must not be empty"
          : `must be ${word} ${limit} characters`;
      }
      return `must be ${word} ${limit}`;
    }
    case "invalid_key":
      return `is not a valid name: ${issue.issues[0]?.message ?? "bad key"}`;
    default:
      return undefined;
  }
}

function hint(path: readonly PropertyKey[], key: string): string {
  const known = knownKeysAt(path);
  if (known === null) return "unknown key";
  const close = known.find((k) => k.includes(key) || key.includes(k) || editDistance(k, key) <= 2);
  return close !== undefined
    ? `unknown key (did you mean "${close}"?)`
    : `unknown key (expected one of ${known.join(", ")})`;
}

function editDistance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let diagonal = row[0] ?? 0;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const above = row[j] ?? 0;
      row[j] = Math.min(above + 1, (row[j - 1] ?? 0) + 1, diagonal + (a[i - 1] === b[j - 1] ? 0 : 1));
      diagonal = above;
    }
  }
  return row[b.length] ?? 0;
}

/** Own keys that would poke at prototypes if they ever became object keys: refused outright. */
function reservedKeyIssues(value: unknown, path: PropertyKey[], out: ConfigIssue[]): void {
  if (Array.isArray(value)) {
    value.forEach((item, index) => reservedKeyIssues(item, [...path, index], out));
  } else if (isTable(value)) {
    for (const key of Object.keys(value)) {
      if (RESERVED_KEYS.has(key))
        out.push({ path: formatKeyPath([...path, key]), message: "is a reserved name" });
      else reservedKeyIssues(value[key], [...path, key], out);
    }
  }
}

function readConfigFile(file: string): { ok: true; raw: unknown } | { ok: false; issues: ConfigIssue[] } {
  const fail = (message: string) => ({ ok: false as const, issues: [{ path: "", message }] });
  const ext = extname(file).toLowerCase();
  if (ext !== ".toml" && ext !== ".json") return fail(`config file "${file}" must end in .toml or .json`);
  let text: string;
  try {
    const bytes = readFileSync(file);
    if (bytes.length > MAX_FILE_BYTES) return fail(`config file "${file}" is larger than 1 MiB`);
    text = bytes.toString("utf8");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why =
      code === "ENOENT" ? "no such file" : code === "EISDIR" ? "it is a directory" : (code ?? "unreadable");
    return fail(`cannot read config file "${file}": ${why}`);
  }
  try {
    return { ok: true, raw: ext === ".toml" ? parseToml(text) : (JSON.parse(text) as unknown) };
  } catch (err) {
    const e = err as Error & { line?: number; column?: number };
    const where = e.line !== undefined ? ` at line ${e.line}, column ${e.column ?? 0}` : "";
    const first = (e.message.split("\n")[0] ?? "").replace(/^Invalid TOML document: /, "");
    return fail(`config file "${file}" is not valid ${ext === ".toml" ? "TOML" : "JSON"}${where}: ${first}`);
  }
}

/**
 * Where container runtimes mount secrets (Docker and Compose, Kubernetes by convention): the mount
 * is the container's alone, and its files are often root-owned and world-readable (swarm: 0444).
 */
export const CONTAINER_SECRETS_DIR = "/run/secrets/";

/**
 * The one reader of secret files, for every way of naming one (`store_file`,
 * `matrix.access_token_file`, DAGBOT_STORE_FILE, DAGBOT_ACCESS_TOKEN_FILE), with one rule: a regular
 * file of at most 64 KiB, not empty, read whole without a final newline, that only its owner may read
 * or write (the node's secrets would be only as private as the file) — except under /run/secrets/,
 * a container's own secret mount. The message never holds the content.
 */
export function readPrivateFile(file: unknown): string | { error: string } {
  if (typeof file !== "string" || file === "") return { error: "expected a file path" };
  try {
    const stat = statSync(file);
    if (!stat.isFile()) return { error: `${file} is not a regular file` };
    const mode = stat.mode & 0o777;
    if ((mode & 0o077) !== 0 && !resolve(file).startsWith(CONTAINER_SECRETS_DIR)) {
      return {
        error: `${file} is readable or writable by group or others (mode ${mode.toString(8).padStart(4, "0")}); run chmod 600 on it`,
      };
    }
    if (stat.size > 64 * 1024) return { error: `${file} is larger than 64 KiB` };
    const text = readFileSync(file, "utf8").replace(/\r?\n$/, "");
    if (text === "") return { error: `${file} is empty` };
    return text;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return {
      error: `cannot read ${file}: ${code === "ENOENT" ? "no such file" : code === "EACCES" ? "permission denied" : (code ?? "unreadable")}`,
    };
  }
}

/** The system's users by name (uid and primary gid), from /etc/passwd; empty when it cannot be read. */
function systemUsers(): Map<string, { uid: number; gid: number }> {
  const users = new Map<string, { uid: number; gid: number }>();
  let text = "";
  try {
    text = readFileSync("/etc/passwd", "utf8");
  } catch {
    return users;
  }
  for (const line of text.split("\n")) {
    const [name, , uid, gid] = line.split(":");
    if (name !== undefined && name !== "" && /^\d+$/.test(uid ?? "") && /^\d+$/.test(gid ?? ""))
      users.set(name, { uid: Number(uid), gid: Number(gid) });
  }
  return users;
}

/** A webhook secret shorter than this could be guessed; generate one with `openssl rand -hex 32`. */
const MIN_WEBHOOK_SECRET = 16;

/**
 * Each webhook's secret, from its owner-only file (the one reader of secret files) or the named
 * environment variable, into the config; the messages name where, never the content.
 */
function readWebhookSecrets(
  config: NodeConfig,
  env: Readonly<Record<string, string | undefined>>,
): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  config.webhooks.forEach((hook, i) => {
    const from = hook.secretFrom;
    const path = `webhooks[${i}].${"file" in from ? "secret_file" : "secret_env"}`;
    let secret: string;
    if ("file" in from) {
      const read = readPrivateFile(from.file);
      if (typeof read !== "string") {
        issues.push({ path, message: read.error });
        return;
      }
      secret = read;
    } else {
      const value = env[from.env];
      if (value === undefined || value === "") {
        issues.push({ path, message: `the environment variable ${from.env} is not set` });
        return;
      }
      secret = value;
    }
    if (secret.length < MIN_WEBHOOK_SECRET) {
      issues.push({
        path,
        message: `the secret is shorter than ${MIN_WEBHOOK_SECRET} characters; use openssl rand -hex 32`,
      });
      return;
    }
    hook.secret = secret;
  });
  return issues;
}

/** Reads, merges and validates a node config. Never throws for bad input; reads nothing at import. */
export function loadConfig(options: LoadConfigOptions): LoadConfigResult {
  let raw: unknown = {};
  if (options.file !== undefined) {
    const read = readConfigFile(options.file);
    if (!read.ok) return read;
    raw = read.raw;
  }
  return parseConfig(raw, options);
}

/** Validates an already-parsed document (the file's content) with env and overrides applied on top. */
export function parseConfig(raw: unknown, options: Omit<LoadConfigOptions, "file">): LoadConfigResult {
  if (!isTable(raw))
    return { ok: false, issues: [{ path: "", message: "the config must be a table of settings" }] };
  const reserved: ConfigIssue[] = [];
  reservedKeyIssues(raw, [], reserved);
  if (reserved.length > 0) return { ok: false, issues: reserved };

  const doc = structuredClone(raw);
  const sources = new Map<string, string>();
  const set = (key: string, value: unknown, source: string): void => {
    doc[key] = value;
    sources.set(key, source);
  };

  const fileIssues: ConfigIssue[] = [];
  const env = (name: string): string | undefined => {
    const value = options.env[name];
    const fromEnv = value === undefined || value === "" ? undefined : value;
    if (!(SECRET_FILE_VARS as readonly string[]).includes(name)) return fromEnv;
    const file = options.env[`${name}_FILE`];
    if (file === undefined || file === "") return fromEnv;
    if (fromEnv !== undefined) {
      fileIssues.push({ path: `${name}_FILE`, message: `set ${name} or ${name}_FILE, not both` });
      return undefined;
    }
    const read = readPrivateFile(file);
    if (typeof read !== "string") fileIssues.push({ path: `${name}_FILE`, message: read.error });
    return typeof read === "string" ? read : undefined;
  };
  const envStore = env("DAGBOT_STORE");
  if (envStore !== undefined) set("store", envStore, "DAGBOT_STORE");
  const envNodeId = env("DAGBOT_NODE_ID");
  if (envNodeId !== undefined) set("node_id", envNodeId, "DAGBOT_NODE_ID");
  const envLogLevel = env("DAGBOT_LOG_LEVEL");
  if (envLogLevel !== undefined) set("log_level", envLogLevel, "DAGBOT_LOG_LEVEL");
  const envToken = env("DAGBOT_ACCESS_TOKEN");
  // The token only completes a [matrix] section; it never turns an engine-only node into a bot.
  if (envToken !== undefined && isTable(doc.matrix)) {
    doc.matrix.access_token = envToken;
    sources.set("matrix.access_token", "DAGBOT_ACCESS_TOKEN");
  }

  // Secrets from files: read here, at start, so they never sit in the node's
  // environment, where an action running as the same user could read /proc/<pid>/environ.
  const secretIssues: ConfigIssue[] = [];
  if (isTable(doc.matrix) && doc.matrix.access_token_file !== undefined) {
    const file = doc.matrix.access_token_file;
    delete doc.matrix.access_token_file;
    if (doc.matrix.access_token !== undefined && !sources.has("matrix.access_token")) {
      secretIssues.push({
        path: "matrix.access_token_file",
        message: "set access_token or access_token_file, not both",
      });
    } else if (!sources.has("matrix.access_token") && options.needsMatrixToken !== false) {
      const read = readPrivateFile(file);
      if (typeof read === "string") doc.matrix.access_token = read;
      else secretIssues.push({ path: "matrix.access_token_file", message: read.error });
    }
  }
  const envRecoveryKey = env("DAGBOT_RECOVERY_KEY");
  if (isTable(doc.matrix)) {
    const matrix = doc.matrix;
    const file = matrix.recovery_key_file;
    delete matrix.recovery_key_file;
    if (envRecoveryKey !== undefined) {
      matrix.recovery_key = envRecoveryKey;
    } else if (file !== undefined && matrix.recovery_key !== undefined) {
      secretIssues.push({
        path: "matrix.recovery_key_file",
        message: "set recovery_key or recovery_key_file, not both",
      });
    } else if (file !== undefined && options.needsMatrixToken !== false) {
      const read = readPrivateFile(file);
      if (typeof read === "string") matrix.recovery_key = read;
      else secretIssues.push({ path: "matrix.recovery_key_file", message: read.error });
    }
  }
  if (doc.store_file !== undefined) {
    const file = doc.store_file;
    delete doc.store_file;
    if (!sources.has("store")) {
      const read = readPrivateFile(file);
      if (typeof read === "string") doc.store = read;
      else secretIssues.push({ path: "store_file", message: read.error });
    }
  }
  if (secretIssues.length > 0) return { ok: false, issues: secretIssues };

  if (
    options.needsMatrixToken === false &&
    isTable(doc.matrix) &&
    (doc.matrix.access_token === undefined || doc.matrix.access_token === "")
  ) {
    doc.matrix.access_token = TOKEN_NOT_LOADED;
  }

  if (fileIssues.length > 0) return { ok: false, issues: fileIssues };

  const overrides = options.overrides ?? {};
  const cli = "the command line";
  if (overrides.store !== undefined) set("store", overrides.store, cli);
  if (overrides.nodeId !== undefined) set("node_id", overrides.nodeId, cli);
  if (overrides.logLevel !== undefined) set("log_level", overrides.logLevel, cli);
  if (overrides.capacity !== undefined) set("capacity", overrides.capacity, cli);
  if (overrides.labels !== undefined) set("labels", overrides.labels, cli);

  if (doc.node_id === undefined) doc.node_id = nodeIdFromHostname(options.hostname ?? osHostname());

  // A config is checked once a process: zod's compiled fast path for an object (a `new Function`
  // at its schema's first parse, which Node's compile cache never keeps) would cost more than it
  // saves, 3–4 ms of a one-task `dagbot run` (bench/README.md).
  const parsed = nodeConfigSchemaFor(doc).safeParse(doc, { error: messageFor, jitless: true });
  if (parsed.success) {
    const stated = isTable(doc.permissions) ? Object.keys(doc.permissions) : [];
    const wanted: Array<{ path: string; spec: string }> = [];
    if (parsed.data.run_actions_as !== undefined)
      wanted.push({ path: "run_actions_as", spec: parsed.data.run_actions_as });
    for (const [name, action] of Object.entries(parsed.data.actions)) {
      if (action.run_as !== undefined) wanted.push({ path: `actions.${name}.run_as`, spec: action.run_as });
    }
    const users = wanted.some((w) => !/^\d+:\d+$/.test(w.spec)) ? systemUsers() : new Map();
    const unknown = wanted.filter((w) => resolveRunAs(w.spec, users) === null);
    if (unknown.length > 0) {
      return {
        ok: false,
        issues: unknown.map((w) => ({
          path: w.path,
          message: `no user named "${w.spec}" on this system; give a user name from /etc/passwd or "UID:GID"`,
        })),
      };
    }
    const config = toNodeConfig(parsed.data, stated, users);
    const hookIssues = readWebhookSecrets(config, options.env);
    if (hookIssues.length > 0) return { ok: false, issues: hookIssues };
    if (config.edge !== null) {
      // An edge node holds no store: a store named anyway (file, DAGBOT_STORE, --store) is a mistake.
      if (doc.store !== undefined)
        return {
          ok: false,
          issues: [
            {
              path: "store",
              message: `an edge node holds no store connection: leave store out${sources.has("store") ? ` (set by ${sources.get("store")})` : ""}`,
            },
          ],
        };
      const token = readPrivateFile(config.edge.tokenFile);
      if (typeof token !== "string")
        return { ok: false, issues: [{ path: "edge.token_file", message: token.error }] };
      config.edge.token = token;
    }
    return { ok: true, config };
  }

  const issues: ConfigIssue[] = [];
  for (const issue of parsed.error.issues) {
    if (issue.code === "unrecognized_keys") {
      for (const key of issue.keys)
        issues.push({ path: formatKeyPath([...issue.path, key]), message: hint(issue.path, key) });
      continue;
    }
    const path = formatKeyPath(issue.path);
    if (path === "matrix.access_token" && issue.message === "required") {
      issues.push({ path, message: "required: set it here or in DAGBOT_ACCESS_TOKEN" });
      continue;
    }
    const source = [...sources.entries()].find(
      ([key]) => path === key || path.startsWith(`${key}.`) || path.startsWith(`${key}[`),
    )?.[1];
    issues.push({
      path,
      message: source === undefined ? issue.message : `${issue.message} (set by ${source})`,
    });
  }
  return { ok: false, issues };
}
