import { describe, expect, it } from "vitest";
import { parseDag } from "../../src/domain/dag.js";
import { toDot } from "../../src/adapters/graph/dot.js";
import { dagGraphOf } from "../../src/app/run-picture.js";
import {
  gateDecidedMessage,
  gateOpenMessage,
  gateProgressMessage,
} from "../../src/app/render/gate-messages.js";
import { inputsOf } from "../../src/app/status-cards.js";
import { FakeClock } from "../support/fake-clock.js";
import type { RunRecord, TaskRecord } from "../../src/ports/store.js";
import type { GateSpec, GateState } from "../../src/domain/gates.js";
import {
  decideGate,
  gateDeciderProblem,
  gateValuesProblem,
  openGateState,
  timeOutGate,
} from "../../src/domain/gates.js";

const GATED = `id = "rel"
[[tasks]]
id = "build"
action = "echo"
[[tasks]]
id = "ok"
needs = ["build"]
approve = { who = ["@a:x", "@b:x"], approvers = 2, timeout = "1h", on_timeout = "skip", description = "roll out", form = { ticket = "^[A-Z]+-[0-9]+$" } }
`;

function issuesOf(text: string): string[] {
  const r = parseDag(text, "toml");
  if (r.ok) throw new Error("expected issues");
  return r.issues.map((i) => `${i.path}: ${i.message}`);
}

describe("a gate in the DAG format", () => {
  it("parses approve = { ... } into a gate with its defaults", () => {
    const r = parseDag(GATED, "toml");
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    const gate = r.dag.tasks[1]!;
    expect(gate.action).toBe("approve");
    expect(gate.gate).toEqual({
      who: ["@a:x", "@b:x"],
      approvers: 2,
      publisherMayApprove: false,
      timeoutMs: 3_600_000,
      onTimeout: "skip",
      description: "roll out",
      form: { ticket: "^[A-Z]+-[0-9]+$" },
    });
    expect(r.dag.tasks[0]!.gate).toBeUndefined();
    // The form's fields are the gate's outputs: a dependent reads {tasks.ok.outputs.ticket}.
    expect(gate.outputs).toEqual({ ticket: "^[A-Z]+-[0-9]+$" });
    const using = parseDag(
      `${GATED}[[tasks]]\nid = "deploy"\naction = "echo"\nneeds = ["ok"]\nargs = { t = "{tasks.ok.outputs.ticket}" }\n`,
      "toml",
    );
    expect(using.ok).toBe(true);
    const typo = parseDag(
      `${GATED}[[tasks]]\nid = "deploy"\naction = "echo"\nneeds = ["ok"]\nargs = { t = "{tasks.ok.outputs.tiket}" }\n`,
      "toml",
    );
    expect(typo.ok ? [] : typo.issues.map((i) => i.message).join("\n")).toMatch(
      /declares no output "tiket" \(it declares ticket\)/,
    );
    const minimal = parseDag(`id = "m"\n[[tasks]]\nid = "g"\napprove = {}\n`, "toml");
    expect(minimal.ok && minimal.dag.tasks[0]!.gate).toEqual({
      who: "operators",
      approvers: 1,
      publisherMayApprove: false,
      timeoutMs: null,
      onTimeout: "fail",
      description: null,
      form: {},
    });
  });

  it("names each mistake of a gate at its place", () => {
    // Mistakes inside a gate come first (the document's own checks run once each part parses).
    const inner = issuesOf(`id = "rel"
[[tasks]]
id = "g"
approve = { who = "ops", approverz = 3, form = { "bad name" = "x", t = "(" } }
[[tasks]]
id = "who"
approve = { who = ["alice"] }
`).join("\n");
    expect(inner).toContain(
      'tasks[0].approve.who: expected "operators", a list of user ids or a power level, got "ops"',
    );
    expect(inner).toMatch(/tasks\[0\]\.approve\.approverz: unknown key \(did you mean "approvers"\?\)/);
    expect(inner).toMatch(/tasks\[0\]\.approve\.form\["bad name"\]: field name contains/);
    expect(inner).toMatch(/tasks\[0\]\.approve\.form\.t: is not a valid RE2 pattern/);
    expect(inner).toContain(
      'tasks[1].approve.who[0]: expected a Matrix user id like "@alice:example.org", got "alice"',
    );
    const issues = issuesOf(`id = "rel"
[[tasks]]
id = "g"
retries = 2
approve = { on_timeout = "skip" }
[[tasks]]
id = "both"
action = "echo"
approve = { who = 50 }
[[tasks]]
id = "none"
[[tasks]]
id = "many"
approve = { who = ["@a:x"], approvers = 2 }
`);
    const text = issues.join("\n");
    expect(text).toContain("tasks[0].retries: means nothing on an approval gate");
    expect(text).toContain("tasks[0].approve.on_timeout: only means something with a timeout");
    expect(text).toContain("tasks[1].approve: a task is an action or an approval gate, not both");
    expect(text).toContain('tasks[2].action: is required (or "approve", to make the task an approval gate)');
    expect(text).toContain(
      "tasks[3].approve.approvers: asks for 2 approvers, but only 1 person is listed in who",
    );
  });
});

const SPEC: GateSpec = {
  who: "operators",
  approvers: 2,
  publisherMayApprove: false,
  timeoutMs: 60_000,
  onTimeout: "fail",
  description: null,
  form: { ticket: "^[A-Z]+-[0-9]+$" },
};
const RUN = { publisher: "@pub:x", confirmedBy: "@conf:x", twoPersonRule: true };
const member = (id: string, operator: boolean, powerLevel = operator ? 50 : 0) =>
  ({ kind: "room-member", id, operator, powerLevel }) as const;

describe("who may decide on a gate", () => {
  it("reads operators, lists and power levels, and keeps the publisher and confirmer out under two-person", () => {
    expect(gateDeciderProblem(SPEC, member("@a:x", true), RUN)).toBeNull();
    expect(gateDeciderProblem(SPEC, member("@c:x", false), RUN)).toBe(
      "only the room's operators may decide on this gate",
    );
    expect(gateDeciderProblem(SPEC, member("@pub:x", true), RUN)).toMatch(
      /you published this run, and the two-person rule is on/,
    );
    expect(gateDeciderProblem(SPEC, member("@conf:x", true), RUN)).toMatch(/you confirmed this run/);
    // publisher_may_approve cannot loosen the room's rule; without the rule it lets them in.
    const open = { ...SPEC, publisherMayApprove: true };
    expect(gateDeciderProblem(open, member("@pub:x", true), RUN)).not.toBeNull();
    expect(gateDeciderProblem(open, member("@pub:x", true), { ...RUN, twoPersonRule: false })).toBeNull();
    expect(gateDeciderProblem(SPEC, member("@pub:x", true), { ...RUN, twoPersonRule: false })).toMatch(
      /publisher_may_approve/,
    );
    const listed = { ...SPEC, who: ["@b:x"] };
    expect(gateDeciderProblem(listed, member("@b:x", false), RUN)).toBeNull();
    expect(gateDeciderProblem(listed, member("@a:x", true), RUN)).toBe("only @b:x may decide on this gate");
    const level = { ...SPEC, who: 75 };
    expect(gateDeciderProblem(level, member("@a:x", true, 75), RUN)).toBeNull();
    expect(gateDeciderProblem(level, member("@a:x", true, 74), RUN)).toMatch(/power level 75 or more/);
    expect(gateDeciderProblem(level, { kind: "local-operator", id: "local:x" }, RUN)).toBeNull();
  });
});

describe("what a decision does to a gate", () => {
  const approve = (by: string, values: Record<string, string> = {}) =>
    ({ decision: "approve", by, face: "chat", values, reason: null }) as const;

  it("counts distinct approvers, merges the form and approves at the Nth with every field filled", () => {
    const open: GateState = openGateState(1000, SPEC);
    expect(open.deadline).toBe(61_000);
    expect(decideGate(SPEC, "blocked", null, approve("@a:x"), 1)).toEqual({ kind: "not-open" });
    const first = decideGate(SPEC, "blocked", open, approve("@a:x", { ticket: "OPS-1" }), 2000);
    expect(first.kind).toBe("recorded");
    if (first.kind !== "recorded") return;
    expect(first.missing).toBe(1);
    expect(decideGate(SPEC, "blocked", first.state, approve("@a:x"), 2100).kind).toBe("already");
    const other = decideGate(SPEC, "blocked", first.state, approve("@b:x", { ticket: "OPS-2" }), 2200);
    expect(other).toEqual({
      kind: "form",
      message: expect.stringContaining("@a:x approved with ticket=OPS-1"),
    });
    const second = decideGate(SPEC, "blocked", first.state, approve("@b:x"), 3000);
    expect(second.kind).toBe("approved");
    if (second.kind !== "approved") return;
    expect(second.state.values).toEqual({ ticket: "OPS-1" });
    expect(second.state.approvals.map((a) => a.by)).toEqual(["@a:x", "@b:x"]);
    expect(second.state.decision).toMatchObject({ kind: "approved", by: "@b:x", at: 3000 });
    expect(decideGate(SPEC, "succeeded", second.state, approve("@c:x"), 4000).kind).toBe("closed");
  });

  it("judges the deadline on the decision's clock: at or after it, nothing passes, even before the reaper", () => {
    const open = openGateState(1000, SPEC);
    const first = decideGate(SPEC, "blocked", open, approve("@a:x", { ticket: "OPS-1" }), 60_999);
    if (first.kind !== "recorded") throw new Error(first.kind);
    expect(decideGate(SPEC, "blocked", first.state, approve("@b:x"), 61_000)).toEqual({
      kind: "closed",
      state: first.state,
      message: "its deadline passed at 00:01 UTC; it times out",
    });
    const deny = { decision: "deny", by: "@b:x", face: "chat", values: {}, reason: null } as const;
    expect(decideGate(SPEC, "blocked", first.state, deny, 70_000).kind).toBe("closed");
    // Without a timeout there is no deadline.
    const endless = openGateState(1000, { ...SPEC, timeoutMs: null });
    expect(decideGate(SPEC, "blocked", endless, approve("@a:x"), 9e12).kind).toBe("recorded");
  });

  it("counts the CLI and every HTTP token as one approver, the local operator; each room member as one", () => {
    const byCli = decideGate(
      SPEC,
      "blocked",
      openGateState(0, SPEC),
      approve("local:root", { ticket: "A-1" }),
      1,
    );
    if (byCli.kind !== "recorded") throw new Error(byCli.kind);
    expect(decideGate(SPEC, "blocked", byCli.state, approve("http:ops"), 2).kind).toBe("already");
    expect(decideGate(SPEC, "blocked", byCli.state, approve("local:other"), 2).kind).toBe("already");
    expect(decideGate(SPEC, "blocked", byCli.state, approve("@a:x"), 2).kind).toBe("approved");
    const byMember = decideGate(
      SPEC,
      "blocked",
      openGateState(0, SPEC),
      approve("@a:x", { ticket: "A-1" }),
      1,
    );
    if (byMember.kind !== "recorded") throw new Error(byMember.kind);
    expect(decideGate(SPEC, "blocked", byMember.state, approve("http:ops"), 2).kind).toBe("approved");
    expect(decideGate(SPEC, "blocked", byMember.state, approve("@b:x"), 2).kind).toBe("approved");
  });

  it("refuses the last approval while a field is empty, and a deny ends it at once", () => {
    const open = openGateState(0, SPEC);
    const first = decideGate(SPEC, "blocked", open, approve("@a:x"), 1);
    if (first.kind !== "recorded") throw new Error(first.kind);
    const last = decideGate(SPEC, "blocked", first.state, approve("@b:x"), 2);
    expect(last).toEqual({ kind: "form", message: expect.stringContaining("its form still needs ticket=…") });
    const deny = decideGate(
      SPEC,
      "blocked",
      first.state,
      { decision: "deny", by: "@b:x", face: "cli", values: {}, reason: "not today" },
      3,
    );
    expect(deny.kind).toBe("denied");
    expect(deny.kind === "denied" && deny.state.decision).toEqual({
      kind: "denied",
      by: "@b:x",
      face: "cli",
      at: 3,
      reason: "not today",
    });
    expect(timeOutGate(SPEC, open, 9).to).toBe("timed_out");
    expect(timeOutGate({ ...SPEC, onTimeout: "skip" }, open, 9).to).toBe("skipped");
  });

  it("checks form values against their patterns and names unknown fields", () => {
    expect(gateValuesProblem(SPEC, { ticket: "OPS-12" })).toBeNull();
    expect(gateValuesProblem(SPEC, { ticket: "-rf" })).toMatch(
      /field "ticket": .* does not match its pattern/,
    );
    expect(gateValuesProblem(SPEC, { tciket: "OPS-1" })).toBe(
      'this gate\'s form has no field "tciket"; its fields: ticket',
    );
    expect(gateValuesProblem({ ...SPEC, form: {} }, { a: "b" })).toMatch(/this gate has no form/);
  });

  it("refuses a form value holding a reference, as an output's, whatever its pattern admits", () => {
    const open = { ...SPEC, form: { note: ".*" } };
    for (const value of ["{params.p}", "x{tasks.build.outputs.v}y"])
      expect(gateValuesProblem(open, { note: value })).toBe(
        'field "note" holds a {params.…}, {tasks.…} or {item} reference, which a form value may not: it becomes the gate\'s output',
      );
    expect(gateValuesProblem(open, { note: "a\nb" })).toMatch(/more than one line/);
    expect(gateValuesProblem(open, { note: "{params}" })).toBeNull();
  });
});

describe("a gate in a picture", () => {
  it("is a hexagon captioned approval gate; an action's box is not", () => {
    const r = parseDag(GATED, "toml");
    if (!r.ok) throw new Error("invalid");
    const graph = dagGraphOf(r.dag);
    const box = graph.boxes.find((b) => b.title === "ok")!;
    expect(box).toMatchObject({ gate: true, caption: "approval gate" });
    expect(graph.boxes.find((b) => b.title === "build")!.gate).toBeUndefined();
    const dot = toDot(graph);
    const line = (id: string) => dot.split("\n").find((l) => l.includes(`id="task-${id}"`)) ?? "";
    expect(line("ok")).toContain("shape=hexagon");
    expect(line("build")).not.toContain("hexagon");
  });
});

describe("a gate's message in chat", () => {
  const run = {
    runId: "r-1",
    roomId: "!room:x",
    dagId: "rel",
    hash: "h",
    status: "running",
    description: null,
    maxParallel: null,
    publisher: "@pub:x",
    publishEventId: "$pub",
    confirmedBy: "@conf:x",
    confirmDeadline: null,
    createdAt: 0,
    updatedAt: 0,
    dag: { id: "rel", description: null, maxParallel: null, tasks: [] },
  } as unknown as RunRecord;
  const task = (state: GateState) =>
    ({
      taskId: "ok",
      gate: { ...SPEC, description: "roll out", timeoutMs: 60_000 },
      gateState: state,
    }) as unknown as TaskRecord & {
      gate: GateSpec;
      gateState: GateState;
    };

  it("at most three short lines: who must act on what, how, until when and what runs after", () => {
    const opened = Date.UTC(2026, 10, 28, 7, 21);
    const open = openGateState(opened, { ...SPEC, timeoutMs: 4 * 3_600_000 });
    const message = gateOpenMessage(
      run,
      task(open),
      ["deploy"],
      ["@a:x", "@b:x"],
      { version: "2.7.0" },
      opened,
    );
    expect(message.txnId).toBe("gate.r-1.ok");
    expect(message.content["m.mentions"]).toEqual({ user_ids: ["@a:x", "@b:x"] });
    expect(message.content["m.relates_to"]).toMatchObject({ rel_type: "m.thread", event_id: "$pub" });
    expect(String(message.content["body"]).split("\n")).toEqual([
      "🚦 @a:x, @b:x: approve `rel/ok` — roll out · `version=2.7.0`",
      "React ✅ to approve or ❌ to deny, or send `!dag approve rel ok ticket=…` · 2 approvals by different people · the form needs `ticket`",
      "Expires at 11:21 UTC (in 4h): then it fails; once approved, `deploy` runs",
    ]);
    expect(String(message.content["formatted_body"])).toContain("<br/>");
    // Without a deadline or anything after it: two lines.
    const plain = gateOpenMessage(
      run,
      task(openGateState(opened, { ...SPEC, timeoutMs: null })),
      [],
      [],
      {},
      opened,
    );
    expect(String(plain.content["body"]).split("\n")).toEqual([
      "🚦 the room's operators: approve `rel/ok` — roll out",
      "React ✅ to approve or ❌ to deny, or send `!dag approve rel ok ticket=…` · 2 approvals by different people · the form needs `ticket`",
    ]);
  });

  it('counts its "in 4h" from when the text is written, not from when the gate opened', async () => {
    // The fake clock's wall time is the gate's opening, 07:21 UTC; its deadline is 4 hours on.
    const opened = Date.UTC(2026, 10, 28, 7, 21);
    const clock = new FakeClock(0, opened);
    const open = openGateState(clock.wallMs(), { ...SPEC, timeoutMs: 4 * 3_600_000 });
    const third = (m: { content: Record<string, unknown> } | null) => {
      const c = m!.content;
      const body = (c["m.new_content"] as Record<string, unknown> | undefined)?.["body"] ?? c["body"];
      return String(body).split("\n")[2];
    };
    const openedNow = () => gateOpenMessage(run, task(open), ["deploy"], [], {}, clock.wallMs());
    expect(third(openedNow())).toBe(
      "Expires at 11:21 UTC (in 4h): then it fails; once approved, `deploy` runs",
    );
    // The message first sent 3h10m later (a new leader catching up): the same clock time, 50 minutes.
    await clock.advance(3 * 3_600_000 + 10 * 60_000);
    expect(third(openedNow())).toBe(
      "Expires at 11:21 UTC (in 50m): then it fails; once approved, `deploy` runs",
    );
    // An approval's edit written then says the same, not the 4h the first text said.
    const one = {
      ...open,
      approvals: [{ by: "@a:x", face: "chat" as const, at: clock.wallMs(), values: {} }],
    };
    const edit = gateProgressMessage(run, task(one), ["deploy"], [], {}, clock.wallMs());
    expect(third(edit)).toBe("Expires at 11:21 UTC (in 50m): then it fails; once approved, `deploy` runs");
    // Past its deadline, before the reaper times it out: no time left is promised.
    await clock.advance(60 * 60_000);
    expect(third(openedNow())).toBe(
      "Expires at 11:21 UTC (due now): then it fails; once approved, `deploy` runs",
    );
    // Written the day before its deadline, the clock time carries its date.
    const early = openGateState(opened, { ...SPEC, timeoutMs: 30 * 3_600_000 });
    expect(third(gateOpenMessage(run, task(early), [], [], {}, opened))).toBe(
      "Expires at 2026-11-29 13:21 UTC (in 30h): then it fails",
    );
    expect(third(gateOpenMessage(run, task(early), [], [], {}, opened + 20 * 3_600_000))).toBe(
      "Expires at 13:21 UTC (in 10h): then it fails",
    );
  });

  it("is edited after an approval that did not pass it, and once decided: who, when; nobody is pinged again", () => {
    const opened = Date.UTC(2026, 10, 26, 21, 0);
    const open = openGateState(opened, { ...SPEC, timeoutMs: 60_000 });
    expect(gateDecidedMessage(run, task(open))).toBeNull();
    expect(gateProgressMessage(run, task(open), [], ["@a:x", "@b:x"], {}, opened)).toBeNull();
    const one = {
      ...open,
      approvals: [{ by: "@a:x", face: "chat" as const, at: opened + 1_000, values: {} }],
    };
    const progress = gateProgressMessage(run, task(one), [], ["@a:x", "@b:x"], {}, opened + 1_000)!;
    expect(progress.txnId).toBe("gate.r-1.ok.a1");
    expect(progress.replacesTxnId).toBe("gate.r-1.ok");
    expect(progress.content["m.mentions"]).toEqual({});
    const newBody = String((progress.content["m.new_content"] as Record<string, unknown>)["body"]);
    expect(newBody).toContain("approved so far by @a:x (1 of 2)");
    expect(String(progress.content["body"])).toBe("* 🚦 @a:x, @b:x: approve `rel/ok` — roll out");

    const at = Date.UTC(2026, 10, 26, 21, 5);
    const denied = gateDecidedMessage(
      run,
      task({ ...open, decision: { kind: "denied", by: "@a:x", face: "chat", at, reason: "no" } }),
    )!;
    expect(denied.replacesTxnId).toBe("gate.r-1.ok");
    expect(denied.content["m.mentions"]).toEqual({});
    expect(String((denied.content["m.new_content"] as Record<string, unknown>)["body"])).toBe(
      "❌ `rel/ok` denied by @a:x at 21:05 UTC: no.",
    );
    const approvedBy = (approvals: string[]) =>
      String(
        (
          gateDecidedMessage(
            run,
            task({
              ...open,
              approvals: approvals.map((by) => ({ by, face: "chat" as const, at, values: {} })),
              values: { ticket: "OPS-7" },
              decision: { kind: "approved", by: approvals.at(-1)!, face: "chat", at, reason: null },
            }),
          )!.content["m.new_content"] as Record<string, unknown>
        )["body"],
      );
    expect(approvedBy(["@a:x"])).toBe("✅ `rel/ok` approved by @a:x at 21:05 UTC · `ticket=OPS-7`.");
    expect(approvedBy(["@a:x", "@b:x"])).toBe(
      "✅ `rel/ok` approved by @a:x, @b:x, the last at 21:05 UTC · `ticket=OPS-7`.",
    );
    const late = gateDecidedMessage(run, task(timeOutGate(SPEC, open, at).state))!;
    expect(String((late.content["m.new_content"] as Record<string, unknown>)["body"])).toBe(
      "⌛ `rel/ok` timed out at 21:05 UTC: nobody decided in time, so it failed.",
    );
  });

  it("what is approved: the values its needs published, named by task where two share a name", () => {
    const need = (taskId: string, outputValues: Record<string, string> | null) =>
      ({ taskId, needs: [], outputValues }) as unknown as TaskRecord;
    const gate = { taskId: "ok", needs: ["build", "scan"], outputValues: null } as unknown as TaskRecord;
    expect(inputsOf(gate, [need("build", { version: "2.7.0" }), need("other", { x: "1" })])).toEqual({
      version: "2.7.0",
    });
    expect(
      inputsOf(gate, [need("build", { version: "2.7.0", sha: "abc" }), need("scan", { version: "ok" })]),
    ).toEqual({ "build.version": "2.7.0", sha: "abc", "scan.version": "ok" });
  });
});
