/**
 * One fleet of the upgrade test: a scratch folder with a node config per node (the same keys for
 * both releases: the previous release's README, "Node configuration"), the actions that record each
 * execution, the node processes, and readers of the records.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { NodeProcess, Release } from "./releases.js";
import { startNode } from "./releases.js";

const ACT = fileURLToPath(new URL("./fixtures/act.mjs", import.meta.url));

/** One line of the actions' records file. */
export interface ActionRecord {
  kind: string;
  node: string;
  run: string | null;
  task: string | null;
  attempt: string | null;
  phase: string;
  arg: string | null;
  output?: string | null;
  at: number;
}

export class Fleet {
  readonly records: string;
  readonly nodes: NodeProcess[] = [];

  constructor(
    readonly dir: string,
    readonly store: string,
  ) {
    this.records = join(dir, "records.jsonl");
    mkdirSync(join(dir, "go"), { recursive: true });
    writeFileSync(this.records, "");
  }

  /**
   * Writes `<nodeId>-<version>.toml` (a machine keeps its node id across the upgrade): short leases,
   * and the test's actions, each naming the node and its release (`a@0.1.0`, `a@today`) in its record.
   */
  config(nodeId: string, release: Release): string {
    const who = `${nodeId}@${release.tag}`;
    const node = JSON.stringify(process.execPath);
    const fixed = [node, JSON.stringify(ACT), JSON.stringify(this.records), JSON.stringify(this.dir)].join(
      ", ",
    );
    const action = (name: string, kind: string, arg: string | null, pattern: string | null): string =>
      [
        `[actions.${name}]`,
        `argv = [${fixed}, ${JSON.stringify(who)}, ${JSON.stringify(kind)}${arg === null ? "" : `, "{${arg}}"`}]`,
        ...(arg === null || pattern === null ? [] : [`args = { ${arg} = { pattern = '${pattern}' } }`]),
        'timeout = "5m"',
        'kill_grace = "300ms"',
        "",
      ].join("\n");
    const toml = [
      `node_id = ${JSON.stringify(nodeId)}`,
      'labels = ["linux"]',
      "capacity = 2",
      `store = ${JSON.stringify(this.store)}`,
      'log_level = "debug"',
      "",
      "[lease]",
      'ttl = "2s"',
      'renew_every = "500ms"',
      'acquire_every = "1s"',
      "",
      action("hold", "hold", "name", "[a-z_]{1,20}"),
      action("note", "note", "text", "[a-z_]{1,20}"),
      action("build", "build", "v", "[0-9.]{1,20}"),
      // Any text, so a reference that was never put in would reach the action as it is.
      action("deploy", "deploy", "version", "[^\\r\\n]{0,200}"),
      // Named like an approval gate: an old node that took a gate for a task would run it.
      action("approve", "approve", null, null),
    ].join("\n");
    const path = this.configPath(nodeId, release);
    writeFileSync(path, toml);
    return path;
  }

  start(release: Release, nodeId: string): NodeProcess {
    const node = startNode(release, this.dir, this.config(nodeId, release), nodeId);
    this.nodes.push(node);
    return node;
  }

  /** Lets a `hold` action end. */
  release(name: string): void {
    writeFileSync(join(this.dir, "go", name), "");
  }

  /** Every action execution so far, in the order they were written. */
  read(): ActionRecord[] {
    if (!existsSync(this.records)) return [];
    return readFileSync(this.records, "utf8")
      .split("\n")
      .filter((l) => l !== "")
      .map((l) => JSON.parse(l) as ActionRecord);
  }

  /** A node config's path (CLI commands take any node's config: it names the store). */
  configPath(nodeId: string, release: Release): string {
    return join(this.dir, `${nodeId}-${release.tag}.toml`);
  }
}
