/**
 * `dagbot crypto setup`: the one-time set-up of the bot account's cross-signing
 * (src/composition/crypto-setup.ts does it). The password or token comes from an owner-only file or
 * a prompt, never from the command line, where other users of the machine could read it.
 */
import { Writable } from "node:stream";
import type { Command } from "commander";
import { readPrivateFile } from "../../config/load-config.js";
import type { CryptoSetupOptions } from "../../composition/crypto-setup.js";
import { CliError, runCli } from "../cli-error.js";
import { withCommonOptions, type CommonOptions } from "../config-options.js";

interface SetupArgs extends CommonOptions {
  recoveryKeyFile: string;
  tokenFile?: string;
  passwordFile?: string;
}

export function registerCrypto(program: Command): void {
  const crypto = program
    .command("crypto")
    .description(
      "End-to-end encryption of the bot account: its cross-signing keys (see `dagbot crypto setup`).",
    );
  withCommonOptions(
    crypto
      .command("setup")
      .description(
        "Once per bot account: make its cross-signing keys, keep them in its secret storage and write its recovery key to a new owner-only file.",
      )
      .requiredOption(
        "--recovery-key-file <file>",
        "where to write the recovery key (a new file, mode 600); each node reads it through matrix.recovery_key_file",
      )
      .option(
        "--token-file <file>",
        "an owner-only file holding an access token of the account (a compatibility token behind MAS)",
      )
      .option("--password-file <file>", "an owner-only file holding the account's password"),
    "Without --token-file or --password-file it asks for the password or an access token (input hidden;\n" +
      "on a pipe, the first line of stdin). The account's first cross-signing keys need no interactive auth;\n" +
      "an account that has keys already is left as it is. Each node then signs its own device at start\n" +
      "with the recovery key. Exit status: 0 set up, 1 refused by the homeserver or already set up, 2 bad\n" +
      "config or options.",
  ).action((options: SetupArgs) =>
    runCli("crypto setup", async () => {
      const secret = await readSecret(options);
      const { runCryptoSetup } = await import("../../composition/crypto-setup.js");
      const setup: CryptoSetupOptions = { ...options, secret };
      const done = await runCryptoSetup(setup);
      process.stdout.write(
        `${done.userId} has cross-signing keys now (master key ${done.masterKey}); their private halves are in ` +
          `its secret storage (key ${done.secretStorageKeyId}).\n` +
          `The recovery key is in ${done.recoveryKeyFile} (mode 600): it opens them, here and in Element ` +
          `("Verify with recovery key"). Keep a copy somewhere safe and give it to each node as matrix.recovery_key_file.\n`,
      );
      return 0;
    }),
  );
}

async function readSecret(options: SetupArgs): Promise<string> {
  if (options.tokenFile !== undefined && options.passwordFile !== undefined) {
    throw new CliError("give --token-file or --password-file, not both");
  }
  const file = options.tokenFile ?? options.passwordFile;
  if (file !== undefined) {
    const read = readPrivateFile(file);
    if (typeof read !== "string") throw new CliError(read.error);
    return read;
  }
  const line = await prompt("Password or access token of the bot account (not shown): ");
  if (line === "") throw new CliError("no password or token was given");
  return line;
}

/**
 * One line from stdin; on a terminal the prompt is shown and what is typed is not echoed. Node's
 * readline (a dozen modules) is loaded here, not at every command's start.
 */
async function prompt(question: string): Promise<string> {
  const { createInterface } = await import("node:readline");
  const tty = process.stdin.isTTY === true;
  if (tty) process.stderr.write(question);
  const muted = new Writable({ write: (_chunk, _enc, done) => done() });
  const rl = createInterface({ input: process.stdin, output: muted, terminal: tty });
  return new Promise((resolve) => {
    let answered = false;
    rl.once("line", (line) => {
      answered = true;
      if (tty) process.stderr.write("\n");
      rl.close();
      resolve(line.trim());
    });
    rl.once("close", () => {
      if (!answered) resolve("");
    });
  });
}
