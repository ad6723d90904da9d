/**
 * Takes secrets the node has already read out of its own environment, so that an action running as
 * the node's user cannot read them in /proc/<node pid>/environ.
 *
 * Deleting a variable from process.env is not enough on Linux: /proc/<pid>/environ shows the block
 * the kernel wrote at exec time, which unsetenv() leaves as it was. Node has no prctl() to make the
 * process undumpable (which would hide the file), so the value's bytes in that block are overwritten
 * with `*` through /proc/self/mem, which a process may always write for itself. Where that is not
 * possible (another OS, a kernel that refuses), the variable is still gone from process.env and
 * from every child's environment, and the caller hears that the block was left as it was.
 */
import { closeSync, openSync, readFileSync, readSync, writeSync } from "node:fs";

export interface ForgetResult {
  /** The variables that were set and are now removed. */
  removed: string[];
  /** Whether their values were also overwritten in /proc/self/environ (Linux only). */
  overwritten: boolean;
  /** Why they could not be overwritten, when they could not. */
  why?: string;
}

/** Removes the named variables from this process's environment and overwrites their values in its exec-time block. */
export function forgetEnvironment(
  names: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
): ForgetResult {
  const removed = names.filter((name) => env[name] !== undefined);
  for (const name of removed) delete env[name];
  if (removed.length === 0) return { removed, overwritten: true };
  if (process.platform !== "linux") return { removed, overwritten: false, why: "not Linux" };
  try {
    overwriteInEnvironBlock(removed);
    return { removed, overwritten: true };
  } catch (err) {
    return { removed, overwritten: false, why: String(err).slice(0, 200) };
  }
}

function overwriteInEnvironBlock(names: readonly string[]): void {
  // /proc/self/stat: after the command name (which may hold spaces and parentheses) come field 3
  // onwards; env_start and env_end are fields 50 and 51.
  const stat = readFileSync("/proc/self/stat", "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const start = Number(fields[47]);
  const end = Number(fields[48]);
  if (!Number.isSafeInteger(start) || !Number.isSafeInteger(end) || start <= 0 || end <= start)
    throw new Error("the kernel does not show where the environment is");
  const fd = openSync("/proc/self/mem", "r+");
  try {
    const block = Buffer.alloc(end - start);
    readSync(fd, block, 0, block.length, start);
    for (const name of names) {
      const key = Buffer.from(`${name}=`);
      for (let at = block.indexOf(key); at >= 0; at = block.indexOf(key, at + 1)) {
        if (at > 0 && block[at - 1] !== 0) continue; // inside another entry
        const from = at + key.length;
        const to = block.indexOf(0, from) < 0 ? block.length : block.indexOf(0, from);
        const stars = Buffer.alloc(to - from, "*");
        writeSync(fd, stars, 0, stars.length, start + from);
      }
    }
  } finally {
    closeSync(fd);
  }
}
