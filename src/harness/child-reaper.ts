/**
 * The harness's children (Synapse, `dagbot start` for the demo) must not outlive the process that
 * started them. They register here; the hook that kills what is left when this process exits is
 * installed explicitly by whoever runs the harness (`dagbot demo`, the test support, the bench),
 * never as a side effect of importing a module.
 */
import type { ChildProcess } from "node:child_process";

const live = new Set<ChildProcess>();
let installed = false;

function killLeftovers(): void {
  for (const child of live) child.kill("SIGKILL");
}

/** Kill every registered child still running when this process exits. Idempotent. */
export function installChildReaper(): void {
  if (installed) return;
  installed = true;
  process.once("exit", killLeftovers);
}

/** Registers a child until it exits. */
export function reapOnExit(child: ChildProcess): void {
  live.add(child);
  child.once("exit", () => live.delete(child));
}
