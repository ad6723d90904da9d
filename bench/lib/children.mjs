/** Child processes the bench started, killed if the bench itself exits early (error, watchdog, Ctrl-C). */
import process from "node:process";

const live = new Set();
process.once("exit", () => {
  for (const child of live) child.kill("SIGKILL");
});

/** Tracks `child` until it exits; returns it. */
export function track(child) {
  live.add(child);
  child.once("exit", () => live.delete(child));
  return child;
}
