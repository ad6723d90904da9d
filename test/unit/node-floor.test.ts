// dagbot refuses, in words, a Node older than package.json's engines (its SQLite driver would
// crash there without a message).
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { floorMajor, tooOldNode } from "../../src/cli/node-floor.js";

const engines = (
  JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
    engines: { node: string };
  }
).engines.node;

describe("the Node floor", () => {
  it("reads package.json's engines as a major version", () => {
    expect(floorMajor(engines)).toBe(22);
    expect(floorMajor(">=22.13.0")).toBe(22);
    expect(floorMajor("^22 || ^24")).toBeNull();
    expect(floorMajor(undefined)).toBeNull();
  });

  it("refuses an older Node by name, and lets this one and newer ones through", () => {
    const line = tooOldNode("20.20.2", engines);
    expect(line).toBe(
      "dagbot: Node.js 22 or later is needed; this is Node.js 20.20.2. " +
        "Install Node.js 22 or 24 and run npm install again (README, Set up).",
    );
    expect(tooOldNode("22.0.0", engines)).toBeNull();
    expect(tooOldNode("24.21.0", engines)).toBeNull();
    expect(tooOldNode(process.versions.node, engines)).toBeNull();
    expect(tooOldNode("20.20.2", "^22 || ^24")).toBeNull();
  });
});
