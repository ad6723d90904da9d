/**
 * A real local Synapse for the tests and `dagbot demo`: installs it (scripts/install-synapse.sh),
 * starts it on a free port with a throwaway data dir, registers users and creates rooms through its
 * APIs, and stops, restarts or disposes of it. test/support/synapse.ts re-exports it for the tests.
 */
import { execFile } from "node:child_process";
import { createHmac, randomBytes } from "node:crypto";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { renderSynapseConfig, type SynapseRateLimits } from "./synapse-config.js";
import { freePort, spawnSynapse, stopProcess, tailOf, waitReady, type Running } from "./synapse-process.js";
import { packageFile } from "../package-files.js";

// src/adapters/matrix/ and dist/adapters/matrix/ are both three levels below the package root.
const REPO_ROOT = packageFile(".");
const INSTALL_SCRIPT = join(REPO_ROOT, "scripts/install-synapse.sh");
const SERVER_NAME = "localhost";

export interface SynapseInstall {
  python: string;
  version: string;
}

export interface StartSynapseOptions {
  /** "low" sets rc_message to 1/s with a burst of 2, for rate-limit (429) tests. Default "off". */
  rateLimits?: SynapseRateLimits;
  /** Copy the per-machine pre-migrated database and signing key instead of starting empty. Default true. */
  useTemplate?: boolean;
  /** Where the data dir is created (default: the OS temp dir). */
  parentDir?: string;
  /** Top-level config keys that replace the rendered ones. */
  extraConfig?: Record<string, unknown>;
}

export interface RegisteredUser {
  userId: string;
  localpart: string;
  password: string;
  accessToken: string;
  deviceId: string;
}

export interface RegisterOptions {
  admin?: boolean;
  displayName?: string;
  /** Default: "pw-" + the name, so a person can log in to a demo with a Matrix client. */
  password?: string;
  /** A fixed device id makes transaction ids dedupe across token reuse (recipe §2.2). */
  deviceId?: string;
}

export interface CreateRoomOptions {
  invite?: string[];
  name?: string;
  /** Merged over Synapse's default power levels (power_level_content_override). */
  powerLevels?: Record<string, unknown>;
  preset?: "private_chat" | "public_chat" | "trusted_private_chat";
}

export interface SynapseHandle {
  /** Base URL without a trailing slash, e.g. http://127.0.0.1:41234 */
  readonly url: string;
  readonly port: number;
  readonly serverName: string;
  readonly dataDir: string;
  readonly logPath: string;
  readonly registrationSecret: string;
  /** Milliseconds from spawn to a healthy /_matrix/client/versions, for the last start. */
  readonly lastStartMs: number;
  /** The running process id, or undefined while stopped. */
  pid(): number | undefined;
  registerUser(name: string, opts?: RegisterOptions): Promise<RegisteredUser>;
  /** Creates a room as the token's user and returns its id. */
  createRoom(asToken: string, opts?: CreateRoomOptions): Promise<string>;
  /** SIGTERM, then SIGKILL after 10 s. The data dir stays; restart() starts on it again. */
  stop(): Promise<void>;
  /** stop() then start on the same data dir and port. */
  restart(): Promise<void>;
  /** Keep the data dir on dispose(), e.g. because a test failed. */
  keepDataDir(): void;
  /** stop() and delete the data dir unless it is to be kept (then its path is printed). */
  dispose(): Promise<void>;
  /** The last lines of Synapse's log, for error messages. */
  logTail(lines?: number): string;
}

// ---------------------------------------------------------------------------------------------
// Install

let installing: Promise<SynapseInstall> | undefined;

function pinnedVersion(): string {
  const m = /^SYNAPSE_VERSION="([^"]+)"/m.exec(readFileSync(INSTALL_SCRIPT, "utf8"));
  if (!m?.[1]) throw new Error(`${INSTALL_SCRIPT}: no SYNAPSE_VERSION="..." line`);
  return m[1];
}

/**
 * Runs scripts/install-synapse.sh once per process (fast when already installed) and returns the
 * venv's python. Rejects with the script's own explanation when Python, venv or pip is missing.
 */
export function ensureSynapseInstalled(): Promise<SynapseInstall> {
  installing ??= new Promise<SynapseInstall>((resolvePromise, reject) => {
    execFile(
      "bash",
      [INSTALL_SCRIPT],
      { timeout: 15 * 60_000, maxBuffer: 16 * 1024 * 1024 },
      (err, stdout, stderr) => {
        if (err) {
          const why = stderr.trim().split("\n").slice(-8).join("\n") || err.message;
          reject(new Error(`Synapse is needed for the Matrix tests and could not be installed:\n${why}`));
          return;
        }
        const python = stdout.trim().split("\n").pop() ?? "";
        if (!existsSync(python)) {
          reject(new Error(`${INSTALL_SCRIPT} printed no usable python path (got "${python}")`));
          return;
        }
        resolvePromise({ python, version: pinnedVersion() });
      },
    );
  });
  // A failed attempt is not cached: the next caller gets the same clear error from a fresh try.
  installing.catch(() => (installing = undefined));
  return installing;
}

export function cacheDir(): string {
  return join(process.env["XDG_CACHE_HOME"] ?? join(homedir(), ".cache"), "dagbot");
}

// ---------------------------------------------------------------------------------------------
// Template database

/**
 * A database that has been through Synapse's schema setup once, and its signing key, baked once per
 * machine and Synapse version. Built in a temp dir and renamed into place, so parallel test
 * workers never see half a template.
 */
async function ensureTemplate(install: SynapseInstall): Promise<string> {
  const dir = join(cacheDir(), `synapse-template-${install.version}`);
  if (existsSync(join(dir, "ready"))) return dir;
  mkdirSync(cacheDir(), { recursive: true });
  const work = mkdtempSync(join(cacheDir(), "synapse-template-tmp-"));
  const port = await freePort();
  writeFileSync(
    join(work, "homeserver.yaml"),
    renderSynapseConfig({ port, dataDir: work, registrationSecret: randomBytes(16).toString("hex") }),
  );
  const logPath = join(work, "synapse.log");
  const run = spawnSynapse(install.python, work, logPath);
  try {
    await waitReady(run, `http://127.0.0.1:${port}`, logPath);
  } finally {
    // A clean SIGTERM checkpoints SQLite's WAL into homeserver.db, so the single file is complete.
    await stopProcess(run);
  }
  const out = mkdtempSync(join(cacheDir(), "synapse-template-new-"));
  copyFileSync(join(work, "homeserver.db"), join(out, "homeserver.db"));
  copyFileSync(join(work, "localhost.signing.key"), join(out, "localhost.signing.key"));
  writeFileSync(join(out, "ready"), `${install.version}\n`);
  rmSync(work, { recursive: true, force: true });
  try {
    renameSync(out, dir);
  } catch {
    rmSync(out, { recursive: true, force: true }); // another worker finished first: use theirs
  }
  return dir;
}

/** Installs Synapse and bakes the template; for a vitest globalSetup or .ci/run. */
export async function prepareSynapse(): Promise<SynapseInstall> {
  const install = await ensureSynapseInstalled();
  await ensureTemplate(install);
  return install;
}

// ---------------------------------------------------------------------------------------------
// Admin API helpers

async function jsonRequest(
  method: string,
  url: string,
  body?: unknown,
  token?: string,
): Promise<{ status: number; json: Record<string, unknown> }> {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (token) headers["authorization"] = `Bearer ${token}`;
  const res = await fetch(url, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  let json: Record<string, unknown> = {};
  try {
    json = text ? (JSON.parse(text) as Record<string, unknown>) : {};
  } catch {
    json = { raw: text };
  }
  return { status: res.status, json };
}

/** Shared-secret registration (recipe §2.1): one fresh nonce per user, HMAC-SHA1 over NUL-joined fields. */
async function registerWithSecret(
  url: string,
  secret: string,
  name: string,
  opts: RegisterOptions,
): Promise<RegisteredUser> {
  const endpoint = `${url}/_synapse/admin/v1/register`;
  const password = opts.password ?? `pw-${name}`;
  const nonceRes = await jsonRequest("GET", endpoint);
  const nonce = nonceRes.json["nonce"];
  if (typeof nonce !== "string") throw new Error(`register ${name}: no nonce (${nonceRes.status})`);
  const mac = createHmac("sha1", Buffer.from(secret, "utf8"))
    .update(Buffer.from(`${nonce}\0${name}\0${password}\0${opts.admin ? "admin" : "notadmin"}`, "utf8"))
    .digest("hex");
  const res = await jsonRequest("POST", endpoint, {
    nonce,
    username: name,
    password,
    mac,
    admin: opts.admin ?? false,
    displayname: opts.displayName ?? name,
    ...(opts.deviceId ? { device_id: opts.deviceId } : {}),
  });
  if (res.status !== 200) throw new Error(`register ${name}: HTTP ${res.status} ${JSON.stringify(res.json)}`);
  return {
    userId: String(res.json["user_id"]),
    localpart: name.toLowerCase(),
    password,
    accessToken: String(res.json["access_token"]),
    deviceId: String(res.json["device_id"]),
  };
}

// ---------------------------------------------------------------------------------------------
// Start

/** Starts a fresh Synapse on a free port; resolves once /health and /versions answer. */
export async function startSynapse(opts: StartSynapseOptions = {}): Promise<SynapseHandle> {
  const install = await ensureSynapseInstalled();
  const template = opts.useTemplate === false ? undefined : await ensureTemplate(install);
  const dataDir = mkdtempSync(join(opts.parentDir ?? tmpdir(), "dagbot-synapse-"));
  const logPath = join(dataDir, "synapse.log");
  const registrationSecret = randomBytes(24).toString("base64url");
  if (template) {
    copyFileSync(join(template, "homeserver.db"), join(dataDir, "homeserver.db"));
    copyFileSync(join(template, "localhost.signing.key"), join(dataDir, "localhost.signing.key"));
  }

  let port = 0;
  let run: Running | undefined;
  let lastStartMs = 0;
  const startOn = async (p: number): Promise<void> => {
    const started = Date.now();
    const next = spawnSynapse(install.python, dataDir, logPath);
    try {
      await waitReady(next, `http://127.0.0.1:${p}`, logPath);
    } catch (e) {
      await stopProcess(next);
      throw e;
    }
    run = next;
    lastStartMs = Date.now() - started;
  };

  // The free port can be taken between probing and Synapse binding it; try another one then.
  for (let attempt = 1; ; attempt++) {
    port = await freePort();
    writeFileSync(
      join(dataDir, "homeserver.yaml"),
      renderSynapseConfig({
        port,
        dataDir,
        registrationSecret,
        rateLimits: opts.rateLimits ?? "off",
        ...(opts.extraConfig ? { extra: opts.extraConfig } : {}),
      }),
    );
    try {
      await startOn(port);
      break;
    } catch (e) {
      if (attempt >= 3 || !/Address already in use/.test(tailOf(logPath, 40))) throw e;
    }
  }

  const url = `http://127.0.0.1:${port}`;
  let keep = false;
  const stop = async (): Promise<void> => {
    const current = run;
    run = undefined;
    if (current) await stopProcess(current);
  };

  return {
    url,
    port,
    serverName: SERVER_NAME,
    dataDir,
    logPath,
    registrationSecret,
    get lastStartMs() {
      return lastStartMs;
    },
    pid: () => run?.child.pid,
    registerUser: (name, registerOpts = {}) =>
      registerWithSecret(url, registrationSecret, name, registerOpts),
    async createRoom(asToken, roomOpts = {}) {
      const res = await jsonRequest(
        "POST",
        `${url}/_matrix/client/v3/createRoom`,
        {
          preset: roomOpts.preset ?? "private_chat",
          invite: roomOpts.invite ?? [],
          ...(roomOpts.name ? { name: roomOpts.name } : {}),
          ...(roomOpts.powerLevels ? { power_level_content_override: roomOpts.powerLevels } : {}),
        },
        asToken,
      );
      const roomId = res.json["room_id"];
      if (res.status !== 200 || typeof roomId !== "string") {
        throw new Error(`createRoom: HTTP ${res.status} ${JSON.stringify(res.json)}`);
      }
      return roomId;
    },
    stop,
    async restart() {
      await stop();
      await startOn(port);
    },
    keepDataDir() {
      keep = true;
    },
    async dispose() {
      await stop();
      if (keep) {
        console.error(`[synapse] kept data dir ${dataDir} (log: ${logPath})`);
      } else {
        rmSync(dataDir, { recursive: true, force: true });
      }
    },
    logTail: (lines = 30) => tailOf(logPath, lines),
  };
}
