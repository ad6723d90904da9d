/** Rendering of replies, status cards, card edits and final messages: shapes, escaping, size limits. */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { NodeLine, Outcome, RunSummary, TaskLine } from "../../src/app/commands/outcome.js";
import { plainTextOf } from "../../src/app/commands/outcome-table.js";
import {
  codeBlock,
  escapeHtml,
  jsonBytes,
  MAX_EVENT_CONTENT_BYTES,
  r,
  userPill,
} from "../../src/app/render/html.js";
import {
  cardEditMessage,
  cardMessage,
  cardUpdateMessages,
  finalMessage,
  replyContent,
  replyMessage,
} from "../../src/app/render/messages.js";
import { renderOutcome } from "../../src/app/render/reply.js";
import { renderPlan, showValue } from "../../src/app/render/dag-plan.js";
import { renderStatusCard } from "../../src/app/render/status-card.js";
import type { TaskStatus } from "../../src/domain/model.js";
import { summarizeTasks } from "../../src/domain/run-status.js";
import type { RunRecord, TaskRecord } from "../../src/ports/store.js";
import { taskFixture } from "../support/task-record.js";
import { parseCommand } from "../../src/app/commands/verbs/index.js";

const HOSTILE = `<script>alert("x")</script> & 'q' <img src=x onerror=alert(1)>`;
const T0 = Date.UTC(2024, 4, 1, 12, 0, 0);

function run(extra: Partial<RunRecord> = {}): RunRecord {
  return {
    runId: "run-1",
    roomId: "!room:test",
    dagId: "backup",
    hash: "h",
    status: "running",
    description: null,
    maxParallel: null,
    publisher: "@alice:test",
    publishEventId: "$publish",
    confirmedBy: "@bob:test",
    confirmDeadline: null,
    createdAt: T0,
    updatedAt: T0,
    dag: { id: "backup", description: null, maxParallel: null, tasks: [] },
    ...extra,
  };
}

function task(taskId: string, status: TaskStatus, extra: Partial<TaskRecord> = {}): TaskRecord {
  return taskFixture({ taskId, status, maxAttempts: 3, ...extra });
}

const n1 = { nodeId: "n1", bootId: "b" };

/** HTML with the tags we emit removed must hold no markup at all: every `<` left came from input. */
function strayMarkup(html: string): string[] {
  const stripped = html.replace(
    /<\/?(p|b|ul|li|code|pre|sub|br\/?)>|<code class="language-[a-z]+">|<a href="https:\/\/matrix\.to\/#\/[^"<>]*">|<\/a>|<br\/>/g,
    "",
  );
  return stripped.match(/[<>]/g) ?? [];
}

describe("html building blocks", () => {
  it("escapes every markup character", () => {
    expect(escapeHtml(`<a href="x">'&'</a>`)).toBe("&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
  });

  it("the r template escapes literal and interpolated strings but keeps rendered parts", () => {
    const out = r`id ${HOSTILE} in ${codeBlock("x")}`;
    expect(out.body).toBe(`id ${HOSTILE} in \`\`\`\nx\n\`\`\``);
    expect(out.html).toBe(`id ${escapeHtml(HOSTILE)} in <pre><code>x</code></pre>`);
  });

  it("a code block's fence is longer than any run of backticks inside it", () => {
    const block = codeBlock("a ```` b");
    expect(block.body.startsWith("`````\n")).toBe(true);
    expect(block.body.endsWith("\n`````")).toBe(true);
  });

  it("pills only real Matrix ids and escapes them", () => {
    expect(userPill("@a:hs").html).toBe('<a href="https://matrix.to/#/%40a%3Ahs">@a:hs</a>');
    expect(userPill(`cli:${HOSTILE}`).html).toBe(escapeHtml(`cli:${HOSTILE}`));
    expect(userPill(`@<b>:hs`).html).toContain("@&lt;b&gt;:hs</a>");
  });
});

describe("status card", () => {
  const tasks = [
    task("dump", "succeeded", {
      executor: n1,
      startedAt: T0,
      finishedAt: T0 + 2_100,
      exitCode: 0,
      version: 4,
    }),
    task("upload", "running", { executor: n1, startedAt: T0 + 3_000, attempt: 2, version: 6 }),
    task("notify", "blocked"),
  ];

  it("has an exact plain shape: title, progress, a line per task that needs eyes, one per other state, footer", () => {
    const card = renderStatusCard(run(), tasks, T0 + 8_000);
    expect(card.body.split("\n")).toEqual([
      "🔄 `backup` — running",
      "▰▰▰▱▱▱▱▱▱▱ 1/3 succeeded · 1 running · 1 waiting",
      "🔄 `upload` — running · on `n1` · attempt 2/3 · for 5s",
      "✅ 1 succeeded: `dump`",
      "⚪ 1 waiting: `notify`",
      "Published by @alice:test · confirmed by @bob:test · as of 12:00:08 UTC",
    ]);
    expect(card.html).toContain(
      "<li>🔄 <code>upload</code> — running · on <code>n1</code> · attempt 2/3 · for 5s</li>",
    );
    expect(card.html).toContain("<li>✅ 1 succeeded: <code>dump</code></li>");
  });

  it("a card of 20 tasks stays compact: failures and running tasks one line each, successes folded into one", () => {
    const twenty = Array.from({ length: 20 }, (_, i) =>
      task(
        `t${i}`,
        i === 14 ? "failed" : i === 15 || i === 16 ? "running" : i >= 17 ? "skipped" : "succeeded",
        {
          executor: n1,
          startedAt: T0,
          finishedAt: i < 15 ? T0 + 1_000 : null,
          exitCode: i === 14 ? 2 : null,
          error: i === 14 ? "exited with status 2" : null,
        },
      ),
    );
    const lines = renderStatusCard(run(), twenty, T0 + 8_000).body.split("\n");
    expect(lines).toEqual([
      "🔄 `backup` — running",
      "▰▰▰▰▰▰▰▱▱▱ 14/20 succeeded · 1 failed · 3 skipped · 2 running",
      "❌ `t14` — failed · on `n1` · attempt 1/3 · 1s · exit 2",
      "🔄 `t15` — running · on `n1` · attempt 1/3 · for 8s",
      "🔄 `t16` — running · on `n1` · attempt 1/3 · for 8s",
      "✅ 14 succeeded: `t0`, `t1`, `t2`, `t3`, `t4` and 9 more",
      "⏭️ 3 skipped: `t17`, `t18`, `t19`",
      "Published by @alice:test · confirmed by @bob:test · as of 12:00:08 UTC",
    ]);
    // `!dag status` (asked for) still lists every task.
    const asked = renderOutcome({
      kind: "status",
      run: summary(),
      summary: summarizeTasks(twenty.map((t) => t.status)),
      tasks: twenty.map((t) => ({
        taskId: t.taskId,
        action: t.action,
        status: t.status,
        node: "n1",
        attempt: 1,
        maxAttempts: 1,
        startedAt: T0,
        finishedAt: T0 + 1_000,
        exitCode: null,
        error: null,
      })),
      at: T0,
    })!.body;
    expect(asked).toContain("✅ `t0` — succeeded");
  });

  it("says the room is paused while its cap is 0 and the run still has tasks to start", () => {
    const paused = renderStatusCard(run(), tasks, T0 + 8_000, 0);
    expect(paused.body.split("\n")[2]).toBe(
      "Room paused: its cap is 0, so no task starts until `!dag cap <n>` raises it.",
    );
    expect(renderStatusCard(run(), tasks, T0 + 8_000, 4).body).not.toContain("paused");
    expect(renderStatusCard(run({ status: "succeeded" }), tasks, T0 + 8_000, 0).body).not.toContain("paused");
    // Pausing is a new card state: an edit goes out even though no task moved.
    expect(cardEditMessage(run(), tasks, T0, 0).txnId).not.toBe(cardEditMessage(run(), tasks, T0, 4).txnId);
    expect(
      (cardEditMessage(run(), tasks, T0, 0).content["m.new_content"] as Record<string, unknown>)["body"],
    ).toContain("Room paused");
    const reply = renderOutcome({
      kind: "status",
      run: summary({ status: "running" }),
      summary: summarizeTasks(["running", "queued"]),
      tasks: [],
      at: T0,
      roomCap: 0,
    });
    expect(reply?.body).toContain("Room paused: its cap is 0");
  });

  it("a pending card says how to confirm, by command or reaction, and when it expires (a time, not a countdown that would freeze)", () => {
    const card = renderStatusCard(run({ status: "pending", confirmDeadline: T0 + 600_000 }), tasks, T0);
    expect(card.body).toContain("!dag confirm backup");
    expect(card.body).toContain("react ✅ to this message");
    expect(card.body).toContain("❌");
    expect(card.body).toContain(`expires at ${new Date(T0 + 600_000).toISOString().slice(11, 19)} UTC.`);
    expect(card.body).not.toMatch(/expires in/);
    const later = renderStatusCard(
      run({ status: "pending", confirmDeadline: T0 + 600_000 }),
      tasks,
      T0 + 60_000,
    );
    expect(later.body).toContain(`expires at ${new Date(T0 + 600_000).toISOString().slice(11, 19)} UTC.`);
  });

  it("escapes hostile ids, descriptions, errors and publishers", () => {
    const hostileRun = run({ dagId: HOSTILE, description: HOSTILE, publisher: HOSTILE, confirmedBy: null });
    const hostileTasks = [
      task(HOSTILE, "failed", { error: HOSTILE, exitCode: 1, executor: { nodeId: HOSTILE, bootId: "b" } }),
    ];
    const card = renderStatusCard(hostileRun, hostileTasks, T0);
    expect(strayMarkup(card.html)).toEqual([]);
    expect(card.body).toContain(HOSTILE);
  });

  it("a card of 1000 tasks lists the noteworthy ones and counts the rest, within one event even as an edit", () => {
    const many = Array.from({ length: 1000 }, (_, i) =>
      task(`task-${"x".repeat(50)}-${i}`, i % 100 === 7 ? "failed" : "succeeded", {
        error: i % 100 === 7 ? "e".repeat(500) : null,
        executor: { nodeId: "n".repeat(64), bootId: "b" },
      }),
    );
    const edit = cardEditMessage(run({ status: "failed" }), many, T0);
    expect(jsonBytes(edit.content)).toBeLessThanOrEqual(MAX_EVENT_CONTENT_BYTES);
    const body = String((edit.content["m.new_content"] as Record<string, unknown>)["body"]);
    expect(body).toContain("▰▰▰▰▰▰▰▰▰▱ 990/1000 succeeded · 10 failed");
    for (let i = 7; i < 1000; i += 100) expect(body).toContain(`-${i}\` — failed`);
    // An ended run's card names every task it lists (60 lines: the 10 failed, then 50 of the others)
    // and counts the ones it does not list.
    const succeeded = body.split("\n").find((l) => l.startsWith("✅ 990 succeeded: ")) ?? "";
    expect([...succeeded.matchAll(/`task-x+-\d+`/g)]).toHaveLength(50);
    expect(succeeded).toMatch(/ and 940 more$/);
    expect(body).not.toMatch(/— succeeded/);
  });
});

describe("outbox messages", () => {
  const tasks = [task("a", "succeeded", { version: 3, startedAt: T0, finishedAt: T0 + 1000 })];

  it("the card is a threaded notice under the publish event, with txnId card.<runId>", () => {
    const m = cardMessage(run(), tasks, T0);
    expect(m.txnId).toBe("card.run-1");
    expect(m.replacesTxnId).toBeUndefined();
    expect(m.content["msgtype"]).toBe("m.notice");
    expect(m.content["format"]).toBe("org.matrix.custom.html");
    // Its reply fallback is the publish's acknowledgement (filled in by the outbox), never the publish.
    expect(m.content["m.relates_to"]).toEqual({ rel_type: "m.thread", event_id: "$publish" });
    expect(m.content["org.dagbot.fallback_txn"]).toBe("reply.$publish");
    expect(m.content["org.dagbot.card"]).toEqual({ runId: "run-1", dagId: "backup", hash: "h" });
  });

  it("a card of a run published without a chat event is a plain message", () => {
    expect(cardMessage(run({ publishEventId: null }), tasks, T0).content["m.relates_to"]).toBeUndefined();
  });

  it("an edit replaces the card, coalesces with other edits, and its txnId follows the run's state", () => {
    const e1 = cardEditMessage(run(), tasks, T0);
    expect(e1.replacesTxnId).toBe("card.run-1");
    expect(e1.coalesceKey).toBe("card.run-1");
    expect(e1.txnId).toBe("card.run-1.3.running");
    expect(e1.content["m.relates_to"]).toEqual({ rel_type: "m.replace" });
    const newContent = e1.content["m.new_content"] as Record<string, unknown>;
    // The fallback for clients without edits is one line: the title and the counts, not a second card.
    expect(e1.content["body"]).toBe("* 🔄 `backup` — running · ▰▰▰▰▰▰▰▰▰▰ 1/1 succeeded");
    expect(e1.content["formatted_body"]).toBe(
      "* 🔄 <code>backup</code> — running · ▰▰▰▰▰▰▰▰▰▰ 1/1 succeeded",
    );
    expect(String(newContent["body"])).toContain("✅ 1 succeeded: `a`");
    expect(newContent["m.relates_to"]).toBeUndefined();
    // Same state later: the same txnId (the outbox keeps one); a task move: a new one.
    expect(cardEditMessage(run(), tasks, T0 + 5_000).txnId).toBe(e1.txnId);
    const moved = [task("a", "succeeded", { version: 4 })];
    expect(cardEditMessage(run(), moved, T0).txnId).toBe("card.run-1.4.running");
    expect(cardEditMessage(run({ status: "succeeded" }), tasks, T0).txnId).toBe("card.run-1.3.succeeded");
  });

  it("cardUpdateMessages sends the card first when it was never enqueued", () => {
    expect(cardUpdateMessages(false, run(), tasks, T0).map((m) => m.txnId)).toEqual(["card.run-1"]);
    expect(cardUpdateMessages(true, run(), tasks, T0).map((m) => m.txnId)).toEqual(["card.run-1.3.running"]);
  });

  it("the final message mentions the publisher through m.mentions and a pill after the outcome, once by txnId", () => {
    const failedTasks = [
      task("a", "succeeded", { startedAt: T0, finishedAt: T0 + 1_000 }),
      task("b", "failed", { startedAt: T0 + 1_000, finishedAt: T0 + 65_000 }),
      task("c", "skipped"),
    ];
    const m = finalMessage(run({ status: "failed" }), failedTasks);
    expect(m.txnId).toBe("final.run-1");
    expect(m.content["m.mentions"]).toEqual({ user_ids: ["@alice:test"] });
    // An m.text: default push rules silence every notice before a mention counts.
    expect(m.content["msgtype"]).toBe("m.text");
    // The last word of the run's thread; clients without threads show it as a reply to the card.
    expect(m.content["m.relates_to"]).toEqual({ rel_type: "m.thread", event_id: "$publish" });
    expect(m.content["org.dagbot.fallback_txn"]).toBe("card.run-1");
    expect(m.content["body"]).toBe(
      "❌ `backup` failed — `b`: failed · `c` skipped · 1/3 succeeded in 1m05s. See `!dag logs backup b`; `!dag retry backup` runs the rest again. cc @alice:test",
    );
    expect(String(m.content["formatted_body"])).toContain(
      '<a href="https://matrix.to/#/%40alice%3Atest">@alice:test</a>',
    );
  });

  it("a final message for a CLI publisher mentions nobody", () => {
    const m = finalMessage(run({ status: "succeeded", publisher: "cli:root@host" }), tasks);
    expect(m.content["m.mentions"]).toEqual({});
    expect(m.content["msgtype"]).toBe("m.notice");
  });

  it("a reply answers the command event, in its thread when it was sent in one", () => {
    const outcome: Outcome = { kind: "cap", cap: 3, previous: 10 };
    const plain = replyMessage("!room:test", "$cmd", outcome, { kind: "reply", to: "$cmd" });
    expect(plain?.txnId).toBe("reply.$cmd");
    expect(plain?.content["m.relates_to"]).toEqual({ "m.in_reply_to": { event_id: "$cmd" } });
    const threaded = replyMessage("!room:test", "$cmd", outcome, {
      kind: "thread",
      root: "$root",
      to: "$cmd",
    });
    expect(threaded?.content["m.relates_to"]).toEqual({
      rel_type: "m.thread",
      event_id: "$root",
      is_falling_back: false,
      "m.in_reply_to": { event_id: "$cmd" },
    });
    expect(
      replyMessage("!room:test", "$cmd", { kind: "ignored", why: "x" }, { kind: "reply", to: "$cmd" }),
    ).toBeNull();
  });
});

const summary = (over: Partial<RunSummary> = {}): RunSummary => ({
  runId: "run-1",
  dagId: "backup",
  status: "pending",
  description: null,
  publisher: "@alice:test",
  confirmedBy: null,
  publishEventId: "$p",
  confirmDeadline: T0 + 3_600_000,
  createdAt: T0,
  updatedAt: T0,
  taskCount: 3,
  ...over,
});

const line = (over: Partial<TaskLine> = {}): TaskLine => ({
  taskId: "t",
  action: "echo",
  status: "failed",
  node: "n1",
  attempt: 1,
  maxAttempts: 1,
  startedAt: T0,
  finishedAt: T0 + 1_000,
  exitCode: 2,
  error: null,
  ...over,
});

describe("replies", () => {
  it("published: one line saying what was stored and that its card is in the thread, not the card's instructions", () => {
    const out = renderOutcome({
      kind: "published",
      run: summary({ hash: "0123456789abcdef".repeat(4) }),
      needsConfirmation: true,
      twoPersonRule: true,
    });
    expect(out?.body).toBe("📥 Published `backup` (3 tasks) for confirmation. Its card is in the thread.");
    const atOnce = renderOutcome({
      kind: "published",
      run: summary(),
      needsConfirmation: false,
      twoPersonRule: false,
    });
    expect(atOnce?.body).toBe("📥 Published `backup` (3 tasks); it started. Its card is in the thread.");
    const newRun = renderOutcome({
      kind: "published",
      run: summary({ dagId: "backup.2", definition: "backup", params: { who: "ann" } }),
      needsConfirmation: true,
      twoPersonRule: true,
    });
    expect(newRun?.body).toBe(
      "📥 New run of backup: `backup.2` (3 tasks; `who=ann`), for confirmation. Its card is in the thread.",
    );
    for (const o of [out, atOnce, newRun]) expect(o?.body.split("\n")).toHaveLength(1);
  });

  it("conflict: says nothing was stored and how to publish under a new id", () => {
    const out = renderOutcome({
      kind: "conflict",
      dagId: "backup",
      existing: summary(),
      suggestion: "backup-2",
    });
    expect(out?.body).toContain("different content");
    expect(out?.body).toContain("nothing was stored");
    expect(out?.body).toContain("`backup-2`");
    expect(out?.body).toContain("`!dag retry backup`");
  });

  it("refusals and command errors carry the help line", () => {
    const out = renderOutcome({
      kind: "refused",
      verb: "publish",
      reason: "you need power level 50 in this room (or a place on the allowlist) to use publish; you have 0",
      helpLine: "usage: !dag publish <name>",
    });
    expect(out?.body).toBe(
      "⛔ you need power level 50 in this room (or a place on the allowlist) to use publish; you have 0\nUsage: `!dag publish <name>`",
    );
    expect(out?.html).toContain("Usage: <code>!dag publish &lt;name&gt;</code>");
    expect(out?.body).not.toMatch(/usage:.*usage:/i);
  });

  it("decisions answer repeats in words", () => {
    const running = summary({ status: "running", confirmedBy: "@bob:test" });
    const base = { kind: "decision" as const, run: running, by: "@carol:test" };
    expect(renderOutcome({ ...base, verb: "confirm", result: "already" })?.body).toBe(
      "`backup` is already confirmed by @bob:test; it is running.",
    );
    expect(renderOutcome({ ...base, verb: "reject", result: "wrong-status" })?.body).toBe(
      "`backup` cannot be rejected: it is running. To stop it, use `!dag cancel backup`.",
    );
    expect(renderOutcome({ ...base, verb: "confirm", result: "done" })?.body).toBe(
      "▶️ @carol:test confirmed `backup`; it started.",
    );
  });

  it("help lists what the sender may do and says what the rest needs", () => {
    const out = renderOutcome({
      kind: "help",
      entries: [{ verb: "status", usage: "!dag status [<id>]", summary: "show a run" }],
      details: [],
      hiddenVerbs: ["publish", "cap"],
      requiredPowerLevel: 50,
    });
    expect(out?.body).toBe(
      "Commands you may use in this room:\n`!dag status [<id>]` — show a run\npublish, cap need power level 50 in this room or a place on the allowlist.",
    );
  });

  it("logs: a huge hostile output is cut to fit one event and keeps its tail", () => {
    const output = `${"<&>\u0001é".repeat(40_000)}THE-END`;
    const outcome: Outcome = {
      kind: "logs",
      run: summary({ status: "failed" }),
      task: line(),
      output,
      omittedChars: 0,
      at: T0,
    };
    const content = replyContent(outcome, { kind: "reply", to: "$cmd" });
    expect(content).not.toBeNull();
    expect(jsonBytes(content)).toBeLessThanOrEqual(MAX_EVENT_CONTENT_BYTES);
    expect(strayMarkup(String(content?.["formatted_body"]))).toEqual([]);
    expect(String(content?.["body"])).toMatch(/earlier characters omitted\)\n```\n[^]*THE-END\n```$/);
    expect(String(content?.["formatted_body"])).toMatch(/THE-END<\/code><\/pre>$/);
  });

  it("logs of a running task show its output so far, marked partial; a finished task's are not", () => {
    const logs = (task: TaskLine): string =>
      renderOutcome({ kind: "logs", run: summary(), task, output: "step 1\n", omittedChars: 0, at: T0 })!
        .body;
    const running = logs(line({ status: "running", finishedAt: null, exitCode: null }));
    expect(running).toContain("(partial: its output so far; it is still running)");
    expect(running).toMatch(/```\nstep 1\n\n```$/);
    const waiting = logs(line({ status: "queued", attempt: 2, maxAttempts: 3, finishedAt: null }));
    expect(waiting).toContain("(from attempt 1; attempt 2 has not started)");
    expect(logs(line())).not.toContain("partial");
    expect(logs(line())).not.toContain("from attempt");
  });

  it("nodes: the leader's term and lease only with verbose (`!dag nodes verbose`)", () => {
    const nodes = (verbose: boolean | undefined): string =>
      renderOutcome({
        kind: "nodes",
        nodes: [
          {
            nodeId: "n1",
            labels: ["linux"],
            capacity: 2,
            runningTasks: 1,
            actions: ["echo"],
            heartbeatAgeMs: 1_200,
            serves: true,
            undecryptable: 0,
            undecryptableReason: null,
            deviceSigned: null,
            release: "0.2.0",
            protocol: 2,
          },
        ],
        leader: { nodeId: "n1", term: 7, expiresInMs: 8_600 },
        staleAfterMs: 30_000,
        at: T0,
        ...(verbose === undefined ? {} : { verbose }),
      })!.body;
    for (const quiet of [nodes(false), nodes(undefined)]) {
      expect(quiet).toMatch(/^`n1` leads this room\.\n/);
      expect(quiet).not.toMatch(/term|lease|valid for/);
      expect(quiet).toContain("1/2 slots busy");
    }
    expect(nodes(true)).toMatch(/^`n1` leads this room \(term 7, lease valid for 8\.6s\)\.\n/);
    expect(parseCommand({ body: "!dag nodes" })).toMatchObject({
      command: { verb: "nodes", verbose: false },
    });
    for (const option of ["verbose", "VERBOSE", "-v", "--verbose"])
      expect(parseCommand({ body: `!dag nodes ${option}` })).toMatchObject({
        command: { verb: "nodes", verbose: true },
      });
    expect(parseCommand({ body: "!dag nodes all" })).toMatchObject({ kind: "error" });
  });

  it("nodes: a node's device, cross-signed or not, and why its last undecryptable event was not decrypted (chat and CLI)", () => {
    const reason =
      "withheld: the sender encrypts only to verified devices, and this device is not cross-signed by its owner (MissingRoomKey, withheld_code=m.unverified)";
    const node = (over: Partial<NodeLine>): NodeLine => ({
      nodeId: "n1",
      labels: [],
      capacity: 1,
      runningTasks: 0,
      actions: [],
      heartbeatAgeMs: 1_000,
      serves: true,
      undecryptable: 0,
      undecryptableReason: null,
      deviceSigned: null,
      release: "0.2.0",
      protocol: 2,
      ...over,
    });
    const outcome = (n: NodeLine): Extract<Outcome, { kind: "nodes" }> => ({
      kind: "nodes",
      nodes: [n],
      leader: null,
      staleAfterMs: 30_000,
      at: T0,
    });
    const say = { command: (verb: string, args: readonly string[]) => [verb, ...args].join(" ") };
    const chat = (n: NodeLine): string => renderOutcome(outcome(n))!.body;
    // Plain rooms only: nothing about a device.
    expect(chat(node({}))).not.toMatch(/device|undecryptable/);
    expect(plainTextOf(outcome(node({})), say)).not.toMatch(/device|undecryptable/);
    expect(chat(node({ deviceSigned: true }))).toContain("· device cross-signed");
    const unsigned = node({ deviceSigned: false, undecryptable: 2, undecryptableReason: reason });
    for (const text of [chat(unsigned), plainTextOf(outcome(unsigned), say)]) {
      expect(text).toContain("device NOT cross-signed");
      expect(text).toContain(`2 undecryptable events (last: ${reason})`);
    }
    // A long reason is cut in the line (the log has it whole), and escaped in HTML.
    const long = node({ undecryptable: 1, undecryptableReason: `<b>${"x".repeat(400)}` });
    expect(chat(long)).toMatch(/1 undecryptable event \(last: <b>x+…\)/);
    expect(chat(long)).not.toContain("x".repeat(240));
    expect(renderOutcome(outcome(long))!.html).not.toContain("<b>x");
  });

  it("a status reply of many long lines drops lines to fit", () => {
    const tasks = Array.from({ length: 60 }, (_, i) =>
      line({ taskId: `t${i}`.padEnd(64, "x"), error: "<".repeat(200), node: "n".repeat(64) }),
    );
    const outcome: Outcome = {
      kind: "status",
      run: summary({ status: "failed" }),
      summary: summarizeTasks(tasks.map((t) => t.status)),
      tasks,
      at: T0,
    };
    const content = replyContent(outcome, { kind: "reply", to: "$cmd" });
    expect(jsonBytes(content)).toBeLessThanOrEqual(MAX_EVENT_CONTENT_BYTES);
    const body = String(content?.["body"]);
    expect(body).toContain("▱▱▱▱▱▱▱▱▱▱ 0/60 succeeded · 60 failed");
    expect(body).toMatch(/… and \d+ more tasks/);
  });

  it("no user-controlled string in any outcome can inject markup (property)", () => {
    const s = fc.string({ maxLength: 80 });
    fc.assert(
      fc.property(s, s, s, s, (a, b, c, d) => {
        const run = summary({ dagId: a, publisher: b, description: c, confirmedBy: d, runId: d });
        const outcomes: Outcome[] = [
          { kind: "command-error", message: a, helpLine: b },
          { kind: "refused", verb: "cap", reason: a, helpLine: b },
          { kind: "published", run, needsConfirmation: true, twoPersonRule: false },
          { kind: "exists", run },
          { kind: "conflict", dagId: a, existing: run, suggestion: b },
          { kind: "invalid-dag", source: a, issues: [b, c], moreIssues: 0 },
          { kind: "library-error", name: a, message: b },
          { kind: "decision", verb: "cancel", result: "done", run, by: c },
          { kind: "not-found", dagId: a, taskId: b, didYouMean: c, known: [d] },
          {
            kind: "status",
            run,
            summary: summarizeTasks(["failed"]),
            tasks: [line({ taskId: a, node: b, error: c })],
            at: T0,
          },
          { kind: "list", runs: [{ run, summary: summarizeTasks([]) }], at: T0 },
          { kind: "logs", run, task: line({ taskId: a }), output: b, omittedChars: 1, at: T0 },
          { kind: "retried", from: run, run, taskIds: [a, b], needsConfirmation: true },
          {
            kind: "nodes",
            nodes: [
              {
                nodeId: a,
                labels: [b],
                capacity: 1,
                runningTasks: 0,
                actions: [c],
                heartbeatAgeMs: 5,
                serves: false,
                undecryptable: 2,
                undecryptableReason: b,
                deviceSigned: false,
                release: null,
                protocol: 1,
              },
            ],
            leader: { nodeId: d, term: 1, expiresInMs: 1 },
            staleAfterMs: 1,
            at: T0,
          },
          { kind: "not-leader", roomId: a },
        ];
        for (const o of outcomes) {
          const out = renderOutcome(o);
          expect(out).not.toBeNull();
          expect(strayMarkup(out?.html ?? "")).toEqual([]);
        }
      }),
      { numRuns: 150 },
    );
  });
});

describe("the plan on a pending card", () => {
  const spec = (id: string, args: Record<string, string | number | boolean>, needs: string[] = []) => ({
    id,
    action: "echo",
    args,
    needs,
    on: { labels: [], node: null },
    timeoutMs: null,
    queueTimeoutMs: null,
    retries: 0,
    retryBackoffMs: 1000,
    concurrencyKey: null,
    priority: 0,
  });

  it("shows every task's action and arguments, escaped, and the content hash", () => {
    const dag = {
      id: "d",
      description: null,
      maxParallel: null,
      tasks: [spec("a", { message: '<b>"hi"</b>\n\u202eevil', n: 3 }), spec("b", { ok: true }, ["a"])],
    };
    const hash = "f".repeat(64);
    const out = renderPlan(dag, hash);
    expect(out.body).toBe(
      [
        "What runs if confirmed (content hash `ffffffffffff`):",
        '  a: echo message="<b>\\"hi\\"</b>\\n\\u{202e}evil" n=3',
        "  b: echo ok=true (after a)",
      ].join("\n"),
    );
    expect(out.html).not.toContain("<b>");
    expect(out.html).not.toContain("\u202e");
    expect(out.html).toContain("&lt;b&gt;");
  });

  it("cuts a long value and says so; folds a long task list; never grows past one event", () => {
    expect(showValue("x".repeat(500))).toBe(`"${"x".repeat(200)}"… (500 characters, cut)`);
    const many = Array.from({ length: 400 }, (_, i) => spec(`t${i}`, { message: "y".repeat(300) }));
    const out = renderPlan({ id: "d", description: null, maxParallel: null, tasks: many }, "a".repeat(64));
    expect(out.html).toContain("<details><summary>400 tasks</summary>");
    expect(out.body).toMatch(/… and \d+ more tasks not shown: read the DAG itself before confirming\.$/);
    const pending = run({
      status: "pending",
      confirmedBy: null,
      hash: "a".repeat(64),
      dag: { id: "backup", description: null, maxParallel: null, tasks: many },
    });
    const card = cardMessage(pending, [], T0);
    expect(jsonBytes(card.content)).toBeLessThanOrEqual(MAX_EVENT_CONTENT_BYTES);
    expect(String(card.content["body"])).toContain("`!dag confirm backup aaaaaaaaaaaa`");
    // Once confirmed, the card no longer carries the plan.
    expect(String(cardMessage(run({ dag: pending.dag }), [], T0).content["body"])).not.toContain(
      "What runs if confirmed",
    );
  });
});
