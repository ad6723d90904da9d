/** `dagbot validate FILE...`: checks DAG documents and prints each one's plan, or every issue with its place. */
import { open } from "node:fs/promises";
import type { Command } from "commander";
import { endOfOptionsBefore, leadingDashExample, wholeEntryArgs } from "../../domain/action-argv.js";
import type { ActionOffer, DagFormat, DagIssue } from "../../domain/dag.js";
import {
  checkActions,
  checkTaskArguments,
  detectFormat,
  formatFromFileName,
  formatIssue,
  parseDag,
} from "../../domain/dag.js";
import { DAG_LIMITS } from "../../domain/dag-schema.js";
import { documentTooLarge } from "../../domain/dag-text.js";
import { idLine } from "../../domain/name-list.js";
import { planLevels } from "../../domain/plan.js";
import type { ActionDefinition } from "../../ports/executor.js";
import { formatConfigIssues, loadConfig } from "../../config/load-config.js";

/** One file's outcome, as `--json` prints it. */
export type ValidateFileResult =
  | {
      file: string;
      ok: true;
      format: DagFormat;
      dag: { id: string; tasks: number; hash: string; levels: string[][]; params?: boolean };
    }
  | { file: string; ok: false; format: DagFormat | null; issues: DagIssue[] }
  | { file: string; ok: false; error: string };

/** Exit status: 0 every file valid, 1 some file invalid, 2 some file could not be read. */
export const EXIT_INVALID = 1;
export const EXIT_USAGE = 2;

export function registerValidate(program: Command): void {
  program
    .command("validate")
    .description(
      "Check DAG documents (JSON or TOML) and print each one's plan, or every problem with its place.",
    )
    .argument(
      "<files...>",
      "DAG files: .json or .toml (any other name is read by its content; - reads stdin)",
    )
    .option("--json", "print one JSON document with the result of every file")
    .option(
      "--config <file>",
      "also check every task's action and arguments against this node config's actions, and warn about its risky argument patterns",
    )
    .addHelpText(
      "after",
      "\nOutput goes to stdout: per valid file its id, task count, hash and plan levels; per invalid file one\n" +
        '"FILE: place: message" line per problem. With --config, tasks are checked as the leader checks them\n' +
        "at publish (known action, every argument present and matching its pattern, no option-like value), and\n" +
        "warnings about the config's actions go to stderr (they do not change the exit status). Exit status:\n" +
        "0 all valid, 1 some file invalid, 2 usage error, a bad config or a file that cannot be read.",
    )
    .action(async (files: string[], options: { json?: boolean; config?: string }) => {
      let actions: Record<string, ActionDefinition> | null = null;
      let warnings: ConfigWarning[] = [];
      if (options.config !== undefined) {
        const loaded = loadConfig({ file: options.config, env: process.env });
        if (!loaded.ok) {
          process.stderr.write(
            `dagbot validate: config ${options.config} is invalid:\n${formatConfigIssues(loaded.issues)}\n`,
          );
          process.exitCode = EXIT_USAGE;
          return;
        }
        actions = loaded.config.actions;
        warnings = actionWarnings(actions);
      }
      const results: ValidateFileResult[] = [];
      for (const file of files) results.push(await validateFile(file, actions));
      if (options.json === true) {
        const ok = results.every((result) => result.ok);
        const doc = options.config === undefined ? { ok, files: results } : { ok, files: results, warnings };
        process.stdout.write(`${JSON.stringify(doc, null, 2)}\n`);
      } else {
        for (const w of warnings) {
          process.stderr.write(`${options.config ?? ""}: ${w.path}: warning: ${w.message}\n`);
        }
        for (const result of results) writeText(result);
      }
      if (results.some((result) => "error" in result)) process.exitCode = EXIT_USAGE;
      else if (results.some((result) => !result.ok)) process.exitCode = EXIT_INVALID;
    });
}

function writeText(result: ValidateFileResult): void {
  if ("error" in result) {
    process.stderr.write(`dagbot validate: ${result.error}\n`);
  } else if (result.ok) {
    const { dag } = result;
    const lines = [
      `${result.file}: dag ${dag.id}: ${dag.tasks} task${dag.tasks === 1 ? "" : "s"} in ${dag.levels.length} level${dag.levels.length === 1 ? "" : "s"}, hash ${dag.hash.slice(0, 12)}`,
      // A level of 1,000 tasks is one line of its first ids and a count, not 1,000 ids (--json has all).
      ...dag.levels.map((ids, level) => `  level ${level}: ${idLine(ids)}`),
      // The hash covers the run's id and parameter values: `dagbot confirm` of a triggered run needs its own.
      ...(dag.params
        ? [
            "  (the hash of the run publishing starts; each run `dagbot trigger` starts has its own hash, shown in its answer and card: confirm with that one)",
          ]
        : []),
    ];
    process.stdout.write(`${lines.join("\n")}\n`);
  } else {
    process.stdout.write(result.issues.map((issue) => `${result.file}: ${formatIssue(issue)}\n`).join(""));
  }
}

/** A risk in a node config that is allowed but deserves the operator's attention. */
export interface ConfigWarning {
  path: string;
  message: string;
}

/**
 * Arguments that fill a whole argv entry and whose pattern admits a value starting with "-" (a path
 * pattern like `[A-Za-z0-9_./-]+` does): refused at run time unless allowed, and when allowed the
 * program reads them as options unless "--" comes first.
 */
export function actionWarnings(actions: Readonly<Record<string, ActionDefinition>>): ConfigWarning[] {
  const warnings: ConfigWarning[] = [];
  for (const [name, action] of Object.entries(actions)) {
    const whole = wholeEntryArgs(action);
    for (const [arg, spec] of Object.entries(action.args)) {
      if (!whole.has(arg)) continue;
      const example = leadingDashExample(spec.pattern);
      if (example === null) continue;
      const path = `actions.${name}.args.${arg}.pattern`;
      if (spec.allowLeadingDash !== true) {
        warnings.push({
          path,
          message: `admits a value starting with "-" (e.g. ${JSON.stringify(example)}) for {${arg}}, a whole argv entry; such values are refused at run time. Narrow the pattern (start it with a class without "-") or, if the program must take them, set allow_leading_dash = true and put "--" before {${arg}}`,
        });
      } else if (!endOfOptionsBefore(action, arg)) {
        warnings.push({
          path,
          message: `allows values starting with "-" (e.g. ${JSON.stringify(example)}) for {${arg}} and no "--" comes before it in argv: the program will read them as options`,
        });
      }
    }
  }
  return warnings;
}

/**
 * Issues of a valid DAG against a node config's actions, as the leader checks it at publish: unknown
 * actions, then arguments.
 */
export function checkAgainstActions(
  dag: Parameters<typeof checkActions>[0],
  actions: Readonly<Record<string, ActionDefinition>>,
): DagIssue[] {
  const offers = new Map<string, ActionOffer[]>(
    Object.entries(actions).map(([name, template]) => [name, [{ template, nodes: ["this node"] }]]),
  );
  return [...checkActions(dag, new Set(Object.keys(actions))), ...checkTaskArguments(dag, offers)];
}

/** Validates one file, against a node config's actions when given; never throws. */
export async function validateFile(
  file: string,
  actions: Readonly<Record<string, ActionDefinition>> | null = null,
): Promise<ValidateFileResult> {
  const read = await readBounded(file);
  if ("error" in read) return { file, ok: false, error: read.error };
  const byName = file === "-" ? null : formatFromFileName(file);
  if (read.size > DAG_LIMITS.maxDocumentBytes) {
    return { file, ok: false, format: byName, issues: [documentTooLarge(read.size, read.exact)] };
  }
  let text: string;
  try {
    // fatal: a file that is not UTF-8 is reported, not silently repaired with U+FFFD.
    text = new TextDecoder("utf-8", { fatal: true }).decode(read.bytes);
  } catch {
    return {
      file,
      ok: false,
      format: byName,
      issues: [{ path: "", message: "the file is not valid UTF-8 text" }],
    };
  }
  const format = byName ?? detectFormat(null, text);
  const parsed = parseDag(text, format);
  if (!parsed.ok) {
    const guessed: DagIssue[] =
      byName === null
        ? [
            {
              path: "",
              message: `read as ${format.toUpperCase()}, guessed from the content (name the file .json or .toml)`,
            },
          ]
        : [];
    return { file, ok: false, format, issues: [...guessed, ...parsed.issues] };
  }
  if (actions !== null) {
    const issues = checkAgainstActions(parsed.dag, actions);
    if (issues.length > 0) return { file, ok: false, format, issues };
  }
  return {
    file,
    ok: true,
    format,
    dag: {
      id: parsed.dag.id,
      tasks: parsed.dag.tasks.length,
      hash: parsed.hash,
      levels: planLevels(parsed.dag),
      ...(parsed.dag.params === undefined ? {} : { params: true }),
    },
  };
}

type ReadResult = { bytes: Uint8Array; size: number; exact: boolean } | { error: string };

/**
 * Reads at most one byte past the document limit, so a huge file (or /dev/zero) costs nothing;
 * `size` is the real size of a regular file; for a pipe past the limit it is a lower bound.
 */
async function readBounded(file: string): Promise<ReadResult> {
  const limit = DAG_LIMITS.maxDocumentBytes + 1;
  if (file === "-") {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of process.stdin as AsyncIterable<Buffer>) {
      chunks.push(chunk);
      size += chunk.length;
      if (size >= limit) break;
    }
    return { bytes: Buffer.concat(chunks), size, exact: size < limit };
  }
  let handle;
  try {
    handle = await open(file, "r");
    const stat = await handle.stat();
    if (stat.isDirectory()) return { error: `cannot read ${file}: it is a directory` };
    const buffer = Buffer.alloc(limit);
    let length = 0;
    while (length < limit) {
      const { bytesRead } = await handle.read(buffer, length, limit - length, null);
      if (bytesRead === 0) break;
      length += bytesRead;
    }
    const exact = stat.isFile() || length < limit;
    const size = stat.isFile() ? Math.max(stat.size, length) : length;
    return { bytes: buffer.subarray(0, length), size, exact };
  } catch (err) {
    return { error: `cannot read ${file}: ${describeReadError(err)}` };
  } finally {
    await handle?.close();
  }
}

function describeReadError(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  if (code === "ENOENT") return "no such file";
  if (code === "EACCES" || code === "EPERM") return "permission denied";
  if (code === "EISDIR") return "it is a directory";
  return err instanceof Error ? err.message : String(err);
}
