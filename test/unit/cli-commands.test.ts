// The table of subcommands (src/cli/commands.ts): a command line whose first word names a
// subcommand written by hand registers that one alone; anything else gets the whole table.
import { Command } from "commander";
import { describe, expect, it } from "vitest";
import { registerCommands } from "../../src/cli/commands.js";

function names(first?: string): string[] {
  const program = new Command();
  registerCommands(program, first);
  return program.commands.map((c) => c.name());
}

describe("the subcommands' table", () => {
  it("registers only the hand-written subcommand the command line names", () => {
    expect(names("run")).toEqual(["run"]);
    expect(names("graph")).toEqual(["graph"]);
    expect(names("node")).toEqual(["node"]);
  });

  it("registers them all, in the help's order, for no word, an option, help, a verb or a typo", () => {
    const all = names();
    expect(all.slice(0, 8)).toEqual([
      "validate",
      "run",
      "node",
      "start",
      "submit",
      "logs",
      "nodes",
      "migrate",
    ]);
    expect(all.slice(-3)).toEqual(["graph", "demo", "crypto"]);
    expect(all).toContain("status");
    expect(all).toContain("confirm");
    for (const first of ["--help", "help", "status", "rnu"]) expect(names(first)).toEqual(all);
  });
});
