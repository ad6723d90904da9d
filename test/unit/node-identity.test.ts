import { describe, expect, it } from "vitest";
import { bootIdOf, identityVerdict, processOfBootId } from "../../src/domain/node-identity.js";

const self = { host: "web-1", pid: 4242 };
const alive = (live: number[]) => (pid: number) => live.includes(pid);

describe("one node id, one process", () => {
  it("reads host and pid back from a boot id; an older boot id has none", () => {
    expect(processOfBootId(bootIdOf("a1b2c3d4", { host: "db.example.org", pid: 7 }))).toEqual({
      host: "db.example.org",
      pid: 7,
    });
    expect(processOfBootId("a1b2c3d4")).toBeNull();
  });

  it("is free without a row or past the liveness window", () => {
    expect(identityVerdict(null, self, 30_000, alive([]))).toEqual({ kind: "free" });
    const old = { bootId: bootIdOf("x1", { host: "web-2", pid: 9 }), heartbeatAgeMs: 30_001 };
    expect(identityVerdict(old, self, 30_000, alive([9])).kind).toBe("free");
  });

  it("refuses a fresh heartbeat of another host, of a live pid here, or of an older release", () => {
    const other = { bootId: bootIdOf("x1", { host: "web-2", pid: 9 }), heartbeatAgeMs: 1_000 };
    expect(identityVerdict(other, self, 30_000, alive([]))).toEqual({
      kind: "held",
      holder: { host: "web-2", pid: 9 },
      heartbeatAgeMs: 1_000,
      retryAfterMs: 29_000,
    });
    const here = { bootId: bootIdOf("x1", { host: "web-1", pid: 9 }), heartbeatAgeMs: 1_000 };
    expect(identityVerdict(here, self, 30_000, alive([9])).kind).toBe("held");
    expect(identityVerdict({ bootId: "a1b2c3d4", heartbeatAgeMs: 10 }, self, 30_000, alive([])).kind).toBe(
      "held",
    );
  });

  it("starts over an earlier life on this host: its pid is gone, or is this process's own (a container)", () => {
    const gone = { bootId: bootIdOf("x1", { host: "web-1", pid: 9 }), heartbeatAgeMs: 1_000 };
    expect(identityVerdict(gone, self, 30_000, alive([])).kind).toBe("previous-life");
    const same = { bootId: bootIdOf("x1", self), heartbeatAgeMs: 1_000 };
    expect(identityVerdict(same, self, 30_000, alive([4242])).kind).toBe("previous-life");
  });
});
