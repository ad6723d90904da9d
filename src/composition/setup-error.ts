/**
 * What wiring throws when the user must fix something (a bad config, a store that cannot be opened,
 * no leader answering): a message for a person and the exit status it means. The CLI prints it
 * (src/cli/cli-error.ts); composition never imports the CLI (docs/architecture.md, "Layers").
 */

/** Exit status of a config or usage problem found before anything started. */
export const EXIT_CONFIG = 2;

/** A problem the user must fix; the CLI prints its message and exits with `exitCode`. */
export class SetupError extends Error {
  override readonly name: string = "SetupError";
  constructor(
    message: string,
    readonly exitCode: number = EXIT_CONFIG,
  ) {
    super(message);
  }
}
