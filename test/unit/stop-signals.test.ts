// "First signal graceful, second hard", the one rule every long-running command stops by.
import { describe, expect, it } from "vitest";
import { onStopSignals } from "../../src/composition/stop-signals.js";

describe("onStopSignals", () => {
  it("calls the first SIGINT or SIGTERM graceful and every later one hard, until disposed", () => {
    const seen: string[] = [];
    const before = process.listenerCount("SIGINT");
    const dispose = onStopSignals((stage, signal) => seen.push(`${signal}:${stage}`));
    process.emit("SIGTERM", "SIGTERM");
    process.emit("SIGINT", "SIGINT");
    process.emit("SIGTERM", "SIGTERM");
    dispose();
    expect(process.listenerCount("SIGINT")).toBe(before);
    expect(seen).toEqual(["SIGTERM:graceful", "SIGINT:hard", "SIGTERM:hard"]);
  });
});
