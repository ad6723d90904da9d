/** Test clients of a node's HTTP API: JSON requests, an SSE reader over a raw socket, the node's bound port. */
import { createHash } from "node:crypto";
import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { connect } from "node:net";
import type { Socket } from "node:net";
import type { HttpConfig } from "../../src/config/node-config.js";
import type { Store } from "../../src/ports/store.js";
import type { NodeProcess, Target } from "./engine-cluster.js";
import { ROOM, createTarget, killAll, requireBuild, startNode, writeNodeConfig } from "./engine-cluster.js";
import { waitFor } from "./store-wait.js";

export const OPERATE_TOKEN = "operate-token-0123456789abcdef-test";
export const READ_TOKEN = "read-token-0123456789abcdef-test";

const sha = (t: string): string => createHash("sha256").update(t).digest("hex");

/**
 * The HTTP config of an API started in the test's own process (startHttpApi), on an ephemeral port,
 * with one read token.
 */
export function inProcessHttpConfig(token: string): HttpConfig {
  return {
    listen: "127.0.0.1:0",
    host: "127.0.0.1",
    port: 0,
    tokens: [{ name: "ci", sha256: sha(token), level: "read" }],
    openHealth: true,
    openMetrics: true,
    bodyLimitBytes: 65_536,
    edgeOutputLimitBytes: 65_536,
    sseBufferBytes: 65_536,
    commandTimeoutMs: 1_000,
    heartbeatMs: 15_000,
    maxStreams: 2,
    maxConnections: 16,
    headerTimeoutMs: 10_000,
    requestTimeoutMs: 30_000,
    keepAliveTimeoutMs: 5_000,
  };
}

/** The [http] section of a test node: both tokens, an ephemeral port unless one is given. */
export function httpSection(options: { port?: number; extra?: string } = {}): string {
  return `
[http]
listen = "127.0.0.1:${options.port ?? 0}"
heartbeat = "500ms"
${options.extra ?? ""}
[[http.tokens]]
name = "ops"
sha256 = "${sha(OPERATE_TOKEN)}"
level = "operate"
[[http.tokens]]
name = "viewer"
sha256 = "${sha(READ_TOKEN)}"
level = "read"
`;
}

export interface HttpNode {
  node: NodeProcess;
  base: string;
  port: number;
}

/** Starts `dagbot node` with an [http] section and waits until it listens; the port comes from its log. */
export async function startHttpNode(
  target: Target,
  nodeId: string,
  /** extra: more [http] keys; tables: more top-level tables (after the tokens). */
  options: { port?: number; extra?: string; capacity?: number; tables?: string } = {},
): Promise<HttpNode> {
  const config = writeNodeConfig(target, {
    nodeId,
    ttl: "3s",
    renewEvery: "500ms",
    ...(options.capacity === undefined ? {} : { capacity: options.capacity }),
    extra: httpSection(options) + (options.tables ?? ""),
  });
  const logPath = join(target.dir, `${nodeId}.log`);
  // A restarted node appends to the same log: only its own lines count.
  const from = existsSync(logPath) ? statSync(logPath).size : 0;
  const node = startNode(target, config, nodeId);
  const line = await waitFor(
    `${nodeId} listening`,
    () =>
      readFileSync(node.logPath)
        .subarray(from)
        .toString("utf8")
        .split("\n")
        .findLast((l) => l.includes("http api listening")),
    (l) => l !== undefined,
    { timeoutMs: 15_000, intervalMs: 50 },
  );
  const listen = (JSON.parse(line!) as { listen: string }).listen;
  const port = Number(listen.split(":").at(-1));
  return { node, base: `http://127.0.0.1:${port}`, port };
}

/** One `dagbot node` "h1" with the HTTP API on a fresh SQLite target, leading ROOM, and a store on it. */
export interface LeadingHttpNode {
  target: Target;
  store: Store;
  api: HttpNode;
}

export async function startLeadingHttpNode(
  label: string,
  options: Parameters<typeof startHttpNode>[2],
): Promise<LeadingHttpNode> {
  requireBuild();
  const target = await createTarget("sqlite", label);
  const api = await startHttpNode(target, "h1", options);
  const store = await target.open();
  await waitFor(
    "h1 leading",
    () => store.getLease(ROOM),
    (l) => l?.holder?.nodeId === "h1",
  );
  return { target, store, api };
}

/** Stops what startLeadingHttpNode started; a failed file keeps its folder. */
export async function stopLeadingHttpNode(
  started: Partial<LeadingHttpNode> | undefined,
  failed: boolean,
): Promise<void> {
  if (started?.api !== undefined) await killAll([started.api.node]);
  await started?.store?.close();
  await started?.target?.cleanup(failed);
}

export interface JsonResponse {
  status: number;
  contentType: string;
  headers: Headers;
  body: any;
  text: string;
}

export async function call(
  base: string,
  method: string,
  path: string,
  options: { token?: string | null; body?: unknown; headers?: Record<string, string>; raw?: string } = {},
): Promise<JsonResponse> {
  const headers: Record<string, string> = { ...options.headers };
  const token = options.token === undefined ? OPERATE_TOKEN : options.token;
  if (token !== null) headers["authorization"] = `Bearer ${token}`;
  let body: string | undefined;
  if (options.raw !== undefined) body = options.raw;
  else if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers["content-type"] ??= "application/json";
  }
  const res = await fetch(`${base}${path}`, { method, headers, ...(body === undefined ? {} : { body }) });
  const text = await res.text();
  let parsed: unknown = null;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = null;
  }
  return {
    status: res.status,
    contentType: res.headers.get("content-type") ?? "",
    headers: res.headers,
    body: parsed,
    text,
  };
}

export interface SseEvent {
  event: string;
  id: number | null;
  data: any;
}

/** An SSE reader over a raw socket, so a test can stop reading (a slow client) or cut the connection. */
export class SseClient {
  readonly events: SseEvent[] = [];
  private buffer = "";
  private headerDone = false;
  status = 0;
  closed = false;
  private readonly socket: Socket;

  constructor(port: number, path: string, headers: Record<string, string> = {}) {
    this.socket = connect(port, "127.0.0.1");
    const lines = [`GET ${path} HTTP/1.1`, "host: 127.0.0.1", "accept: text/event-stream"];
    for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
    this.socket.write(`${lines.join("\r\n")}\r\n\r\n`);
    this.socket.setEncoding("utf8");
    this.socket.on("data", (chunk: string) => this.feed(chunk));
    this.socket.on("close", () => (this.closed = true));
    this.socket.on("error", () => (this.closed = true));
  }

  private feed(chunk: string): void {
    this.buffer += chunk;
    if (!this.headerDone) {
      const end = this.buffer.indexOf("\r\n\r\n");
      if (end < 0) return;
      this.status = Number(/^HTTP\/1\.1 (\d+)/.exec(this.buffer)?.[1] ?? 0);
      this.buffer = this.buffer.slice(end + 4);
      this.headerDone = true;
    }
    // Chunked transfer encoding: strip the chunk-size lines (hex digits alone on a line).
    this.buffer = this.buffer.replace(/(^|\r\n)[0-9a-f]+\r\n/g, "$1");
    for (;;) {
      const end = this.buffer.indexOf("\n\n");
      if (end < 0) return;
      const block = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + 2).replace(/^\r\n/, "");
      this.parse(block);
    }
  }

  private parse(block: string): void {
    let event = "message";
    let id: number | null = null;
    const data: string[] = [];
    for (const raw of block.split("\n")) {
      const line = raw.replace(/\r$/, "");
      if (line.startsWith(":") || line === "") continue;
      const at = line.indexOf(":");
      const field = at < 0 ? line : line.slice(0, at);
      const value = at < 0 ? "" : line.slice(at + 1).replace(/^ /, "");
      if (field === "event") event = value;
      else if (field === "id") id = Number(value);
      else if (field === "data") data.push(value);
    }
    if (data.length === 0) return;
    this.events.push({ event, id, data: JSON.parse(data.join("\n")) });
  }

  pause(): void {
    this.socket.pause();
  }

  resume(): void {
    this.socket.resume();
  }

  close(): void {
    this.socket.destroy();
  }

  /** The ids of the log's events received (each named by its kind; not a snapshot or a drop notice). */
  seqs(): number[] {
    return this.events.filter((e) => e.event !== "snapshot" && e.event !== "dropped").map((e) => e.id!);
  }
}
