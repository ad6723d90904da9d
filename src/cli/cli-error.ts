/**
 * How a subcommand fails: a CliError (or a SetupError from the wiring it calls) is a problem the user
 * must fix, printed as its message (never a stack) with its exit status; runCli turns it into both.
 */
import { EXIT_CONFIG, SetupError } from "../composition/setup-error.js";

export { EXIT_CONFIG };

/** A problem with the command line itself; the CLI prints its message and exits with `exitCode`. */
export class CliError extends SetupError {
  override readonly name: string = "CliError";
}

/** Runs a subcommand body, turning CliError and SetupError into its message and exit status. */
export async function runCli(name: string, body: () => Promise<number | void>): Promise<void> {
  try {
    const code = await body();
    if (typeof code === "number") process.exitCode = code;
  } catch (err) {
    if (err instanceof SetupError) {
      process.stderr.write(`dagbot ${name}: ${err.message}\n`);
      process.exitCode = err.exitCode;
      return;
    }
    throw err;
  }
}
