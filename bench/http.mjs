/**
 * Section 7, HTTP API: one `dagbot node` with [http] on each store. Requests per second and latency
 * of `GET /v1/runs/{id}` (16 concurrent keep-alive clients for a few seconds), of writes end to end
 * (`PUT /v1/rooms/{room}/cap` and `POST /v1/dags`, 8 concurrent clients: each goes into the inbox, is
 * handled by the leader and answered from the stored outcome), and an event stream fanned out to 100
 * clients: the delay from an event's write (its `at`) to its arrival at every client while a
 * 50-task DAG runs, with the node's RSS before and with the 100 streams open. The clients run in the
 * bench process on the same cores as the node.
 */
import { createHash } from "node:crypto";
import { writeFileSync } from "node:fs";
import http from "node:http";
import { createServer } from "node:net";
import { performance } from "node:perf_hooks";
import { Cluster, nodeConfig, rssKb, waitFor } from "./lib/cluster.mjs";
import { independent } from "./lib/dags.mjs";
import { percentile } from "./lib/stats.mjs";
import { freshStore } from "./lib/stores.mjs";

const TOKEN = "bench-token-0123456789abcdef0123456789";
const AUTH = { authorization: `Bearer ${TOKEN}` };

async function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

/** One request; resolves with status and parsed JSON body. */
function request(port, method, path, body) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const req = http.request(
      {
        host: "127.0.0.1",
        port,
        method,
        path,
        agent,
        headers: { ...AUTH, ...(data === undefined ? {} : { "content-type": "application/json" }) },
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c) => (text += c));
        res.on("end", () => resolve({ status: res.statusCode, body: text === "" ? null : JSON.parse(text) }));
      },
    );
    req.on("error", reject);
    req.end(data);
  });
}

/** `concurrency` loops calling `one(i)` until `stop()` says so; latencies in ms, failures counted. */
async function load(concurrency, one, stop) {
  const latencies = [];
  let failures = 0;
  let i = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (!stop(i, performance.now() - t0)) {
        const n = i++;
        const t = performance.now();
        const r = await one(n);
        latencies.push(performance.now() - t);
        if (r.status >= 400) failures += 1;
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  return {
    requests: latencies.length,
    failures,
    perSecond: Math.round(latencies.length / seconds),
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
  };
}

/** An SSE client counting, per event, the delay from its `at` to its arrival. */
function sseClient(port, delays) {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: "127.0.0.1", port, path: "/v1/events", headers: AUTH }, (res) => {
      if (res.statusCode !== 200) reject(new Error(`event stream: ${res.statusCode}`));
      let buf = "";
      res.setEncoding("utf8");
      res.on("data", (c) => {
        buf += c;
        for (let end = buf.indexOf("\n\n"); end >= 0; end = buf.indexOf("\n\n")) {
          const block = buf.slice(0, end);
          buf = buf.slice(end + 2);
          const data = block.split("\n").find((l) => l.startsWith("data: "));
          if (data === undefined || block.includes("event: snapshot")) continue;
          const e = JSON.parse(data.slice(6));
          if (typeof e.at === "number" && typeof e.kind === "string" && e.kind.startsWith("task."))
            delays.push(Date.now() - e.at);
        }
      });
      resolve(req);
    });
    req.on("error", reject);
  });
}

export async function benchHttp(scratch, kind, { seconds, log }) {
  const { dir, location, store } = await freshStore(scratch, kind, "http");
  const port = await freePort();
  const cluster = new Cluster({
    dir,
    storeUrl: location,
    store,
    capacity: 8,
    lease: { ttl: "10s", renew_every: "3s", acquire_every: "1s" },
    count: 1,
  });
  const hash = createHash("sha256").update(TOKEN).digest("hex");
  writeFileSync(
    cluster.configs.get("node-a"),
    `${nodeConfig({ nodeId: "node-a", store: location, capacity: 8, lease: { ttl: "10s", renew_every: "3s", acquire_every: "1s" } })}
[http]
listen = "127.0.0.1:${port}"
metrics = "open"
[[http.tokens]]
name = "bench"
sha256 = "${hash}"
level = "operate"
`,
  );
  const out = {};
  try {
    await cluster.start("node-a");
    await cluster.leader();
    await waitFor("the HTTP API", async () => {
      try {
        return (await request(port, "GET", "/healthz")).status === 200;
      } catch {
        return false;
      }
    });

    const pub = await request(port, "POST", "/v1/dags", { document: independent("bench-read", 10) });
    if (pub.status !== 201) throw new Error(`publish: ${pub.status} ${JSON.stringify(pub.body)}`);
    await request(port, "POST", "/v1/runs/bench-read/confirm");
    await waitFor(
      "bench-read to end",
      async () => (await store.getRun("local", "bench-read"))?.status === "succeeded",
    );

    out.getRun = await load(
      16,
      () => request(port, "GET", "/v1/runs/bench-read"),
      (_i, ms) => ms > seconds * 1000,
    );
    log(
      `  ${kind}: GET /v1/runs/{id}: ${out.getRun.perSecond}/s, p50 ${out.getRun.p50Ms.toFixed(2)} ms, p99 ${out.getRun.p99Ms.toFixed(2)} ms`,
    );
    out.putCap = await load(
      8,
      (i) => request(port, "PUT", "/v1/rooms/local/cap", { cap: 16 + (i % 2) }),
      (i) => i >= 200,
    );
    log(
      `  ${kind}: PUT cap end to end: ${out.putCap.perSecond}/s, p50 ${out.putCap.p50Ms.toFixed(1)} ms, p99 ${out.putCap.p99Ms.toFixed(1)} ms`,
    );
    out.publish = await load(
      8,
      (i) => request(port, "POST", "/v1/dags", { document: independent(`bench-pub-${i}`, 3) }),
      (i) => i >= 100,
    );
    log(
      `  ${kind}: POST /v1/dags end to end: ${out.publish.perSecond}/s, p50 ${out.publish.p50Ms.toFixed(1)} ms, p99 ${out.publish.p99Ms.toFixed(1)} ms`,
    );

    const pid = cluster.pid("node-a");
    const rssBeforeKb = rssKb(pid);
    const delays = [];
    const clients = [];
    for (let i = 0; i < 100; i++) clients.push(await sseClient(port, delays));
    await new Promise((r) => setTimeout(r, 500));
    const rssWithClientsKb = rssKb(pid);
    let rssPeakKb = rssWithClientsKb;
    const sampler = setInterval(() => (rssPeakKb = Math.max(rssPeakKb, rssKb(pid) ?? 0)), 100);
    await request(port, "POST", "/v1/dags", { document: independent("bench-fan", 50) });
    await request(port, "POST", "/v1/runs/bench-fan/confirm");
    await waitFor(
      "bench-fan to end",
      async () => (await store.getRun("local", "bench-fan"))?.status === "succeeded",
      60_000,
    );
    // task.* lines: 50 tasks × queued, running, succeeded, to every client.
    await waitFor(
      "every client to get every task line",
      async () => delays.length >= 100 * 150,
      30_000,
    ).catch(() => {});
    clearInterval(sampler);
    for (const c of clients) c.destroy();
    out.fanOut = {
      clients: 100,
      deliveries: delays.length,
      p50Ms: percentile(delays, 50),
      p99Ms: percentile(delays, 99),
      maxMs: Math.max(...delays),
      rssBeforeMb: Math.round(rssBeforeKb / 1024),
      rssWithClientsMb: Math.round(rssWithClientsKb / 1024),
      rssPeakMb: Math.round(rssPeakKb / 1024),
    };
    log(
      `  ${kind}: SSE to 100 clients: ${delays.length} deliveries, write→client p50 ${out.fanOut.p50Ms} ms, p99 ${out.fanOut.p99Ms} ms; RSS ${out.fanOut.rssBeforeMb} MB → ${out.fanOut.rssWithClientsMb} MB with 100 streams, peak ${out.fanOut.rssPeakMb} MB`,
    );
  } finally {
    await cluster.stopAll();
    await store.close();
  }
  return out;
}
