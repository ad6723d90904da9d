/** The pure parts of the command table: inbox content decoding, permissions, help filtering, table shape. */
import { describe, expect, it } from "vitest";
import type { CommandPolicy, HandlerContext } from "../../src/app/commands/context.js";
import { decodeInboxContent } from "../../src/app/commands/inbox-intent.js";
import { unwrapOutcome, wrapOutcome } from "../../src/app/commands/outcome.js";
import { checkTwoPersonRule } from "../../src/app/commands/run-decisions.js";
import {
  COMMAND_HANDLERS,
  checkPermission,
  commandErrorOutcome,
  handleHelp,
} from "../../src/app/commands/table.js";
import { COMMAND_VERBS, COMMANDS } from "../../src/app/commands/verbs/index.js";
import { parseCommand } from "../../src/app/commands/verbs/index.js";
import type { SenderStanding } from "../../src/ports/permissions.js";
import { INBOX_EVENT_TYPE_KEY } from "../../src/ports/store.js";

const policy: CommandPolicy = {
  requiredPowerLevel: 50,
  allowlist: [],
  twoPersonRule: true,
  autoConfirm: [],
  confirmTimeoutMs: 3_600_000,
  nodeStaleAfterMs: 30_000,
};
const member = (powerLevel: number, allowlisted = false): SenderStanding => ({
  kind: "room-member",
  powerLevel,
  allowlisted,
  adminLevel: 100,
});

/** handleHelp and commandErrorOutcome read only the standing and the policy; no store is touched. */
function ctx(standing: SenderStanding): HandlerContext {
  return {
    store: {} as HandlerContext["store"],
    fence: null,
    roomId: "!r:test",
    sender: "@s:test",
    eventId: null,
    standing,
    policy,
    loadDag: async () => ({ ok: false, message: "none" }),
  };
}

describe("the command table", () => {
  it("has one entry per verb of the domain table, with the domain's permission", () => {
    expect(Object.keys(COMMAND_HANDLERS).sort()).toEqual([...COMMAND_VERBS].sort());
    for (const info of COMMANDS) {
      expect(COMMAND_HANDLERS[info.verb].permission).toBe(info.permission);
      expect(COMMAND_HANDLERS[info.verb].verb).toBe(info.verb);
    }
  });

  it("operator verbs are exactly publish, run, confirm, reject, cancel, mark, retry, cap, logs, policy and schedule", () => {
    const operator = COMMANDS.filter((c) => COMMAND_HANDLERS[c.verb].permission === "operator").map(
      (c) => c.verb,
    );
    expect(operator.sort()).toEqual([
      "cancel",
      "cap",
      "confirm",
      "logs",
      "mark",
      "policy",
      "publish",
      "reject",
      "retry",
      "run",
      "schedule",
    ]);
  });
});

describe("permissions", () => {
  it("refuses below the power level, naming the level needed and the level held", () => {
    expect(checkPermission("publish", member(10), policy)).toEqual({
      ok: false,
      reason:
        "you need power level 50 in this room (or a place on the allowlist) to use publish; you have 10",
    });
    expect(checkPermission("publish", member(50), policy)).toEqual({ ok: true });
    expect(checkPermission("cap", member(0, true), policy)).toEqual({ ok: true });
    expect(checkPermission("cap", { kind: "local-operator" }, policy)).toEqual({ ok: true });
  });

  it("open verbs need nothing", () => {
    for (const verb of ["help", "status", "list", "graph", "nodes"] as const) {
      expect(checkPermission(verb, member(0), policy)).toEqual({ ok: true });
    }
  });

  it("logs are for operators unless the room's policy opens them to anyone", () => {
    expect(checkPermission("logs", member(0), policy).ok).toBe(false);
    expect(checkPermission("logs", member(0), { ...policy, logs: "operators" }).ok).toBe(false);
    expect(checkPermission("logs", member(50), policy).ok).toBe(true);
    expect(checkPermission("logs", member(0), { ...policy, logs: "anyone" }).ok).toBe(true);
  });

  it("the two-person rule stops the publisher only, and only when on", () => {
    expect(checkTwoPersonRule("@a:t", "@a:t", member(100), policy).ok).toBe(false);
    expect(checkTwoPersonRule("@a:t", "@b:t", member(100), policy).ok).toBe(true);
    expect(checkTwoPersonRule("@a:t", "@a:t", member(100), { ...policy, twoPersonRule: false }).ok).toBe(
      true,
    );
    expect(checkTwoPersonRule("cli", "cli", { kind: "local-operator" }, policy).ok).toBe(true);
  });

  it("help is filtered to what the sender may do and names what the rest needs", () => {
    const low = handleHelp(ctx(member(0)), null);
    expect(low.kind).toBe("help");
    if (low.kind !== "help") return;
    expect(low.entries.map((e) => e.verb)).toEqual([
      "help",
      "approve",
      "deny",
      "status",
      "list",
      "schedules",
      "triggers",
      "graph",
      "nodes",
    ]);
    expect(low.hiddenVerbs).toEqual([
      "publish",
      "run",
      "confirm",
      "reject",
      "cancel",
      "mark",
      "schedule",
      "logs",
      "retry",
      "cap",
      "policy",
    ]);
    const high = handleHelp(ctx(member(100)), null);
    expect(high.kind === "help" && high.entries.length).toBe(COMMANDS.length);
    expect(high.kind === "help" && high.hiddenVerbs).toEqual([]);
    const topic = handleHelp(ctx(member(0)), "cap");
    expect(topic.kind === "help" && topic.hiddenVerbs).toEqual(["cap"]);
    expect(topic.kind === "help" && topic.details.length).toBeGreaterThan(0);
  });

  it("a malformed operator command from someone without the level is refused before its syntax is judged", () => {
    const parsed = parseCommand({ body: "!dag cap lots" });
    expect(parsed.kind).toBe("error");
    if (parsed.kind !== "error") return;
    expect(commandErrorOutcome(ctx(member(0)), parsed.error).kind).toBe("refused");
    const error = commandErrorOutcome(ctx(member(50)), parsed.error);
    expect(error).toEqual({
      kind: "command-error",
      message: parsed.error.message,
      helpLine: parsed.error.helpLine,
    });
    expect(error.kind === "command-error" && error.helpLine).toContain("!dag cap");
  });
});

describe("inbox content", () => {
  it("reads a message, with its thread", () => {
    expect(decodeInboxContent({ msgtype: "m.text", body: "!dag list" })).toEqual({
      kind: "message",
      input: { body: "!dag list", formattedBody: null, format: null },
      threadRoot: null,
    });
    const threaded = decodeInboxContent({
      body: "!dag status",
      format: "org.matrix.custom.html",
      formatted_body: "<p>!dag status</p>",
      "m.relates_to": { rel_type: "m.thread", event_id: "$root", is_falling_back: true },
    });
    expect(threaded).toEqual({
      kind: "message",
      input: { body: "!dag status", formattedBody: "<p>!dag status</p>", format: "org.matrix.custom.html" },
      threadRoot: "$root",
    });
  });

  it("reads ✅ and ❌ reactions, with or without the emoji variation selector", () => {
    const react = (key: string) =>
      decodeInboxContent({
        "m.relates_to": { rel_type: "m.annotation", event_id: "$card", key },
        [INBOX_EVENT_TYPE_KEY]: "m.reaction",
      });
    expect(react("✅")).toEqual({ kind: "reaction", targetEventId: "$card", decision: "confirm" });
    expect(react("✔️")).toEqual({ kind: "reaction", targetEventId: "$card", decision: "confirm" });
    expect(react("❌")).toEqual({ kind: "reaction", targetEventId: "$card", decision: "reject" });
    expect(react("👍").kind).toBe("other");
  });

  it("only an m.reaction event decides: a message with a reaction's fields is not a reaction", () => {
    const relation = { rel_type: "m.annotation", event_id: "$card", key: "✅" };
    for (const content of [
      { body: "!dag help", "m.relates_to": relation, [INBOX_EVENT_TYPE_KEY]: "m.room.message" },
      { body: "!dag help", "m.relates_to": relation },
      { "m.relates_to": relation },
    ]) {
      expect(decodeInboxContent(content).kind).toBe("other");
    }
    expect(decodeInboxContent({ body: "!dag help", targetEventId: "$card", key: "✅" }).kind).toBe("message");
  });

  it("reads the camelCase message shape of the chat port", () => {
    expect(
      decodeInboxContent({
        body: "!dag list",
        formattedBody: "<b>x</b>",
        relatesTo: { relType: "m.thread", eventId: "$t" },
      }),
    ).toEqual({
      kind: "message",
      input: { body: "!dag list", formattedBody: "<b>x</b>", format: null },
      threadRoot: "$t",
    });
  });

  it("an edit is an edit (answered, never applied); bodiless events are not commands", () => {
    expect(
      decodeInboxContent({ body: "* !dag list", "m.relates_to": { rel_type: "m.replace", event_id: "$x" } }),
    ).toEqual({ kind: "edit", editedEventId: "$x" });
    expect(decodeInboxContent({ body: 42 }).kind).toBe("other");
  });
});

describe("stored outcomes", () => {
  it("round-trip through JSON and are told apart from results the store wrote", () => {
    const outcome = { kind: "cap" as const, cap: 2, previous: 5 };
    const stored = JSON.parse(JSON.stringify(wrapOutcome(outcome))) as Record<string, unknown>;
    expect(unwrapOutcome(stored)).toEqual(outcome);
    expect(unwrapOutcome({ op: "publish", kind: "created", runId: "r" })).toBeNull();
    expect(unwrapOutcome(null)).toBeNull();
  });
});

describe("what the room sees is what the bot reads", () => {
  const html = (formatted: string, body: string) =>
    parseCommand({ body, formattedBody: formatted, format: "org.matrix.custom.html" });

  it("refuses a message whose formatted text says another command than its body", () => {
    const body = '!dag publish\n```json\n{"id":"x","tasks":[{"id":"t","action":"env"}]}\n```';
    const shown =
      '<p>!dag publish</p><pre><code class="language-json">{"id":"x","tasks":[{"id":"t","action":"echo"}]}</code></pre>';
    const out = html(shown, body);
    expect(out.kind === "error" && out.error.code).toBe("formatted-mismatch");
    expect(out.kind === "error" && out.error.verb).toBe("publish");
    const other = html("!dag confirm y", "!dag confirm x");
    expect(other.kind === "error" && other.error.code).toBe("formatted-mismatch");
    // Formatted text that is no command at all hides the command from readers: refused too.
    expect(html("<p>hello</p>", "!dag cancel x").kind).toBe("error");
  });

  it("accepts the same command in both, as clients render markdown", () => {
    const body = '!dag publish\n```json\n{"id":"x"}\n```';
    const shown = '<p>!dag publish</p>\n<pre><code class="language-json">{"id":"x"}  \n</code></pre>\n';
    expect(html(shown, body)).toMatchObject({ kind: "command", command: { verb: "publish" } });
    expect(html("!dag confirm <code>x</code>", "!dag confirm `x`")).toMatchObject({ kind: "command" });
    // Without formatted text the body is all there is.
    expect(parseCommand({ body: "!dag confirm x" })).toMatchObject({ kind: "command" });
  });

  it("confirm takes an optional hash prefix of 8 to 64 hex digits", () => {
    expect(parseCommand({ body: "!dag confirm x ABCDEF12" })).toEqual({
      kind: "command",
      command: { verb: "confirm", id: "x", hash: "abcdef12" },
    });
    expect(parseCommand({ body: "!dag confirm x" })).toEqual({
      kind: "command",
      command: { verb: "confirm", id: "x", hash: null },
    });
    for (const bad of ["abc", "xyz12345", "a".repeat(65)]) {
      const out = parseCommand({ body: `!dag confirm x ${bad}` });
      expect(out.kind === "error" && out.error.code).toBe("bad-hash");
    }
  });
});
