/**
 * The /v1/edge/ routes (docs/operations.md, "Edge nodes"): what an edge node, a worker that holds no
 * store connection, asks a core node to do in its stead: claim, renew, write output, release and
 * finish its tasks, beat its heartbeat, read a task, hear its wake-ups, and list the tasks its session
 * holds (after a claim whose answer was lost, src/adapters/edge/edge-store.ts). Each is one call of the
 * worker's store port (TaskClaimer, WorkerTaskReader, heartbeat), its fencing token carried unchanged;
 * heartbeats alone are gathered first, many edges' beats in one commit (src/app/heartbeat-batcher.ts),
 * and a claim first looks at a shared read of the queue, answered empty without a claim transaction
 * when nothing queued fits its offer, and waits its turn for part of the store pool, refused 503
 * `busy` with a Retry-After past a bound, while renewals, finishes, releases and output writes are
 * never refused nor wait behind claims (src/app/claim-gate.ts); a task read is answered as the worker
 * reads it (WorkerTaskView), not as the store holds it.
 *
 * Only an edge token calls them (auth.ts), and only for the node its config names: every session a
 * body carries, in an offer, a token or a heartbeat, must be that node's, so an edge can never speak
 * for another node's claims (a 403 before the store is asked). The store's answers map to status
 * codes the edge's client maps back to the same typed errors (src/adapters/edge/edge-store.ts): a
 * ConflictError is a 409 `lost-claim`, a NotFoundError a 404 `task-not-found`, any other store
 * failure a 503 `store-unavailable`.
 */
import type { FastifyRequest } from "fastify";
import type { Clock } from "../../ports/clock.js";
import { z } from "zod";
import type {
  ChangeFeed,
  ChangeTopic,
  ClaimedTask,
  Session,
  TaskRecord,
  WorkerTaskView,
} from "../../ports/store.js";
import { nodesNamedBy } from "../../ports/store.js";
import { isConflict, isNotFound } from "../../ports/errors.js";
import { HeartbeatBatcher } from "../../app/heartbeat-batcher.js";
import { ClaimAdmission, ClaimsBusyError, FreshRead, QueueLook } from "../../app/claim-gate.js";
import { systemClock } from "../clock/system-clock.js";
import { DEFAULT_STORE_POOL_SIZE } from "../../config/node-config.js";
import type { Caller } from "./auth.js";
import { beyondScope, maySpeakFor } from "./auth.js";
import type { RouteContext, ZodApp } from "./context.js";
import { refuseStreamPastCap } from "./event-stream.js";
import type { NodeMetrics } from "./metrics.js";
import { fail } from "./problem.js";
import * as e from "./edge-schemas.js";
import * as s from "./schemas.js";

/** The store port's answers, as the port types them (the edge's client reads them as such). */
const answers = { 200: z.unknown(), "4xx": s.problemSchema, "5xx": s.problemSchema };

/**
 * What a finish or an output write may add to its output: the task token, the error text, the
 * published values (at most 32 of 4 KiB, JSON-escaped), the JSON around them.
 */
export const EDGE_ENVELOPE_BYTES = 1024 * 1024;

/**
 * The body limit of a finish or an output write: the kept output (at most `outputLimitBytes`, the
 * core's http.edge_output_limit) JSON-escaped at worst (a control byte is `\u00XX`, six bytes), and the
 * envelope. Larger than http.body_limit allows the other routes, far less than the 400 MiB any
 * output_limit would need: each such body is held whole in memory before it is parsed. Only an edge
 * token's requests get this far: the token is checked before the body is read.
 */
export function edgeBodyLimitBytes(outputLimitBytes: number): number {
  return outputLimitBytes * 6 + EDGE_ENVELOPE_BYTES;
}

/**
 * How many running runs of a room a held-tasks read looks through. The read is an edge's recovery
 * from a lost claim answer (rare), made of the store's run and task reads: a room with more running
 * runs than this has its newest ones looked through, and a task missed there waits out its lease.
 */
const HELD_RUNS_LIMIT = 10_000;

/** The topics an edge's worker acts on: wake-ups and a run's cancel. */
const EDGE_TOPICS: readonly ChangeTopic[] = ["wake", "runs"];

/** One edge's open wake stream: its node, whether it may hear of a room, and how a frame reaches it. */
interface WakeStream {
  node: string;
  mayHear: (roomId: string) => boolean;
  write: (frame: string) => void;
}

/**
 * The wake streams a core holds open, by node, behind ONE change-feed subscription (while any is
 * open): a change's frame is made once for the streams that get the same one, and a wake naming
 * nodes reaches theirs by a look-up per name, not a scan of every name for each open stream (a
 * thousand streams and a wake naming hundreds of nodes were most of a core's CPU under load). Each
 * stream gets what it got from a subscription of its own: a wake naming nodes only when it names
 * its node (`node`, or `node/N`), with those names only; any other change whole; nothing of a room
 * it may not hear of.
 */
export class WakeStreams {
  private readonly byNode = new Map<string, Set<WakeStream>>();
  private count = 0;
  private unsubscribe: (() => void) | null = null;
  /** The nodes this core refused a claim as busy, and until when (monotonic ms) they claim nothing. */
  private readonly resting = new Map<string, number>();

  constructor(
    private readonly feed: Pick<ChangeFeed, "onChange">,
    private readonly clock: Pick<Clock, "monotonicMs">,
  ) {}

  /**
   * This core refused the node's claim as busy with this Retry-After: the node sends no claim for at
   * least half of it (its client's spread: src/adapters/edge/edge-store.ts, busyRetryMs) and answers
   * a wake meanwhile "no task now" itself, so a wake naming it is not sent until then. Under load the
   * leader wakes the nodes that did not claim again every few hundred ms, and those frames were most
   * of what a core wrote to its edges and most of what its edges read.
   */
  refused(node: string, retryAfterS: number): void {
    this.resting.set(node, this.clock.monotonicMs() + (retryAfterS * 1000) / 2);
  }

  /** The node claims again (its rest is over, or it is an edge that does not rest): its wakes go on. */
  claiming(node: string): void {
    if (this.resting.size > 0) this.resting.delete(node);
  }

  /** Whether a wake naming the node is withheld now (see refused). */
  private isResting(node: string, now: number): boolean {
    const until = this.resting.get(node);
    if (until === undefined) return false;
    if (now < until) return true;
    this.resting.delete(node);
    return false;
  }

  /** Opens a stream; the returned function closes it. */
  add(stream: WakeStream): () => void {
    let mine = this.byNode.get(stream.node);
    if (mine === undefined) this.byNode.set(stream.node, (mine = new Set()));
    mine.add(stream);
    this.count += 1;
    this.unsubscribe ??= this.feed.onChange(
      (topic, roomId, nodes) => this.deliver(topic, roomId, nodes),
      EDGE_TOPICS,
    );
    return () => {
      if (!mine.delete(stream)) return;
      if (mine.size === 0) this.byNode.delete(stream.node);
      this.count -= 1;
      if (this.count === 0) {
        this.unsubscribe?.();
        this.unsubscribe = null;
      }
    };
  }

  private deliver(topic: ChangeTopic, roomId: string | null, nodes: readonly string[] | undefined): void {
    const send = (stream: WakeStream, frame: string): void => {
      if (roomId === null || stream.mayHear(roomId)) stream.write(frame);
    };
    if (nodes === undefined) {
      const frame = `data: ${JSON.stringify({ topic, roomId })}\n\n`;
      for (const mine of this.byNode.values()) for (const stream of mine) send(stream, frame);
      return;
    }
    // The names each open node is named by (nodesNamedBy: the rule of wakeFor).
    const named = new Map<string, string[]>();
    for (const name of nodes) {
      for (const node of nodesNamedBy(name)) {
        if (!this.byNode.has(node)) continue;
        const names = named.get(node);
        if (names === undefined) named.set(node, [name]);
        else names.push(name);
      }
    }
    // A wake for other nodes only is not this stream's business (nor are their names); any other
    // change reaches every stream, with the names of its own node (none, perhaps).
    const streamsOf = topic === "wake" ? named.keys() : this.byNode.keys();
    const now = this.resting.size > 0 ? this.clock.monotonicMs() : 0;
    for (const node of streamsOf) {
      if (topic === "wake" && this.resting.size > 0 && this.isResting(node, now)) continue;
      const frame = `data: ${JSON.stringify({ topic, roomId, nodes: named.get(node) ?? [] })}\n\n`;
      for (const stream of this.byNode.get(node) ?? []) send(stream, frame);
    }
  }
}

/**
 * A task as an edge's worker reads it (WorkerTaskView) and nothing more: no output, error, arguments
 * or timings of tasks it may not even run. The executor is named only when it is the edge's own
 * node (the worker checks a cancel reached its own attempt); another node's session is not its business.
 */
export function edgeTaskView(t: TaskRecord, node: string): WorkerTaskView {
  return {
    runId: t.runId,
    taskId: t.taskId,
    status: t.status,
    attempt: t.attempt,
    executor: t.executor?.nodeId === node ? t.executor : null,
    fanOut: t.fanOut,
    outputPatterns: t.outputPatterns,
    outputValues: t.outputValues,
  };
}

export function registerEdgeRoutes(app: ZodApp, ctx: RouteContext, metrics: NodeMetrics): void {
  const { deps, log, callerOf, streams } = ctx;
  const { store, config } = deps;
  const outputBodyLimit = edgeBodyLimitBytes(config.edgeOutputLimitBytes);
  // The edges' heartbeats, written in batches: one commit for the beats of a short window, not one
  // each. At close the beats still waiting are written at once, so their requests are answered.
  const beats = new HeartbeatBatcher(store, deps.clock ?? systemClock);
  app.addHook("preClose", async () => beats.close());
  // The queue of the node's rooms as its edges' claims look at it first, one read for many claims.
  const queue = new QueueLook(store, deps.rooms, deps.clock ?? systemClock);
  // A leader's wake names the edges it wakes: their next claims go on without waiting for a read.
  const unheard = store.onChange(
    (topic, _roomId, nodes) => {
      if (topic === "wake") queue.heardWake(nodes);
    },
    ["wake"],
  );
  app.addHook("onClose", async () => unheard());
  const wakeStreams = new WakeStreams(store, deps.clock ?? systemClock);
  // Claims wait their turn for part of the store pool and are refused past a bound; the calls that
  // keep a guarantee (renewals, finishes, releases, output) never wait behind them nor are refused.
  const admission = new ClaimAdmission(
    deps.storePoolSize ?? DEFAULT_STORE_POOL_SIZE,
    deps.clock ?? systemClock,
  );

  // The running tasks of a room, as the held-tasks route reads them: one read shared by the calls
  // that arrive while it is in flight, each answered by a read that started after it arrived
  // (FreshRead). A core's loss leaves every edge whose claim was out on it asking the next core what
  // it holds, at once: hundreds of reads of every running run's tasks held the survivors' pools
  // until their edges' calls timed out, and each claim lost so asked again (bench/README.md, "Edge nodes").
  const runningReads = new Map<string, FreshRead<TaskRecord[]>>();
  const runningTasksOf = (roomId: string): Promise<TaskRecord[]> => {
    let read = runningReads.get(roomId);
    if (read === undefined) {
      read = new FreshRead(async () => {
        const running: TaskRecord[] = [];
        const runs = await store.listRuns(roomId, {
          statuses: ["running", "canceling"],
          limit: HELD_RUNS_LIMIT,
        });
        for (const run of runs)
          for (const task of await store.listTasks(run.runId))
            if (task.status === "running") running.push(task);
        return running;
      });
      runningReads.set(roomId, read);
    }
    return read.get();
  };

  /** The edge caller, once each session its body names is its own node's. */
  const edgeCaller = (req: FastifyRequest, sessions: readonly Session[]): Caller => {
    const caller = callerOf(req);
    for (const session of sessions)
      if (!maySpeakFor(caller, session.nodeId))
        fail(
          403,
          "forbidden",
          `this token speaks for node "${caller.node ?? ""}" only, not "${session.nodeId}"`,
        );
    return caller;
  };
  /** The rooms an edge may claim in or hear of: the node's, within the token's own. */
  const mayServe = (caller: Caller, roomId: string): boolean =>
    deps.rooms.includes(roomId) && (caller.rooms === undefined || caller.rooms.includes(roomId));
  const checkRooms = (caller: Caller, roomIds: readonly string[]): void => {
    for (const roomId of roomIds)
      if (!mayServe(caller, roomId)) fail(404, "unknown-room", `this node does not serve room "${roomId}"`);
  };
  /**
   * An offer or a heartbeat within the token's labels and actions: an edge that claims a label it
   * was not given would be handed tasks meant for other machines (docs/security.md, edge tokens).
   */
  const checkScope = (
    caller: Caller,
    named: { labels: readonly string[]; actions: readonly string[]; actionSpecs?: object },
  ): void => {
    const actions =
      named.actionSpecs === undefined ? named.actions : [...named.actions, ...Object.keys(named.actionSpecs)];
    const beyond = beyondScope(caller, { labels: named.labels, actions });
    if (beyond !== null) fail(403, "forbidden", beyond);
  };
  /** The store's typed errors as the status codes the edge's client maps back. */
  const storeCall = async <T>(operation: string, call: () => Promise<T>): Promise<T> => {
    try {
      return await call();
    } catch (err) {
      if (err instanceof ClaimsBusyError) throw err;
      if (isConflict(err))
        return fail(409, "lost-claim", err.message, {
          operation: err.operation,
          expected: err.expected,
          found: err.found,
        });
      if (isNotFound(err))
        return fail(404, "task-not-found", err.message, { operation: err.operation, key: err.key });
      ctx.storeError();
      log.warn({ operation, err: String(err).slice(0, 300) }, "edge store call failed");
      return fail(503, "store-unavailable", "the store could not be reached; try again");
    }
  };
  const route = (summary: string, body: unknown, bodyLimit?: number) => ({
    config: { access: "edge" as const },
    ...(bodyLimit === undefined ? {} : { bodyLimit }),
    schema: { summary, body, response: answers },
  });

  app.post(
    "/v1/edge/claim",
    route("Claim up to `max` fitting tasks for the edge node (TaskClaimer.claimTasks)", e.claimBody),
    async (req, reply) => {
      const { offer, max } = req.body as e.ClaimBody;
      const caller = edgeCaller(req, [offer.session]);
      checkScope(caller, offer);
      checkRooms(caller, offer.roomIds);
      wakeStreams.claiming(offer.session.nodeId);
      // Most claims of an idle fleet find nothing: one shared read of the queue answers them, no
      // claim transaction each (src/app/claim-gate.ts). A look that fails leaves it to the claim.
      const empty = await queue.emptyClaim(offer).catch(() => null);
      if (empty !== null) {
        metrics.edgeClaims.inc({ answer: "looked" });
        return empty;
      }
      try {
        const batch = await storeCall("claim", () => admission.claim(() => store.claimTasks(offer, max)));
        metrics.edgeClaims.inc({ answer: "store" });
        if (batch.claimed.length === 0) queue.claimedNothing();
        return batch;
      } catch (err) {
        if (!(err instanceof ClaimsBusyError)) throw err;
        metrics.edgeClaims.inc({ answer: "busy" });
        wakeStreams.refused(offer.session.nodeId, err.retryAfterS);
        reply.header("retry-after", String(err.retryAfterS));
        return fail(503, "busy", err.message);
      }
    },
  );
  app.post(
    "/v1/edge/finish",
    route("Record the end of an attempt, fenced by its token", e.finishBody, outputBodyLimit),
    async (req) => {
      const { token, result } = req.body as e.FinishBody;
      edgeCaller(req, [token.session]);
      return storeCall("finish", () => admission.other(() => store.finishTask(token, result)));
    },
  );
  app.post(
    "/v1/edge/finish-and-claim",
    route("Finish an attempt and claim in one commit", e.finishAndClaimBody, outputBodyLimit),
    async (req) => {
      const { token, result, offer, max } = req.body as e.FinishAndClaimBody;
      const caller = edgeCaller(req, [token.session, offer.session]);
      checkScope(caller, offer);
      checkRooms(caller, offer.roomIds);
      return storeCall("finish-and-claim", () =>
        admission.other(() => store.finishAndClaim(token, result, offer, max)),
      );
    },
  );
  app.post("/v1/edge/renew", route("Extend a task's lease", e.renewBody), async (req) => {
    const { token, leaseMs } = req.body as e.RenewBody;
    edgeCaller(req, [token.session]);
    return storeCall("renew", () => admission.other(() => store.renewTaskLease(token, leaseMs)));
  });
  app.post(
    "/v1/edge/release",
    route("Give up an attempt whose action stopped", e.releaseBody),
    async (req) => {
      const { token, why } = req.body as e.ReleaseBody;
      edgeCaller(req, [token.session]);
      return storeCall("release", () => admission.other(() => store.releaseTask(token, why)));
    },
  );
  app.post(
    "/v1/edge/output",
    route("Write a running attempt's output so far", e.outputBody, outputBodyLimit),
    async (req) => {
      const { token, output, outputBytes } = req.body as e.OutputBody;
      edgeCaller(req, [token.session]);
      await storeCall("output", () =>
        admission.other(() => store.writeTaskOutput(token, output, outputBytes)),
      );
      return {};
    },
  );
  app.post("/v1/edge/heartbeat", route("The edge node's heartbeat", e.heartbeatBody), async (req) => {
    const { beat } = req.body as e.HeartbeatBody;
    const caller = edgeCaller(req, [beat.session]);
    checkScope(caller, beat);
    checkRooms(caller, beat.roomIds);
    await storeCall("heartbeat", () => beats.heartbeat(beat));
    return {};
  });
  app.post(
    "/v1/edge/leave",
    route("Remove the edge node's row at a graceful stop", e.leaveBody),
    async (req) => {
      const { session } = req.body as e.LeaveBody;
      edgeCaller(req, [session]);
      await storeCall("leave", () => store.removeNode(session));
      return {};
    },
  );
  app.post(
    "/v1/edge/held",
    route(
      "The running tasks the session holds in the rooms, with their tokens: what a claim whose answer was lost claimed",
      e.heldBody,
    ),
    async (req) => {
      const { session, roomIds } = req.body as e.HeldBody;
      const caller = edgeCaller(req, [session]);
      checkRooms(caller, roomIds);
      const held = await storeCall("held", async () => {
        const found: ClaimedTask[] = [];
        for (const roomId of roomIds)
          for (const task of await runningTasksOf(roomId))
            if (task.executor?.nodeId === session.nodeId && task.executor.bootId === session.bootId)
              // A running task's version is its claim's (a cancel, which raises it, makes it canceling).
              found.push({
                token: {
                  runId: task.runId,
                  taskId: task.taskId,
                  version: task.version,
                  session,
                  claim: { attempt: task.attempt, retryBackoffMs: task.retryBackoffMs },
                },
                task,
              });
        return found;
      });
      return { held };
    },
  );
  app.get(
    "/v1/edge/task",
    {
      config: { access: "edge" },
      schema: {
        summary: "One task of a run in the edge's rooms",
        querystring: e.taskQuery,
        response: answers,
      },
    },
    async (req) => {
      const caller = edgeCaller(req, []);
      const { run, task } = req.query as e.TaskQuery;
      // A run of another room is answered as no task: an edge reads only its rooms' runs.
      const found = await storeCall("task", async () => {
        const r = await store.getRunById(run);
        if (r === null || !mayServe(caller, r.roomId)) return null;
        const t = await store.getTask(run, task);
        return t === null ? null : edgeTaskView(t, caller.node ?? "");
      });
      return { task: found };
    },
  );
  app.get(
    "/v1/edge/tasks",
    {
      config: { access: "edge" },
      schema: {
        summary: "The tasks of a run in the edge's rooms (a fan-in reads its fan-out's instances)",
        querystring: e.tasksQuery,
        response: answers,
      },
    },
    async (req) => {
      const caller = edgeCaller(req, []);
      const { run } = req.query as e.TasksQuery;
      // A run of another room is answered as no tasks, as /v1/edge/task answers no task.
      const found = await storeCall("tasks", async () => {
        const r = await store.getRunById(run);
        if (r === null || !mayServe(caller, r.roomId)) return [];
        return (await store.listTasks(run)).map((t) => edgeTaskView(t, caller.node ?? ""));
      });
      return { tasks: found };
    },
  );
  app.get(
    "/v1/edge/wakes",
    {
      config: { access: "edge" },
      schema: {
        summary:
          "The wake-ups and run changes for the edge's node as Server-Sent Events (data: {topic, roomId, nodes})",
      },
    },
    async (req, reply) => {
      const caller = edgeCaller(req, []);
      const me = caller.node ?? "";
      refuseStreamPastCap(streams, config.maxStreams, reply);
      reply.hijack();
      const res = reply.raw;
      streams.open += 1;
      res.writeHead(200, {
        "content-type": "text/event-stream",
        "cache-control": "no-store",
        connection: "keep-alive",
      });
      // A first frame: the edge knows it is connected (and claims, for what it may have missed).
      res.write(`data: ${JSON.stringify({ topic: "wake", roomId: null })}\n\n`);
      const unsubscribe = wakeStreams.add({
        node: me,
        mayHear: (roomId) => mayServe(caller, roomId),
        write: (frame) => res.write(frame),
      });
      const beat = setInterval(() => res.write(": beat\n\n"), config.heartbeatMs);
      await new Promise<void>((resolve) => {
        res.on("close", resolve);
        res.on("error", resolve);
      });
      clearInterval(beat);
      unsubscribe();
      streams.open -= 1;
    },
  );
}
