// `dagbot graph` as a user runs it: a DAG file before any run, a finished run of the store by its
// DAG id with each task in its state's colour, and the errors (bad --out, no such run).
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { STATE_STYLE } from "../../src/adapters/graph/dot.js";
import { REPO, cli, requireBuild } from "../support/engine-cluster.js";
import { decodePng } from "../support/png.js";
import { scratchFolder } from "../support/scratch-folder.js";

const scratch = scratchFolder("graph-cli");
const { track } = scratch;
let cwd: string;

beforeAll(() => {
  requireBuild();
  cwd = scratch.path;
});

/** The fill of a task's box in an SVG written by dagbot graph. */
function fillOf(svg: string, taskId: string): string | undefined {
  const re = new RegExp(
    `<g id="task&#45;${taskId}" class="node">\\s*<title>[^<]*</title>\\s*<path fill="([^"]+)"`,
  );
  return re.exec(svg)?.[1];
}

describe("dagbot graph", () => {
  it("draws a DAG file as a PNG named after the DAG", async () => {
    const r = await track(cli(["graph", join(REPO, "config/examples/diamond.json")], { cwd }));
    expect(r.code, r.stderr).toBe(0);
    const png = decodePng(readFileSync(join(cwd, "diamond.png")));
    expect(r.stdout).toContain(`diamond.png: ${png.width}×${png.height} px`);
  });

  it("draws a run of the store with each task in its state", async () => {
    const dag = join(cwd, "boom.json");
    writeFileSync(
      dag,
      JSON.stringify({
        id: "boom",
        tasks: [
          { id: "ok", action: "true" },
          { id: "x", action: "fail", needs: ["ok"] },
          { id: "y", action: "true", needs: ["x"] },
        ],
      }),
    );
    expect((await track(cli(["run", dag], { cwd }))).code).toBe(1);
    const r = await track(cli(["graph", "boom", "--out", "boom.svg"], { cwd }));
    expect(r.code, r.stderr).toBe(0);
    const svg = readFileSync(join(cwd, "boom.svg"), "utf8");
    expect(fillOf(svg, "ok")).toBe(STATE_STYLE.succeeded.fill);
    expect(fillOf(svg, "x")).toBe(STATE_STYLE.failed.fill);
    expect(fillOf(svg, "y")).toBe(STATE_STYLE.skipped.fill);
    expect(svg).toContain("1/3 succeeded · 1 failed · 1 skipped");
  });

  it("refuses an --out that is neither .png nor .svg, and a run that does not exist", async () => {
    const bad = await cli(["graph", join(REPO, "config/examples/diamond.json"), "--out", "x.gif"], { cwd });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("must end in .png or .svg");
    const missing = await cli(["graph", "nosuch"], { cwd });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('no file and no run "nosuch"');
  });

  it("has --help", async () => {
    const r = await cli(["graph", "--help"], { cwd });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("Usage: dagbot graph");
    expect(r.stdout).toContain("--out");
  });
});
