/**
 * `dagbot graph FILE|RUN`: draws a DAG file, or a run of the store with its task states, as PNG or SVG.
 * The pictures' modules (the layout, the DOT writer, the renderer) are imported when it runs, not
 * at every command's start (bench/README.md, "`dagbot run` of a one-task DAG").
 */
import { existsSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { extname } from "node:path";
import type { Command } from "commander";
import { findRun } from "../../app/run-ref.js";
import { readRoomWaits, waitsOf } from "../../app/task-waits.js";
import type { RunGraph } from "../../domain/run-graph.js";
import type { PictureFormat } from "../../ports/graph-renderer.js";
import { RenderError } from "../../ports/graph-renderer.js";
import { loadDagFile } from "../dag-file.js";
import { CliError, runCli } from "../cli-error.js";
import { openConfiguredStore } from "../../composition/store-open.js";
import { pickRoom, resolveConfig, withCommonOptions } from "../config-options.js";
import type { CommonOptions } from "../config-options.js";

interface GraphOptions extends CommonOptions {
  room?: string;
  out?: string;
}

export function registerGraph(program: Command): void {
  withCommonOptions(
    program
      .command("graph")
      .description("Draw a DAG file, or a run with its task states, as a PNG or SVG picture.")
      .argument("<file_or_run>", "a DAG file (.json or .toml), or a run: its id or uuid")
      .option("-o, --out <file>", "where to write the picture; .png or .svg (default: <dag id>.png)")
      .option("--room <room>", "the room of the run (default: the config's only room)"),
    "An existing file is drawn as a DAG that has not run; anything else is looked up as a run in the\n" +
      "store (by its id, else its uuid). Exit status: 0 written, 1 no such run or the\n" +
      "picture could not be drawn, 2 bad file, option or config.",
  ).action((target: string, options: GraphOptions) => runCli("graph", () => graph(target, options)));
}

function formatOf(out: string): PictureFormat {
  const ext = extname(out).toLowerCase();
  if (ext === ".png") return "png";
  if (ext === ".svg") return "svg";
  throw new CliError(`--out ${out}: the file must end in .png or .svg`);
}

async function graph(target: string, options: GraphOptions): Promise<number> {
  if (options.out !== undefined) formatOf(options.out);
  const { dagGraphOf, runGraphOf } = await import("../../app/run-picture.js");
  const { createPictureRenderer } = await import("../../composition/pictures.js");
  let picture: RunGraph;
  let name: string;
  if (existsSync(target)) {
    const file = await loadDagFile(target);
    picture = dagGraphOf(file.dag);
    name = file.dag.id;
  } else {
    const config = resolveConfig(options);
    const roomId = pickRoom(config, options.room);
    const store = await openConfiguredStore(config, { existing: true });
    try {
      const run = await findRun(store, roomId, target);
      if (run === null)
        throw new CliError(`no file and no run "${target.slice(0, 70)}" in room ${roomId}`, 1);
      const tasks = await store.listTasks(run.runId);
      const room = await readRoomWaits(store, run.roomId, config.retention.nodeGoneAfterMs);
      picture = runGraphOf(run, tasks, waitsOf(run, tasks, room));
      name = run.dagId;
    } finally {
      await store.close();
    }
  }
  const out = options.out ?? `${name}.png`;
  const renderer = createPictureRenderer();
  try {
    const image = await renderer.render(picture, formatOf(out));
    await writeFile(out, image.data);
    process.stdout.write(`${out}: ${image.width}×${image.height} px, ${image.data.byteLength} bytes\n`);
    return 0;
  } catch (err) {
    if (err instanceof RenderError) throw new CliError(err.message, 1);
    throw err;
  } finally {
    await renderer.close();
  }
}
