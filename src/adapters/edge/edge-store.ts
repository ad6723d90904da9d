/**
 * The worker's store port over HTTP (docs/operations.md, "Edge nodes"): an edge node holds no store
 * connection; each call of TaskClaimer, getTask, listTasks and heartbeat is a request to a core node's /v1/edge/
 * routes (src/adapters/http/edge-routes.ts), the fencing token carried unchanged, and the answers
 * come back as the port's types and typed errors, so the Worker behaves as with a direct store:
 * a 409 is the ConflictError the store raised (a lost renewal aborts the action), a 404 the
 * NotFoundError, and a core that cannot be reached or answers 5xx a StoreError (the worker backs off
 * and retries, as it does for a store outage).
 *
 * One core at a time: a connection error, a timeout or a 5xx moves to the next core and tries the
 * same call there, each core once per call, except a claim: one whose answer was lost (a connection
 * cut, a timeout, a 5xx) may have committed, so it is not sent again (one whose connection the core
 * refused was never sent: it goes to the next core like any call). The edge asks a core what its
 * session holds (/v1/edge/held) and hands the worker, once each, the tasks it holds and was never
 * handed (adopt), their leases renewed first: no task waits out its lease unrun, none runs twice.
 * Claims go one at a time so that what the session holds is never read while a claim is out. A
 * claim the core refused for load (503 `busy`, before it asked the store) is none of these: it
 * answers "no task now", and the edge sends no claim before the core's Retry-After, spread, has
 * passed (a wake-up's claim meanwhile is answered so here), then claims on the same core.
 *
 * Wake-ups: one Server-Sent Events stream (/v1/edge/wakes) from the current core, turned into
 * ChangeFeed callbacks. A lost stream is reopened (on the next core when this one is gone) and
 * announces itself with a wake for everyone, so the worker claims for what it may have missed;
 * the worker's safety tick stays the net.
 */
import type {
  ChangeListener,
  ChangeTopic,
  ClaimBatch,
  ClaimedTask,
  NodeHeartbeat,
  NodeOffer,
  NodeStore,
  Session,
  TaskClaimer,
  ChangeFeed,
  TaskResult,
  TaskToken,
  WorkerTaskReader,
  WorkerTaskView,
} from "../../ports/store.js";
import http from "node:http";
import https from "node:https";
import type { TaskStatus } from "../../domain/model.js";
import { ConflictError, NotFoundError, StoreError } from "../../ports/errors.js";
import type { Logger } from "../../ports/logger.js";

export interface EdgeStoreOptions {
  /** The core nodes' HTTP API base URLs, tried in this order. */
  cores: readonly string[];
  /** The edge token (a secret: never logged). */
  token: string;
  logger: Logger;
  /** How long one request may take before the next core is tried; default 10 s. */
  requestTimeoutMs?: number;
  /** How long to wait before reopening a lost wake stream; default 1 s. */
  reconnectMs?: number;
  /** Monotonic ms, for a busy core's wait (default performance.now). */
  now?: () => number;
  /**
   * Told of each request once it is answered (its status) or failed without an answer (null), with
   * its path: what the client sent, for metrics and the bench. Called in the caller's async context.
   */
  onExchange?: (path: string, status: number | null) => void;
}

/** How long a wake stream the core refused waits before it asks again. */
const REFUSED_RETRY_MS = 30_000;

/**
 * The connections to the cores, kept open between requests and shared by the clients of a process.
 * node:http rather than fetch: the same request costs an edge's process less than half the CPU
 * (an idle fleet's heartbeats and safety ticks, a busy core's refusals: bench/README.md, "Edge nodes").
 */
const AGENTS = { http: new http.Agent({ keepAlive: true }), https: new https.Agent({ keepAlive: true }) };

/** One request's answer: its status, Retry-After and body. */
interface Exchange {
  status: number;
  retryAfter: string | null;
  text: string;
}

/** A request that took longer than the client's timeout (the next core is tried, as for a lost connection). */
class RequestTimeoutError extends Error {
  override readonly name = "RequestTimeoutError";
}

/** Opens one request; resolves with the response once its head arrived. `timeoutMs` bounds the whole exchange. */
function open(
  url: string,
  options: { method: string; headers: Record<string, string>; body?: string; signal?: AbortSignal },
): { response: Promise<http.IncomingMessage>; request: http.ClientRequest } {
  const secure = url.startsWith("https:");
  const request = (secure ? https : http).request(url, {
    method: options.method,
    headers:
      options.body === undefined
        ? options.headers
        : { ...options.headers, "content-length": String(Buffer.byteLength(options.body)) },
    agent: secure ? AGENTS.https : AGENTS.http,
    ...(options.signal === undefined ? {} : { signal: options.signal }),
  });
  const response = new Promise<http.IncomingMessage>((resolve, reject) => {
    request.once("response", resolve);
    // Every error, not only the first: an unheard one would end the process.
    request.on("error", reject);
  });
  request.end(options.body);
  return { response, request };
}

/** One request and its whole answer, within `timeoutMs`. */
function exchange(
  url: string,
  options: { method: string; headers: Record<string, string>; body?: string },
  timeoutMs: number,
): Promise<Exchange> {
  return new Promise<Exchange>((resolve, reject) => {
    const { response, request } = open(url, options);
    const timer = setTimeout(
      () => request.destroy(new RequestTimeoutError(`no answer within ${timeoutMs} ms`)),
      timeoutMs,
    );
    const fail = (err: unknown): void => {
      clearTimeout(timer);
      reject(err instanceof Error ? err : new Error(String(err)));
    };
    response.then((res) => {
      res.setEncoding("utf8");
      let text = "";
      res.on("data", (chunk: string) => {
        text += chunk;
      });
      res.on("error", fail);
      res.once("aborted", () => fail(new Error("the answer was cut off")));
      res.once("end", () => {
        clearTimeout(timer);
        const retryAfter = res.headers["retry-after"];
        resolve({
          status: res.statusCode ?? 0,
          retryAfter: typeof retryAfter === "string" ? retryAfter : null,
          text,
        });
      });
    }, fail);
  });
}

/** A problem document as the core answers it (src/adapters/http/problem.ts). */
interface ProblemAnswer {
  code?: string;
  limitBytes?: number;
  detail?: string;
  operation?: string;
  expected?: Record<string, unknown>;
  found?: Record<string, unknown> | null;
  key?: Record<string, unknown>;
}

/** A refusal that is neither a conflict nor a missing row: the edge's config or the core's (a token, a room). */
export class EdgeRefusedError extends Error {
  override readonly name = "EdgeRefusedError";
  constructor(
    readonly status: number,
    readonly code: string,
    detail: string,
    /** A 413's limit: the largest body the route takes. */
    readonly limitBytes?: number,
  ) {
    super(`the core refused (${status} ${code}): ${detail}`);
  }
}

/**
 * The body with its `output` cut to the tail whose JSON fits in `limitBytes`: the kept output is a
 * tail already (output_limit), so a core whose http.edge_output_limit is smaller than the edge's
 * output_limit keeps less of it rather than never hearing the outcome. Null: nothing fits.
 */
export function fitOutput<T extends { output: string }>(
  body: T,
  wrap: (b: T) => unknown,
  limitBytes: number,
): T | null {
  const size = (output: string) => Buffer.byteLength(JSON.stringify(wrap({ ...body, output })));
  if (size("") > limitBytes) return null;
  // The longest tail that fits, by bisection on its length in UTF-16 units.
  let fits = 0;
  let over = body.output.length + 1;
  while (over - fits > 1) {
    const mid = Math.floor((fits + over) / 2);
    if (size(body.output.slice(-mid)) <= limitBytes) fits = mid;
    else over = mid;
  }
  return { ...body, output: fits === 0 ? "" : body.output.slice(-fits) };
}

/**
 * The answer of one core to one request as the port's outcome: the parsed body, or the typed error.
 * Null: try the next core (the core is unreachable or failing).
 */
export function answerOf(
  operation: string,
  status: number,
  body: unknown,
  retryAfter: string | null = null,
): { value: unknown } | { error: Error } | null {
  if (status >= 200 && status < 300) return { value: body };
  const p = (typeof body === "object" && body !== null ? body : {}) as ProblemAnswer;
  if (status === 503 && p.code === "busy") {
    const seconds = Number(retryAfter);
    return { error: new CoreBusyError(seconds > 0 ? seconds * 1000 : BUSY_RETRY_MS) };
  }
  if (status >= 500) return null;
  if (status === 409 && p.code === "lost-claim")
    return { error: new ConflictError(p.operation ?? operation, p.expected ?? {}, p.found ?? null) };
  if (status === 404 && p.code === "task-not-found")
    return { error: new NotFoundError(p.operation ?? operation, p.key ?? {}) };
  return { error: new EdgeRefusedError(status, p.code ?? "unknown", p.detail ?? "", p.limitBytes) };
}

/**
 * A claim the core refused for load before asking the store (503 `busy`): nothing was claimed, and
 * the core asks for the claim again after `retryAfterMs`. Not a failure: the claim answers "no task
 * now", and the edge stays on its core (moving would not make the claim less optional).
 */
export class CoreBusyError extends Error {
  override readonly name = "CoreBusyError";
  constructor(readonly retryAfterMs: number) {
    super(`the core is busy; claim again in ${retryAfterMs} ms`);
  }
}

/** A busy core's wait when its answer names none. */
const BUSY_RETRY_MS = 1_000;

/**
 * When a claim refused as busy asks again: the core's Retry-After, spread over half to one and a
 * half times it, so the edges refused together do not come back together.
 */
export function busyRetryMs(retryAfterMs: number, random: () => number = Math.random): number {
  return Math.round(retryAfterMs * (0.5 + random()));
}

/**
 * A request whose connection the core refused was never sent (nothing listens: a core stopped or
 * killed), so not even a claim's can have committed: no look at what the session holds is owed.
 */
export function neverSent(err: unknown): boolean {
  return typeof err === "object" && err !== null && (err as { code?: unknown }).code === "ECONNREFUSED";
}

/** A claim sent to a core that gave no answer: it may have committed. A StoreError to the worker. */
export class AnswerLostError extends StoreError {}

const tokenKey = (t: TaskToken): string => `${t.runId}\u0000${t.taskId}\u0000${t.version}`;

export class EdgeStore
  implements TaskClaimer, ChangeFeed, WorkerTaskReader, Pick<NodeStore, "heartbeat" | "removeNode">
{
  private current = 0;
  /** The tail of the claims in flight (oneClaimAtATime). */
  private claiming: Promise<unknown> = Promise.resolve();
  /** The claims the worker was handed and has not finished or released (tokenKey). */
  private readonly handedOut = new Set<string>();
  /** A claim's answer was lost: what the session holds is to be asked before the next claim. */
  private unsure = false;
  /** Tasks the session holds that the worker was never handed, for the next claims (adopt). */
  private adoptable: ClaimedTask[] = [];
  private readonly listeners = new Set<{
    listener: ChangeListener;
    topics: readonly ChangeTopic[] | undefined;
  }>();
  private stream: AbortController | null = null;
  private readonly log: Logger;
  private readonly timeoutMs: number;
  private readonly reconnectMs: number;
  private readonly now: () => number;
  /**
   * Until when (now()) the core that refused a claim as busy asked not to be asked again: a claim
   * before then, a leader's wake-up's included, is answered "no task now" here, without a request.
   */
  private busyUntil = 0;

  constructor(private readonly options: EdgeStoreOptions) {
    if (options.cores.length === 0) throw new Error("an edge node needs at least one core (edge.cores)");
    this.log = options.logger.child({ component: "edge" });
    this.timeoutMs = options.requestTimeoutMs ?? 10_000;
    this.reconnectMs = options.reconnectMs ?? 1_000;
    this.now = options.now ?? (() => performance.now());
  }

  /** The core the edge talks to now. */
  get core(): string {
    return this.options.cores[this.current]!;
  }

  claimTasks(offer: NodeOffer, max: number): Promise<ClaimBatch> {
    return this.oneClaimAtATime(async () => {
      const adopted = await this.adopt(offer, max);
      if (adopted.length > 0) return { claimed: adopted, more: true, nextReadyInMs: null };
      const now = this.now();
      if (now < this.busyUntil) return { claimed: [], more: false, nextReadyInMs: this.busyUntil - now };
      let batch: ClaimBatch;
      try {
        batch = (await this.call("claim", "POST", "/v1/edge/claim", { offer, max }, false)) as ClaimBatch;
      } catch (err) {
        // Refused for load: no task now; the worker claims again once this says a task may be ready.
        if (err instanceof CoreBusyError) {
          const waitMs = busyRetryMs(err.retryAfterMs);
          this.busyUntil = this.now() + waitMs;
          return { claimed: [], more: false, nextReadyInMs: waitMs };
        }
        if (!(err instanceof AnswerLostError)) throw err;
        // It may have committed: what the session holds now, less what the worker runs, is its batch.
        const claimed = await this.adopt(offer, max);
        return { claimed, more: true, nextReadyInMs: null };
      }
      this.handOut(batch.claimed);
      return batch;
    });
  }

  async claimTask(offer: NodeOffer): Promise<ClaimedTask | null> {
    return (await this.claimTasks(offer, 1)).claimed[0] ?? null;
  }

  renewTaskLease(token: TaskToken, leaseMs: number): Promise<{ leaseExpiresAt: number; status: TaskStatus }> {
    return this.call("renew task lease", "POST", "/v1/edge/renew", { token, leaseMs }) as Promise<{
      leaseExpiresAt: number;
      status: TaskStatus;
    }>;
  }

  releaseTask(token: TaskToken, why: string): Promise<{ status: TaskStatus }> {
    return this.ending(
      token,
      this.call("release task", "POST", "/v1/edge/release", { token, why }) as Promise<{
        status: TaskStatus;
      }>,
    );
  }

  async writeTaskOutput(token: TaskToken, output: string, outputBytes: number): Promise<void> {
    await this.fitting(
      { output },
      (o) => ({ token, output: o.output, outputBytes }),
      (body) => this.call("write task output", "POST", "/v1/edge/output", body),
    );
  }

  finishTask(token: TaskToken, result: TaskResult): Promise<{ status: TaskStatus }> {
    return this.ending(
      token,
      this.fitting(
        result,
        (r) => ({ token, result: r }),
        (body) => this.call("finish task", "POST", "/v1/edge/finish", body),
      ) as Promise<{ status: TaskStatus }>,
    );
  }

  /**
   * Finish and claim in one call. Its answer lost, it may have committed or not: the worker is told
   * of a store error and finishes again (a 409 then says the finish had committed), and what it
   * claimed is adopted by the next claim (claimTasks).
   */
  finishAndClaim(
    token: TaskToken,
    result: TaskResult,
    offer: NodeOffer,
    max: number,
  ): Promise<{ status: TaskStatus; batch: ClaimBatch }> {
    return this.oneClaimAtATime(async () => {
      const answer = (await this.ending(
        token,
        this.fitting(
          result,
          (r) => ({ token, result: r, offer, max }),
          (body) => this.call("finish and claim", "POST", "/v1/edge/finish-and-claim", body, false),
        ),
      )) as { status: TaskStatus; batch: ClaimBatch };
      this.handOut(answer.batch.claimed);
      return answer;
    });
  }

  /**
   * Claims one after another: while a claim is out, what the session holds is not yet what the
   * worker was handed, so a recovery (adopt) must not read it then.
   */
  private oneClaimAtATime<T>(claim: () => Promise<T>): Promise<T> {
    const next = this.claiming.then(claim, claim);
    this.claiming = next.catch(() => undefined);
    return next;
  }

  /** The worker now runs these: a later recovery does not hand them out again. */
  private handOut(claimed: readonly ClaimedTask[]): void {
    for (const c of claimed) this.handedOut.add(tokenKey(c.token));
  }

  /** A finish or release that ended (or found ended) the token's claim: it is no longer the worker's. */
  private async ending<T>(token: TaskToken, call: Promise<T>): Promise<T> {
    try {
      const answer = await call;
      this.handedOut.delete(tokenKey(token));
      return answer;
    } catch (err) {
      if (err instanceof ConflictError || err instanceof NotFoundError)
        this.handedOut.delete(tokenKey(token));
      throw err;
    }
  }

  /**
   * After a claim whose answer was lost (it may have committed: the tasks are the session's, and
   * nobody runs them): the running tasks the session holds that the worker was never handed, up to
   * `max`, each lease renewed first, so the worker runs each once, now, instead of the lease
   * expiring on a task nobody runs (a retry spent, or a task with none failed). Those past `max`
   * wait for the next claim. When the core cannot be asked, the next claim asks first.
   */
  private async adopt(offer: NodeOffer, max: number): Promise<ClaimedTask[]> {
    if (this.unsure) {
      let held: ClaimedTask[];
      try {
        ({ held } = (await this.call("held tasks", "POST", "/v1/edge/held", {
          session: offer.session,
          roomIds: offer.roomIds,
        })) as { held: ClaimedTask[] });
      } catch (err) {
        // A core of 0.5.0 has no such route (a plain 404): the tasks that claim took wait out their
        // lease, as they did there, rather than this edge claiming nothing more (docs/operations.md,
        // "Edge nodes": upgrade the cores first).
        if (!(err instanceof EdgeRefusedError && err.status === 404 && err.code === "unknown")) throw err;
        this.log.warn(
          "edge: the core cannot say what a lost claim took (an older release); it waits its lease",
        );
        held = [];
      }
      this.unsure = false;
      const waiting = new Set(this.adoptable.map((c) => tokenKey(c.token)));
      for (const c of held)
        if (!this.handedOut.has(tokenKey(c.token)) && !waiting.has(tokenKey(c.token))) this.adoptable.push(c);
      if (held.length > 0)
        this.log.info({ held: held.length, adopt: this.adoptable.length }, "edge: a claim's answer was lost");
    }
    const adopted: ClaimedTask[] = [];
    while (adopted.length < max && this.adoptable.length > 0) {
      const c = this.adoptable[0]!;
      try {
        await this.renewTaskLease(c.token, offer.leaseMs);
      } catch (err) {
        // Reaped or canceled meanwhile: not ours to run. A store error: the next claim tries again.
        if (!(err instanceof ConflictError || err instanceof NotFoundError)) {
          if (adopted.length > 0) break;
          throw err;
        }
        this.adoptable.shift();
        continue;
      }
      this.adoptable.shift();
      adopted.push(c);
    }
    this.handOut(adopted);
    return adopted;
  }

  /**
   * Sends the body made of `part`; when the core answers 413 with its limit, once more with the
   * output cut to the tail that fits (fitOutput; outputBytes still counts all the attempt wrote).
   */
  private async fitting<T extends { output: string }>(
    part: T,
    wrap: (p: T) => unknown,
    send: (body: unknown) => Promise<unknown>,
  ): Promise<unknown> {
    try {
      return await send(wrap(part));
    } catch (err) {
      if (!(err instanceof EdgeRefusedError) || err.status !== 413 || err.limitBytes === undefined) throw err;
      const fitted = fitOutput(part, wrap, err.limitBytes);
      if (fitted === null) throw err;
      this.log.warn(
        { limitBytes: err.limitBytes, kept: fitted.output.length, of: part.output.length },
        "edge: the core takes less output than this node keeps; sending the tail that fits (http.edge_output_limit)",
      );
      return send(wrap(fitted));
    }
  }

  /** What the worker reads of a task (WorkerTaskView): the core answers no more. */
  async getTask(runId: string, taskId: string): Promise<WorkerTaskView | null> {
    const query = new URLSearchParams({ run: runId, task: taskId });
    const answer = (await this.call("get task", "GET", `/v1/edge/task?${query.toString()}`)) as {
      task: WorkerTaskView | null;
    };
    return answer.task;
  }

  /** The tasks of a run (a fan-in reads its fan-out's instances' outputs); none of a run of another room. */
  async listTasks(runId: string): Promise<WorkerTaskView[]> {
    const query = new URLSearchParams({ run: runId });
    const answer = (await this.call("list tasks", "GET", `/v1/edge/tasks?${query.toString()}`)) as {
      tasks: WorkerTaskView[];
    };
    return answer.tasks;
  }

  async heartbeat(beat: NodeHeartbeat): Promise<void> {
    await this.call("heartbeat", "POST", "/v1/edge/heartbeat", { beat });
  }

  async removeNode(session: Session): Promise<void> {
    await this.call("remove node", "POST", "/v1/edge/leave", { session });
  }

  onChange(listener: ChangeListener, topics?: readonly ChangeTopic[]): () => void {
    const entry = { listener, topics };
    this.listeners.add(entry);
    if (this.stream === null) {
      this.stream = new AbortController();
      void this.follow(this.stream.signal);
    }
    return () => {
      this.listeners.delete(entry);
      if (this.listeners.size === 0) this.close();
    };
  }

  /** Closes the wake stream. */
  close(): void {
    this.stream?.abort();
    this.stream = null;
  }

  private headers(json: boolean): Record<string, string> {
    return {
      authorization: `Bearer ${this.options.token}`,
      ...(json ? { "content-type": "application/json" } : {}),
    };
  }

  /** The core after this one, once `failed` is still the current one (a concurrent call may have moved on). */
  private moveOn(failed: number, why: string): void {
    if (this.current !== failed) return;
    this.current = (failed + 1) % this.options.cores.length;
    this.log.warn({ from: this.options.cores[failed], to: this.core, why }, "edge: moving to the next core");
  }

  /**
   * One request, on the current core and then on the next ones while a core fails. `resend` false
   * (a claim): a failure after the request was sent is not sent again, since the core may have
   * committed it; the next core becomes current, a later claim recovers (adopt), and the caller
   * gets an AnswerLostError.
   */
  private async call(
    operation: string,
    method: "GET" | "POST",
    path: string,
    body?: unknown,
    resend = true,
  ): Promise<unknown> {
    let last: unknown = null;
    for (let tried = 0; tried < this.options.cores.length; tried += 1) {
      const at = this.current;
      const base = this.options.cores[at]!;
      let status: number;
      let parsed: unknown;
      let retryAfter: string | null;
      try {
        const answer = await exchange(
          `${base}${path}`,
          {
            method,
            headers: this.headers(body !== undefined),
            ...(body === undefined ? {} : { body: JSON.stringify(body) }),
          },
          this.timeoutMs,
        );
        this.options.onExchange?.(path, answer.status);
        status = answer.status;
        retryAfter = answer.retryAfter;
        parsed = answer.text === "" ? null : JSON.parse(answer.text);
      } catch (err) {
        this.options.onExchange?.(path, null);
        last = err;
        this.moveOn(at, String(err).slice(0, 200));
        if (!resend && !neverSent(err)) throw this.answerLost(operation, err);
        continue;
      }
      const answer = answerOf(operation, status, parsed, retryAfter);
      if (answer === null) {
        last = new Error(`${base} answered ${status}`);
        this.moveOn(at, `status ${status}`);
        if (!resend) throw this.answerLost(operation, last);
        continue;
      }
      if ("error" in answer) throw answer.error;
      return answer.value;
    }
    throw new StoreError(operation, { cause: last ?? new Error("no core answered") });
  }

  private answerLost(operation: string, cause: unknown): AnswerLostError {
    this.unsure = true;
    return new AnswerLostError(operation, { cause });
  }

  private deliver(topic: ChangeTopic, roomId: string | null, nodes?: readonly string[]): void {
    for (const { listener, topics } of [...this.listeners])
      if (topics === undefined || topics.includes(topic)) listener(topic, roomId, nodes);
  }

  /** Follows the current core's wake stream until closed, reopening it (on the next core when failing). */
  private async follow(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      const at = this.current;
      // A refusal (a token the core does not know) is not mended by asking again at once.
      let waitMs = this.reconnectMs;
      try {
        const res = await open(`${this.options.cores[at]!}/v1/edge/wakes`, {
          method: "GET",
          headers: { ...this.headers(false), accept: "text/event-stream" },
          signal,
        }).response;
        res.setEncoding("utf8");
        const status = res.statusCode ?? 0;
        this.options.onExchange?.("/v1/edge/wakes", status);
        if (status !== 200) {
          let text = "";
          for await (const chunk of res) text += chunk as string;
          let body: unknown = null;
          try {
            body = JSON.parse(text);
          } catch {
            // not a problem document
          }
          const refused = answerOf("wakes", status, body);
          if (refused !== null && "error" in refused) {
            this.log.error({ err: refused.error.message }, "edge: the core refused the wake stream");
            waitMs = Math.max(this.reconnectMs, REFUSED_RETRY_MS);
          } else this.moveOn(at, `wake stream: status ${status}`);
        } else {
          let buffered = "";
          for await (const chunk of res) {
            buffered += chunk as string;
            let end: number;
            while ((end = buffered.indexOf("\n\n")) >= 0) {
              const frame = buffered.slice(0, end);
              buffered = buffered.slice(end + 2);
              for (const line of frame.split("\n")) {
                if (!line.startsWith("data: ")) continue;
                const data = JSON.parse(line.slice(6)) as {
                  topic: ChangeTopic;
                  roomId: string | null;
                  nodes?: string[];
                };
                this.deliver(data.topic, data.roomId, data.nodes);
              }
            }
          }
          // The core ended the stream (it stops): the next one.
          if (!signal.aborted) this.moveOn(at, "wake stream ended");
        }
      } catch (err) {
        if (signal.aborted) return;
        this.options.onExchange?.("/v1/edge/wakes", null);
        this.moveOn(at, `wake stream: ${String(err).slice(0, 200)}`);
      }
      if (signal.aborted) return;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, waitMs);
        signal.addEventListener(
          "abort",
          () => {
            clearTimeout(timer);
            resolve();
          },
          { once: true },
        );
      });
    }
  }
}
