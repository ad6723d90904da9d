// planLevels: topological levels of the examples, document order within a level, and refusal of a
// graph that parseDag would never have let through.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { detectFormat, parseDag } from "../../src/domain/dag.js";
import type { ParsedDag, TaskSpec } from "../../src/domain/model.js";
import { planLevels } from "../../src/domain/plan.js";
import { dag, task } from "../support/store-fixtures.js";

function example(file: string): ParsedDag {
  const text = readFileSync(join(import.meta.dirname, "../../config/examples", file), "utf8");
  const result = parseDag(text, detectFormat(file, text));
  if (!result.ok) throw new Error(`${file} is invalid`);
  return result.dag;
}

const spec = (id: string, needs: string[] = []): TaskSpec => task(id, { needs });
const dagOf = (...tasks: TaskSpec[]): ParsedDag => dag("d", tasks);

describe("planLevels", () => {
  it("plans the examples", () => {
    expect(planLevels(example("hello.toml"))).toEqual([["greet"], ["pause"], ["farewell"]]);
    expect(planLevels(example("diamond.json"))).toEqual([["start"], ["left", "right"], ["join"]]);
    expect(planLevels(example("retries.toml"))).toEqual([["flaky", "independent"], ["report"]]);
    const fanOut = planLevels(example("fan-out.toml"));
    expect(fanOut.map((level) => level.length)).toEqual([1, 20, 1]);
    expect(fanOut[1]![0]).toBe("shard-01");
    expect(fanOut[1]![19]).toBe("shard-20");
  });

  it("puts a task one level above its deepest need, whatever the document order", () => {
    const dag = dagOf(spec("late", ["mid", "root"]), spec("mid", ["root"]), spec("other"), spec("root"));
    expect(planLevels(dag)).toEqual([["other", "root"], ["mid"], ["late"]]);
  });

  it("plans an empty task list as no levels", () => {
    expect(planLevels(dagOf())).toEqual([]);
  });

  it("refuses a cycle or an unknown need instead of looping or dropping tasks", () => {
    expect(() => planLevels(dagOf(spec("a", ["b"]), spec("b", ["a"])))).toThrow(/cycle/);
    expect(() => planLevels(dagOf(spec("a", ["nope"])))).toThrow(/unknown task "nope"/);
  });
});
