/**
 * How a subcommand fails: a CliError is a problem the user must fix, printed as its message (never a
 * stack) with its exit status; runCli turns it into both.
 */

/** Exit status of a config or usage problem found before anything started. */
export const EXIT_CONFIG = 2;

/** A problem the user must fix; the CLI prints its message and exits with `exitCode`. */
export class CliError extends Error {
  override readonly name = "CliError";
  constructor(
    message: string,
    readonly exitCode: number = EXIT_CONFIG,
  ) {
    super(message);
  }
}

/** Runs a subcommand body, turning CliError into its message and exit status. */
export async function runCli(name: string, body: () => Promise<number | void>): Promise<void> {
  try {
    const code = await body();
    if (typeof code === "number") process.exitCode = code;
  } catch (err) {
    if (err instanceof CliError) {
      process.stderr.write(`dagbot ${name}: ${err.message}\n`);
      process.exitCode = err.exitCode;
      return;
    }
    throw err;
  }
}
