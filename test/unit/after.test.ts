import { describe, expect, it } from "vitest";
import { afterCycle, afterMatches, triggerWords } from "../../src/domain/after.js";
import type { Outcome } from "../../src/app/commands/outcome.js";
import { renderOutcome } from "../../src/app/render/reply.js";
import { parseDag } from "../../src/domain/dag.js";
import { buildRunGraph } from "../../src/domain/run-graph.js";
import type { ParsedDag } from "../../src/domain/model.js";
import { afterFiring } from "../../src/app/after.js";
import type { DefinitionRecord, RunRecord } from "../../src/ports/store.js";

const doc = (after: string, params = 'version = { pattern = "[0-9.]+", default = "0" }'): string =>
  `id = "deploy"\n${after}\n[params]\n${params}\n[[tasks]]\nid = "t"\naction = "echo"\n`;

function parsed(text: string): ParsedDag {
  const r = parseDag(text, "toml");
  if (!r.ok) throw new Error(JSON.stringify(r.issues));
  return r.dag;
}

function issues(text: string): string[] {
  const r = parseDag(text, "toml");
  return r.ok ? [] : r.issues.map((i) => `${i.path}: ${i.message}`);
}

describe("after: the declaration", () => {
  it("defaults to succeeded, takes a status or a list, folds finished", () => {
    expect(parsed(doc('after = { dag = "build" }')).after).toEqual({
      dag: "build",
      status: ["succeeded"],
      params: {},
    });
    expect(parsed(doc('after = { dag = "build", status = ["failed", "canceled"] }')).after?.status).toEqual([
      "failed",
      "canceled",
    ]);
    expect(parsed(doc('after = { dag = "build", status = ["failed", "finished"] }')).after?.status).toEqual([
      "finished",
    ]);
  });

  it("refuses an unknown status, itself, an undeclared parameter and a source that is no value", () => {
    expect(issues(doc('after = { dag = "build", status = "done" }')).join("\n")).toMatch(
      /after\.status.*must be one of/,
    );
    expect(issues(doc('after = { dag = "deploy" }')).join("\n")).toMatch(/cannot run after itself/);
    expect(issues(doc('after = { dag = "b", params = { tag = "params.tag" } }')).join("\n")).toMatch(
      /after\.params\.tag.*does not declare/,
    );
    expect(issues(doc('after = { dag = "b", params = { version = "env.HOME" } }')).join("\n")).toMatch(
      /is not a value of the upstream run/,
    );
    // z.record would drop an own __proto__ key silently; it is refused by name, from JSON and TOML.
    const json = parseDag(
      '{"id":"d","params":{"v":{"pattern":".*","default":"1"}},"after":{"dag":"b","params":{"__proto__":"params.v"}},"tasks":[{"id":"t","action":"echo"}]}',
      "json",
    );
    expect(json.ok ? [] : json.issues.map((i) => `${i.path}: ${i.message}`)).toEqual([
      'after.params.__proto__: "__proto__" is a reserved name',
    ]);
    expect(issues(doc('after = { dag = "b", params = { __proto__ = "params.v" } }')).join("\n")).toMatch(
      /after\.params\.__proto__: .*reserved name/,
    );
    expect(issues(doc('after = { dag = "b", params = { version = 3 } }')).join("\n")).toMatch(
      /after\.params\.version: expected where the value comes from/,
    );
    expect(
      parsed(doc('after = { dag = "b", params = { version = "tasks.pack.age.outputs.v" } }')).after?.params,
    ).toEqual({ version: "tasks.pack.age.outputs.v" });
  });
});

describe("after: firing", () => {
  const upstreamDag: ParsedDag = {
    ...parsed(
      'id = "build"\n[params]\nv = { pattern = ".*", default = "1.2" }\n[[tasks]]\nid = "pack"\naction = "echo"\n',
    ),
    values: { v: "1.2" },
  };
  // Started at once (nobody had to confirm it), as a run on auto_confirm or a slot's.
  const upstream = (
    status: RunRecord["status"],
    dag: ParsedDag = upstreamDag,
    approval: Pick<RunRecord, "confirmedBy" | "confirmDeadline"> = {
      confirmedBy: null,
      confirmDeadline: null,
    },
  ): RunRecord => ({ runId: "u-1", roomId: "r", dagId: "build.3", status, dag, ...approval }) as RunRecord;
  const def = (after: string): DefinitionRecord =>
    ({
      roomId: "r",
      dagId: "deploy",
      dag: parsed(doc(after)),
      publisher: "@o:x",
      origin: { runId: "d-1", status: "succeeded", confirmedBy: "@c:x", confirmDeadline: 1 },
    }) as DefinitionRecord;

  it("matches the statuses named; finished is any end, never rejected or expired", () => {
    expect(afterMatches({ status: ["succeeded"] }, "succeeded")).toBe(true);
    expect(afterMatches({ status: ["succeeded"] }, "failed")).toBe(false);
    expect(afterMatches({ status: ["finished"] }, "canceled")).toBe(true);
    expect(afterMatches({ status: ["finished"] }, "rejected")).toBe(false);
  });

  it("fires with the mapped value, checked against this DAG's pattern", () => {
    const f = afterFiring(
      def('after = { dag = "build", params = { version = "params.v" } }'),
      upstream("succeeded"),
      null,
      null,
    );
    expect(f.fire?.dag.values).toEqual({ version: "1.2" });
    expect(f.fire?.dag.trigger).toMatchObject({ run: "build.3", status: "succeeded", depth: 1 });
    const bad = afterFiring(
      def('after = { dag = "build", params = { version = "params.v" } }'),
      upstream("succeeded", { ...upstreamDag, values: { v: "x;rm" } }),
      null,
      null,
    );
    expect(bad.fire).toBeNull();
    expect(bad.reason).toMatch(/does not match its pattern/);
  });

  it("starts nothing after a run nobody confirmed: canceled or rejected while it waited", () => {
    const d = def('after = { dag = "build", status = "finished", params = { version = "params.v" } }');
    const waited = { confirmedBy: null, confirmDeadline: 5_000 };
    const canceled = afterFiring(d, upstream("canceled", upstreamDag, waited), null, null);
    expect(canceled.fire).toBeNull();
    expect(canceled.reason).toBe(
      'the run "build.3" ended before anyone confirmed it; deploy runs only after approved runs',
    );
    // Confirmed by someone, then canceled: it ran on that confirmation, and fires.
    const confirmed = { confirmedBy: "@c:x", confirmDeadline: 5_000 };
    expect(afterFiring(d, upstream("canceled", upstreamDag, confirmed), null, null).fire).not.toBeNull();
    // The declaring definition's own published run must be approved too.
    const pending = {
      ...d,
      origin: { runId: "d-1", status: "pending" as const, confirmedBy: null, confirmDeadline: 9 },
    };
    expect(afterFiring(pending, upstream("succeeded"), null, null).reason).toMatch(
      /the published run "deploy" still awaits confirmation/,
    );
  });

  it("skips with the reason: another status, a missing value or output, a refusal, a chain too long", () => {
    const d = def('after = { dag = "build", params = { version = "params.nope" } }');
    expect(afterFiring(d, upstream("failed"), null, null).reason).toBe(
      "build.3 failed; deploy runs after build succeeded",
    );
    expect(afterFiring(d, upstream("succeeded"), null, null).reason).toMatch(/has no parameter "nope"/);
    const o = def('after = { dag = "build", params = { version = "tasks.pack.outputs.version" } }');
    expect(afterFiring(o, upstream("succeeded"), null, null).reason).toMatch(/published no output "version"/);
    expect(
      afterFiring(o, upstream("succeeded"), new Map([["pack", { version: "2.0" }]]), null).fire?.dag.values,
    ).toEqual({ version: "2.0" });
    expect(afterFiring(d, upstream("succeeded"), null, "not allowed").reason).toBe("not allowed");
    const deep = {
      ...upstreamDag,
      trigger: { dag: "x", run: "x.2", runId: "x", status: "succeeded" as const, depth: 32 },
    };
    expect(
      afterFiring(def('after = { dag = "build" }'), upstream("succeeded", deep), null, null).reason,
    ).toMatch(/chain/);
  });

  it("finds a cycle through the DAG being published, and only such", async () => {
    const links: Record<string, string> = { b: "c", c: "a", x: "y", y: "x" };
    const of = async (id: string): Promise<string | undefined> => links[id];
    expect(await afterCycle("a", "b", of)).toEqual(["a", "b", "c", "a"]);
    expect(await afterCycle("a", "x", of)).toBeNull();
    expect(await afterCycle("a", "z", of)).toBeNull();
  });

  it("finds a cycle of any length: 300 links back to the DAG being published", async () => {
    // d1 → d2 → ... → d300 → a: publishing a after d1 closes a cycle of 302 DAGs.
    const of = async (id: string): Promise<string | undefined> => {
      const n = Number(id.slice(1));
      return n === 300 ? "a" : n >= 1 && n < 300 ? `d${n + 1}` : undefined;
    };
    const cycle = await afterCycle("a", "d1", of);
    expect(cycle?.length).toBe(302);
    expect(cycle?.at(0)).toBe("a");
    expect(cycle?.at(-1)).toBe("a");
    expect(await afterCycle("b", "d1", of)).toBeNull();
  });

  it("names the upstream run in the picture's title", () => {
    const words = triggerWords({ dag: "build", run: "build.3", runId: "u", status: "succeeded", depth: 1 });
    const g = buildRunGraph({
      dagId: "deploy.2",
      runLabel: "1234",
      runStatusWord: "running",
      startedBy: words,
      tasks: [],
    });
    expect(g.title).toBe("deploy.2 · run 1234 · running · after build.3 succeeded");
  });
});

describe("!dag triggers in chat", () => {
  it("says what fires each DAG, its mapping, its newest firing and where schedules are", () => {
    const outcome: Outcome = {
      kind: "triggers",
      at: 0,
      schedules: 2,
      triggers: [
        {
          dagId: "deploy",
          after: "build",
          status: ["succeeded"],
          params: { version: "params.v" },
          active: true,
          owner: "@o:x",
          last: { upstream: "build.3", status: "succeeded", run: "deploy.4", reason: null, at: 0 },
        },
        {
          dagId: "notify",
          after: "build",
          status: ["failed", "canceled"],
          params: {},
          active: false,
          owner: "@o:x",
          last: {
            upstream: "build.3",
            status: "succeeded",
            run: null,
            reason: "build.3 succeeded; notify runs after build failed or canceled",
            at: 0,
          },
        },
      ],
    };
    const body = renderOutcome(outcome)!.body;
    expect(body).toContain(
      "`deploy` — after build succeeded · version ← params.v · last: deploy.4 after build.3 succeeded",
    );
    expect(body).toContain(
      "`notify` — after build failed or canceled (fires once confirmed) · last: skipped after build.3 succeeded",
    );
    expect(body).toContain("2 schedules: `!dag schedules` lists them");
    const none = renderOutcome({ kind: "triggers", at: 0, schedules: 0, triggers: [] })!.body;
    expect(none).toContain("No DAG in this room runs after another");
    expect(none).not.toContain("schedules");
  });
});
