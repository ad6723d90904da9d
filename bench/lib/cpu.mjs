/**
 * CPU time per claim/complete pair, a figure that a busy machine disturbs much less than a rate:
 * the bench process's own CPU (process.cpuUsage) and, for PostgreSQL, the CPU of every server
 * backend connected to the scratch database (utime + stime from /proc/<pid>/stat).
 */
import { readFileSync } from "node:fs";
import process from "node:process";

// Linux reports utime/stime in clock ticks; USER_HZ is 100 on every Linux Node supports.
const TICK_MS = 10;

function processCpuMs(pid) {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
    return (Number(fields[11]) + Number(fields[12])) * TICK_MS;
  } catch {
    return 0;
  }
}

/** `admin` is a connected pg.Client on the database whose backends are counted (itself excluded). */
export function cpuMeter(admin, database) {
  const backends = async () =>
    (
      await admin.query("SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", [
        database,
      ])
    ).rows.map((r) => r.pid);
  // Per backend, so a connection a pool opens or closes meanwhile cannot make the sum negative: a new
  // backend counts from zero; one gone before the end is left out (rare: the bench's pools keep
  // their connections, and the Store's only close after 10 s idle).
  const serverSnapshot = async () => {
    const m = new Map();
    if (admin !== null) for (const pid of await backends()) m.set(pid, processCpuMs(pid));
    return m;
  };
  return {
    async start() {
      const server0 = await serverSnapshot();
      const client0 = process.cpuUsage();
      return {
        /** µs of CPU per pair over `pairs`, server and client. */
        async stop(pairs) {
          const client = process.cpuUsage(client0);
          let server = 0;
          for (const [pid, ms] of await serverSnapshot()) server += Math.max(0, ms - (server0.get(pid) ?? 0));
          return { serverUs: (server * 1000) / pairs, clientUs: (client.user + client.system) / pairs };
        },
      };
    },
  };
}

/** The machine's busy and total CPU ticks so far (all CPUs, /proc/stat), or null off Linux. */
function machineTicks() {
  try {
    const cpu = readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal ...: idle and iowait are the quiet part.
    const total = cpu.reduce((a, b) => a + b, 0);
    return { busy: total - cpu[3] - cpu[4], total };
  } catch {
    return null;
  }
}

/**
 * Waits until the machine's CPUs are quiet: two windows of `windowMs` in a row with less than
 * `busyBelow` of their time busy, or `maxMs` at most. What came before in the bench (a PostgreSQL
 * server still vacuuming, nodes still stopping) must not be timed as the part that follows. Resolves
 * with how long it waited and how busy the last window was (null off Linux, where it does not wait).
 */
export async function waitForQuietCpu({ busyBelow = 0.1, windowMs = 500, maxMs = 30_000 } = {}) {
  const t0 = performance.now();
  let quiet = 0;
  let busy = null;
  let last = machineTicks();
  while (last !== null && quiet < 2 && performance.now() - t0 < maxMs) {
    await new Promise((r) => setTimeout(r, windowMs));
    const now = machineTicks();
    busy = (now.busy - last.busy) / Math.max(1, now.total - last.total);
    quiet = busy < busyBelow ? quiet + 1 : 0;
    last = now;
  }
  return { waitedMs: performance.now() - t0, busy };
}
