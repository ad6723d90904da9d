/**
 * GET /v1/events: a room's event log as Server-Sent Events. Each event's `id:` is its sequence
 * number; a client resumes with `Last-Event-ID` (or `?after=`) and gets every later event once, in
 * order: its replay is read from the log, live events that arrive meanwhile wait in a bounded queue
 * and are sent after it, skipping what the replay already sent. A client whose last event is no
 * longer in the log (pruned by retention), or that gives no position, first gets a `snapshot` event
 * (the room's runs as they are) whose id is the log's head, then live events. A client that leaves
 * more than `bufferBytes` unread is sent a `dropped` event naming where to resume, and disconnected.
 *
 * Hand-rolled rather than @fastify/sse: the stream needs the socket's unread byte count to bound each
 * client.
 */
import type { ServerResponse } from "node:http";
import type { LogEvent } from "../../ports/store.js";
import type { EventHub, EventHubStore, EventListener } from "./event-hub.js";
import { fail } from "./problem.js";

export interface StreamOptions {
  roomId: string;
  /** Only events of this run (its uuid, as the log names it; the snapshot too). */
  runId: string | null;
  /** The position to resume after; null for "from now" (snapshot first). */
  after: number | null;
  heartbeatMs: number;
  bufferBytes: number;
  /** The room's state for a snapshot event (the runs, or the one run), read after the head was taken. */
  snapshot: () => Promise<unknown>;
}

export interface StreamStats {
  open: number;
  dropped: number;
  snapshots: number;
}

/**
 * Refuses a stream past `http.max_streams` (503 too-many-streams, retry in 5 s), for every route that
 * holds one open (/v1/events, /v1/edge/wakes); called before the request is hijacked.
 */
export function refuseStreamPastCap(
  streams: StreamStats,
  maxStreams: number,
  reply: { header(name: string, value: string): unknown },
): void {
  if (streams.open < maxStreams) return;
  reply.header("retry-after", "5");
  fail(503, "too-many-streams", `at most ${maxStreams} event streams at once (http.max_streams)`);
}

const REPLAY_PAGE = 500;
/** How long a dropped client's unread bytes (at most the buffer and the drop message) are kept for it. */
const DROP_GRACE_MS = 30_000;

/**
 * Event data for the stream: inbox and outbox lines lose their payload (replies can quote task
 * output). `dagId` is the run's canonical id (its name), as run summaries show it; `runId` its uuid.
 */
export function publicEvent(e: LogEvent, dagId: string | null): Record<string, unknown> {
  let data = e.data;
  if (e.kind.startsWith("inbox.") || e.kind.startsWith("outbox.")) {
    data = {};
    for (const key of ["eventId", "txnId", "status"]) {
      const v = e.data[key];
      if (typeof v === "string") data[key] = v;
    }
  }
  return {
    seq: e.seq,
    at: e.at,
    kind: e.kind,
    runId: e.runId,
    dagId,
    taskId: e.taskId,
    term: e.term,
    actor: e.actor,
    data,
  };
}

function frame(event: string | null, id: number | null, data: unknown): string {
  return `${event === null ? "" : `event: ${event}\n`}${id === null ? "" : `id: ${id}\n`}data: ${JSON.stringify(data)}\n\n`;
}

/**
 * Streams to `res` until the client goes away or is dropped. The headers are written here.
 */
export async function streamEvents(
  res: ServerResponse,
  hub: EventHub,
  store: EventHubStore,
  options: StreamOptions,
  stats: StreamStats,
): Promise<void> {
  const { roomId, runId } = options;
  let lastSent = 0;
  let live = false;
  let closed = false;
  let queue: LogEvent[] = [];
  let queuedBytes = 0;

  res.writeHead(200, {
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-cache, no-transform",
    connection: "keep-alive",
    "x-accel-buffering": "no",
  });
  stats.open += 1;

  const finish = (): void => {
    if (closed) return;
    closed = true;
    stats.open -= 1;
    clearInterval(heartbeat);
    hub.unsubscribe(roomId, listener);
  };
  const drop = (why: string): void => {
    if (closed) return;
    stats.dropped += 1;
    const socket = res.socket;
    res.end(
      frame("dropped", null, {
        reason: why,
        resumeAfter: lastSent,
        hint: `reconnect with the header Last-Event-ID: ${lastSent} (or ?after=${lastSent}) to resume`,
      }),
      // The connection goes too (not back to keep-alive): the client sees the end once it reads.
      () => socket?.end(),
    );
    // A client that never reads again does not hold its unread bytes for long.
    setTimeout(() => socket?.destroy(), DROP_GRACE_MS).unref();
    finish();
  };
  let replaying = false;
  /** False when the socket's buffer is full (its 'drain' event will come). */
  const write = (text: string): boolean => {
    if (closed) return true;
    const room = res.write(text);
    if (!replaying && res.writableLength > options.bufferBytes) drop("slow-client");
    return room;
  };
  const send = (e: LogEvent): boolean => {
    if (e.seq <= lastSent) return true;
    lastSent = e.seq;
    if (runId !== null && e.runId !== runId) return true;
    // Named by its kind, so an EventSource listens by kind (addEventListener("task.failed", …)).
    return write(frame(e.kind, e.seq, publicEvent(e, hub.runNames.of(e.runId))));
  };
  const listener: EventListener = {
    onEvents(events) {
      if (closed) return;
      if (live) {
        for (const e of events) send(e);
        return;
      }
      for (const e of events) {
        queue.push(e);
        queuedBytes += 200 + JSON.stringify(e.data).length;
      }
      if (queuedBytes > options.bufferBytes) drop("slow-client");
    },
  };
  res.on("close", finish);
  const heartbeat = setInterval(() => write(": heartbeat\n\n"), options.heartbeatMs);

  write("retry: 2000\n\n");
  const { head } = await hub.subscribe(roomId, listener);
  let after = options.after;
  if (after !== null && after > 0) {
    // The client's last event must still be in the log, or events after it may be gone too.
    const at = await store.readEvents(roomId, after - 1, 1);
    if (at[0]?.seq !== after) after = null;
  }
  if (closed) return;
  if (after === null) {
    const position = head();
    const state = await options.snapshot();
    stats.snapshots += 1;
    lastSent = Math.max(lastSent, position);
    write(frame("snapshot", position, state));
  } else {
    lastSent = after;
    // The replay goes at the client's pace (it waits for the socket to drain); only live events that
    // pile up meanwhile count against the client's buffer.
    replaying = true;
    for (;;) {
      if (closed) return;
      const page = await store.readEvents(roomId, lastSent, REPLAY_PAGE);
      await hub.runNames.learn(page);
      for (const e of page) {
        if (!send(e)) {
          await new Promise<void>((resolve) => {
            res.once("drain", resolve);
            res.once("close", resolve);
          });
          if (closed) return;
        }
      }
      if (page.length < REPLAY_PAGE) break;
    }
    replaying = false;
  }
  const waiting = queue;
  queue = [];
  queuedBytes = 0;
  live = true;
  for (const e of waiting) send(e);
}
