/**
 * Chaos 3: thousands of generated malformed DAGs and commands through the whole handling
 * path. Each is inserted into the inbox as chat intake would, and the real inbox step handles it
 * under a real leader fence on a real store (SQLite and PostgreSQL). Nothing may throw, every event
 * is handled once and answered once (a `!dag` command always gets a reply — a picture ask over its
 * rate limit, after one refusal in words, a ⏳ reaction on itself — and no reply outgrows a Matrix
 * event), and no partial write happens: runs and tasks grow only by what an answer says was
 * created (nothing, unless a mutation happened to leave a valid DAG).
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isDeepStrictEqual } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { openSqliteStore } from "../../src/adapters/sqlite/index.js";
import { openPostgresStore } from "../../src/adapters/postgres/index.js";
import type { InboxDeps } from "../../src/app/commands/inbox-step.js";
import { processNextInboxEvent } from "../../src/app/commands/inbox-step.js";
import { unwrapOutcome } from "../../src/app/commands/outcome.js";
import { cardTxnId, replyTxnId } from "../../src/app/render/messages.js";
import { libraryLoader } from "../../src/composition/command-step.js";
import type { Logger } from "../../src/ports/logger.js";
import type { SenderStanding } from "../../src/ports/permissions.js";
import type { LeaderFence, LogEvent, Store } from "../../src/ports/store.js";
import { REPO, ROOM } from "../support/engine-cluster.js";
import type { PgInstance } from "../support/pg-instance.js";
import { startPgInstance } from "../support/pg-instance.js";
import { inboxOnceViolations } from "../support/chaos-checks.js";
import type { FuzzEvent } from "../support/chaos-fuzz.js";
import { FUZZ_ADMIN, FUZZ_LOCAL, FuzzGenerator, loadExampleDags } from "../support/chaos-fuzz.js";
import { CHAOS_LONG, Dice, chaosSeed } from "../support/chaos-settings.js";

const COUNTS = CHAOS_LONG ? { sqlite: 10_000, postgres: 10_000 } : { sqlite: 2_000, postgres: 1_000 };
const EXAMPLES = join(REPO, "config", "examples");
/** Matrix refuses events over 65,536 bytes; a reply must fit with room for the envelope. */
const MAX_REPLY_CONTENT_BYTES = 60_000;
const BATCH = 250;
// The fuzz tests handling, not durability: a SQLite file in memory-backed /dev/shm where there is
// one, and a private PostgreSQL without fsync, so thousands of commits cost little.
const SCRATCH = existsSync("/dev/shm") ? "/dev/shm" : tmpdir();

interface LogLine {
  level: string;
  fields: Record<string, unknown>;
  msg: string;
}

function captureLogger(lines: LogLine[], bindings: Record<string, unknown> = {}): Logger {
  const at =
    (level: string) =>
    (a: string | Record<string, unknown>, b?: string): void => {
      lines.push(
        typeof a === "string"
          ? { level, fields: bindings, msg: a }
          : { level, fields: { ...bindings, ...a }, msg: b ?? "" },
      );
    };
  return {
    trace: at("trace"),
    debug: at("debug"),
    info: at("info"),
    warn: at("warn"),
    error: at("error"),
    fatal: at("fatal"),
    child: (more) => captureLogger(lines, { ...bindings, ...more }),
  };
}

const standing = async (_room: string, user: string): Promise<SenderStanding> =>
  user === FUZZ_LOCAL
    ? { kind: "local-operator" }
    : { kind: "room-member", powerLevel: user === FUZZ_ADMIN ? 100 : 0, allowlisted: false, adminLevel: 100 };

async function counts(store: Store): Promise<{ runs: number; tasks: number; byRun: Map<string, number> }> {
  const runs = await store.listRuns(ROOM, { limit: 100_000 });
  const byRun = new Map<string, number>();
  for (const r of runs) byRun.set(r.runId, (await store.listTasks(r.runId)).length);
  return { runs: runs.length, tasks: [...byRun.values()].reduce((a, b) => a + b, 0), byRun };
}

async function eventsSince(store: Store, since: number): Promise<LogEvent[]> {
  const out: LogEvent[] = [];
  for (let at = since; ;) {
    const page = await store.readEvents(ROOM, at, 1000);
    out.push(...page);
    const last = page[page.length - 1];
    if (last === undefined || page.length < 1000) return out;
    at = last.seq;
  }
}

async function fuzzPass(kind: string, store: Store, total: number): Promise<void> {
  const dice = new Dice(chaosSeed());
  const started = Date.now();
  const session = { nodeId: "fuzz-leader", bootId: "fuzz-boot" };
  const acquired = await store.acquireLease(ROOM, session, 3_600_000);
  const fence: LeaderFence = { roomId: ROOM, session, term: acquired.term };
  // A live node offering the examples' actions, so DAGs get past the unknown-action check.
  await store.heartbeat({
    session,
    labels: ["linux"],
    capacity: 4,
    actions: ["echo", "sleep", "true", "fail"],
    roomIds: [ROOM],
  });
  const lines: LogLine[] = [];
  const deps: InboxDeps = {
    store,
    permissions: { standing },
    policy: {
      requiredPowerLevel: 50,
      allowlist: [],
      twoPersonRule: false,
      autoConfirm: [],
      confirmTimeoutMs: 3_600_000,
      nodeStaleAfterMs: 3_600_000,
    },
    loadDag: libraryLoader(EXAMPLES),
    logger: captureLogger(lines),
  };
  let ts = await store.now();
  let n = 0;
  const insert = async (e: Pick<FuzzEvent, "sender" | "content">): Promise<string> => {
    const eventId = `$fuzz-${kind}-${String(++n).padStart(6, "0")}:example.org`;
    await store.insertInboxEvent({
      eventId,
      roomId: ROOM,
      sender: e.sender,
      originServerTs: ts++,
      content: e.content,
      seenBy: "fuzz",
    });
    return eventId;
  };
  const crashes: string[] = [];
  const drain = async (): Promise<void> => {
    for (;;) {
      try {
        if ((await processNextInboxEvent(deps, fence)) === "idle") return;
      } catch (err) {
        const row = await store.nextInboxEvent(fence).catch(() => null);
        crashes.push(`${row?.eventId ?? "?"}: ${String(err)}`);
        return;
      }
    }
  };

  // Seed runs the commands can name: one pending with a "sent" card (reactions reach it), one running.
  const seedIds: string[] = [];
  for (const body of ["!dag publish hello", "!dag publish diamond", "!dag confirm diamond"])
    seedIds.push(await insert({ sender: FUZZ_ADMIN, content: { msgtype: "m.text", body } }));
  await drain();
  expect(crashes).toEqual([]);
  const hello = await store.getRun(ROOM, "hello");
  expect(hello?.status).toBe("pending");
  await store.markOutboxSent(fence, cardTxnId(hello!.runId), "$card-hello:example.org");
  const baseline = await counts(store);
  const baseSeq = (await eventsSince(store, 0)).at(-1)?.seq ?? 0;

  const generator = new FuzzGenerator(
    dice,
    loadExampleDags(EXAMPLES),
    ["hello", "diamond", "fan-out", "fuzz-chain"],
    ["$card-hello:example.org", ...seedIds],
  );
  const sent: Array<{ eventId: string; event: FuzzEvent }> = [];
  const insertErrors: string[] = [];
  while (sent.length + insertErrors.length < total && crashes.length === 0) {
    for (let i = 0; i < BATCH && sent.length + insertErrors.length < total; i++) {
      const event = generator.next();
      try {
        sent.push({ eventId: await insert(event), event });
      } catch (err) {
        insertErrors.push(`${event.category}: ${String(err).slice(0, 300)}`);
      }
    }
    await drain();
  }
  const handledMs = Date.now() - started;

  const rows = new Map<string, Awaited<ReturnType<Store["getInboxEvent"]>>>();
  for (const { eventId } of sent) rows.set(eventId, await store.getInboxEvent(eventId));
  const ignored = new Set<string>();
  const created = new Map<string, string>();
  const outcomes = new Map<string, number>();
  const unanswered: string[] = [];
  const oversized: string[] = [];
  for (const { eventId, event } of sent) {
    const outcome = unwrapOutcome(rows.get(eventId)?.result ?? null);
    const result = rows.get(eventId)?.result ?? {};
    const kindOf = outcome?.kind ?? String(result["kind"] ?? "none");
    outcomes.set(kindOf, (outcomes.get(kindOf) ?? 0) + 1);
    if (outcome?.kind === "ignored") ignored.add(eventId);
    // A new run's answer, however the row was marked (the store keeps the outcome: CommandContext).
    if (outcome?.kind === "published" || outcome?.kind === "retried") created.set(outcome.run.runId, eventId);
    if (event.mustReply && outcome?.kind === "ignored")
      unanswered.push(`${eventId} (${event.category}) ignored`);
    const reply = await store.getOutbox(replyTxnId(eventId));
    // Over the picture rate limit after being told once: a ⏳ on the ask itself, never a message.
    if (
      outcome?.kind === "rate-limited" &&
      (reply?.eventType !== "m.reaction" ||
        // Compared as values: PostgreSQL's jsonb gives the keys back in its own order.
        !isDeepStrictEqual(reply.content["m.relates_to"], {
          rel_type: "m.annotation",
          event_id: eventId,
          key: "⏳",
        }))
    )
      unanswered.push(`${eventId} (${event.category}) rate-limited without its ⏳`);
    if (reply !== null && Buffer.byteLength(JSON.stringify(reply.content)) > MAX_REPLY_CONTENT_BYTES)
      oversized.push(
        `${eventId} (${event.category}): ${Buffer.byteLength(JSON.stringify(reply.content))} bytes`,
      );
  }
  const events = await eventsSince(store, baseSeq);
  const once = await inboxOnceViolations(
    store,
    events,
    sent.map((s) => s.eventId),
    (id) => ignored.has(id),
  );
  const after = await counts(store);
  const expectedTasks =
    baseline.tasks + [...created.keys()].reduce((a, id) => a + (after.byRun.get(id) ?? 0), 0);
  const kinds: Record<string, number> = {};
  for (const e of events) kinds[e.kind] = (kinds[e.kind] ?? 0) + 1;
  const categories: Record<string, number> = {};
  for (const { event } of sent) {
    const c = event.category.split(":")[0] ?? "?";
    categories[c] = (categories[c] ?? 0) + 1;
  }
  const handlerErrors = lines.filter((l) => l.level === "error" || l.level === "fatal");
  console.log(
    `[chaos fuzz ${kind}] ${JSON.stringify(
      {
        seed: dice.seed,
        events: sent.length,
        insertRefused: insertErrors.length,
        ms: handledMs,
        categories,
        outcomes: Object.fromEntries(outcomes),
        acceptedByAccident: created.size,
        runs: { before: baseline.runs, after: after.runs },
        tasks: { before: baseline.tasks, after: after.tasks },
        logKinds: kinds,
        handlerErrors: handlerErrors.length,
      },
      null,
      1,
    )}`,
  );

  expect(crashes).toEqual([]);
  expect(insertErrors).toEqual([]);
  expect(handlerErrors).toEqual([]);
  expect(once).toEqual([]);
  expect(unanswered).toEqual([]);
  expect(oversized).toEqual([]);
  // No partial write: rows only for runs an answer says were created, with all their tasks.
  expect(after.runs).toBe(baseline.runs + created.size);
  expect(after.tasks).toBe(expectedTasks);
  for (const runId of created.keys()) {
    const run = await store.getRunById(runId);
    expect(after.byRun.get(runId)).toBe(run?.dag.tasks.length);
  }
  expect(kinds["run.created"] ?? 0).toBe(created.size);
  expect(Object.keys(kinds).filter((k) => k.startsWith("task.") && k !== "task.canceled")).toEqual([]);
  expect(sent.length).toBe(total);
}

describe("chaos: fuzzing the command path", () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterAll(async () => {
    for (const c of cleanups) await c();
  });

  it(
    `${COUNTS.sqlite} malformed DAGs and commands through the inbox step on SQLite: no crash, one answer each, no partial write`,
    async (context) => {
      const dir = mkdtempSync(join(SCRATCH, "dagbot-fuzz-"));
      const store = await openSqliteStore(join(dir, "store.db"));
      cleanups.push(async () => {
        await store.close();
        if (context.task.result?.state === "fail") console.warn(`kept fuzz store ${dir}`);
        else rmSync(dir, { recursive: true, force: true });
      });
      await fuzzPass("sqlite", store, COUNTS.sqlite);
    },
    CHAOS_LONG ? 600_000 : 120_000,
  );

  it(
    `${COUNTS.postgres} malformed DAGs and commands through the inbox step on PostgreSQL: no crash, one answer each, no partial write`,
    async (context) => {
      const pg: PgInstance = await startPgInstance("fuzz");
      const store = await openPostgresStore(await pg.createDatabase("dagbot_fuzz"));
      cleanups.push(async () => {
        await store.close();
        await pg.destroy(context.task.result?.state === "fail");
      });
      await fuzzPass("postgres", store, COUNTS.postgres);
    },
    CHAOS_LONG ? 600_000 : 120_000,
  );
});
