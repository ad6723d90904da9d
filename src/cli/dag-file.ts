/** Reading a DAG file for `run` and `submit`: validated here first, then sent to the leader as a publish command. */
import { readFile, stat } from "node:fs/promises";
import { formatIssue, parseDag } from "../domain/dag.js";
import { DAG_LIMITS } from "../domain/dag-schema.js";
import { detectFormat, parseDocumentText } from "../domain/dag-text.js";
import { MAX_COMMAND_BYTES } from "../domain/command-grammar.js";
import type { ParsedDag } from "../domain/model.js";
import { CliError } from "./cli-error.js";

export interface DagFile {
  file: string;
  dag: ParsedDag;
  hash: string;
  /** The document as parsed (before defaults), to publish it again under another id. */
  document: Record<string, unknown>;
}

/** Reads and validates a DAG file; every problem becomes a CliError listing the issues with their places. */
export async function loadDagFile(file: string): Promise<DagFile> {
  let text: string;
  try {
    const info = await stat(file);
    if (info.isDirectory()) throw new CliError(`cannot read ${file}: it is a directory`);
    if (info.size > DAG_LIMITS.maxDocumentBytes) {
      throw new CliError(
        `${file}: the document is ${info.size} bytes; at most ${DAG_LIMITS.maxDocumentBytes} are allowed`,
      );
    }
    text = await readFile(file, "utf8");
  } catch (err) {
    if (err instanceof CliError) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    throw new CliError(`cannot read ${file}: ${code === "ENOENT" ? "no such file" : (code ?? String(err))}`);
  }
  const format = detectFormat(file, text);
  const parsed = parseDag(text, format);
  if (!parsed.ok) {
    throw new CliError(
      `${file} is not a valid DAG:\n${parsed.issues.map((i) => `  ${formatIssue(i)}`).join("\n")}`,
    );
  }
  const raw = parseDocumentText(text, format);
  if (!raw.ok || typeof raw.value !== "object" || raw.value === null) {
    throw new CliError(`${file} could not be read as a document`);
  }
  return { file, dag: parsed.dag, hash: parsed.hash, document: raw.value as Record<string, unknown> };
}

/**
 * The publish command for a document, optionally under another id, given as data: the document
 * travels as JSON text whatever the file's format, and the leader parses it as a code block's text.
 */
export function publishCommand(
  document: Record<string, unknown>,
  dagId?: string,
): { verb: "publish"; source: { kind: "inline"; format: "json"; text: string } } {
  const doc = dagId === undefined ? document : { ...document, id: dagId };
  const text = JSON.stringify(doc);
  if (Buffer.byteLength(text, "utf8") > MAX_COMMAND_BYTES) {
    throw new CliError(
      `the DAG is too large to publish: ${Buffer.byteLength(text, "utf8")} bytes, at most ${MAX_COMMAND_BYTES}`,
    );
  }
  return { verb: "publish", source: { kind: "inline", format: "json", text } };
}
