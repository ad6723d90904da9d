/**
 * The process table as the chaos tests read it (Linux /proc): every descendant of a process, and
 * whether a pid still runs (a zombie does not: it holds no resources and runs nothing).
 */
import { readFileSync, readdirSync } from "node:fs";

function statOf(pid: number): { ppid: number; state: string } | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name may hold spaces and parentheses; the fields after the last ")" do not.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return { state: fields[0] ?? "?", ppid: Number(fields[1]) };
  } catch {
    return null;
  }
}

/** True while `pid` exists and is not a zombie. */
export function isRunning(pid: number): boolean {
  const stat = statOf(pid);
  return stat !== null && stat.state !== "Z";
}

/** Every live process below `pid` (children, grandchildren...), read from /proc at one moment. */
export function descendantsOf(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const name of readdirSync("/proc")) {
    const p = Number(name);
    if (!Number.isInteger(p) || p <= 0) continue;
    const stat = statOf(p);
    if (stat === null || stat.state === "Z") continue;
    const list = children.get(stat.ppid) ?? [];
    list.push(p);
    children.set(stat.ppid, list);
  }
  const out: number[] = [];
  const todo = [...(children.get(pid) ?? [])];
  while (todo.length > 0) {
    const p = todo.pop()!;
    out.push(p);
    todo.push(...(children.get(p) ?? []));
  }
  return out;
}
