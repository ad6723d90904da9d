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
