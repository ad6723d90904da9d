/**
 * RFC 9457 problem details: every error of the HTTP API is `application/problem+json` with a stable
 * `type` built from an error code (the codes of the command grammar and the command outcomes that
 * chat replies use, plus the HTTP layer's own), and never a stack trace.
 */
import type { OutcomeProblemCode } from "../../app/commands/outcome-table.js";
import type { CommandErrorCode } from "../../domain/command-grammar.js";

/** Where the problem types live: a URN, so the type is stable and never fetched. */
export const PROBLEM_TYPE_PREFIX = "urn:dagbot:problem:";

export const PROBLEM_CONTENT_TYPE = "application/problem+json";

/** The HTTP layer's own codes and the command outcomes' ones; command grammar codes come as `command-error.<code>`. */
export type ProblemCode =
  | "unauthorized"
  | "forbidden"
  | "bad-request"
  | "not-found"
  | "unknown-room"
  | "method-not-allowed"
  | "body-too-large"
  | "unsupported-media-type"
  | "idempotency-key-reused"
  | "bad-idempotency-key"
  | "webhook-refused"
  | "webhook-mapping"
  | OutcomeProblemCode
  | "leader-timeout"
  | "lost-claim"
  | "store-unavailable"
  | "too-many-streams"
  | "busy"
  | "internal"
  | `command-error.${CommandErrorCode}`
  | "command-error";

const TITLES: Record<string, string> = {
  unauthorized: "A valid bearer token is needed",
  forbidden: "This token's level does not allow it",
  "bad-request": "The request does not match its schema",
  "not-found": "No such route",
  "unknown-room": "This node does not serve that room",
  "method-not-allowed": "Method not allowed",
  "body-too-large": "The request body is too large",
  "unsupported-media-type": "Send application/json",
  "idempotency-key-reused": "This Idempotency-Key was used with another request",
  "bad-idempotency-key": "The Idempotency-Key header is malformed",
  "webhook-refused": "The delivery's signature, secret or timestamp is not valid for this hook",
  "webhook-mapping": "The delivery's payload does not give what this hook maps",
  refused: "The room's policy refuses this command",
  "hash-mismatch": "The run's content hash is not the one given",
  "run-not-found": "No such run",
  "task-not-found": "The run has no such task",
  conflict: "Another DAG was already published under this id",
  "invalid-dag": "The DAG is not valid",
  "library-error": "The DAG library could not give that DAG",
  "wrong-status": "The run is not in a state that allows this",
  "nothing-to-retry": "There is nothing to retry",
  "not-leader": "No leader handled the command",
  quarantined: "The command was dropped: it took the room's leader down twice",
  "rate-limited": "Over a rate limit: try again later",
  "schedule-not-found": "The room has no schedule of that DAG",
  "schedule-deleted": "The schedule is deleted: it cannot be paused or resumed",
  "leader-timeout": "The room's leader did not answer in time; retry with the same Idempotency-Key",
  "lost-claim": "The task's claim is no longer held by this token",
  "store-unavailable": "The store cannot be reached",
  "too-many-streams": "This node serves as many event streams as it may; try again later or another node",
  busy: "This node has as many claims waiting as it takes; claim again after Retry-After",
  internal: "Internal error",
  "command-error": "The command is malformed",
};

export interface Problem {
  type: string;
  title: string;
  status: number;
  code: string;
  detail?: string;
  instance?: string;
  errors?: { path: string; message: string }[];
  /** Extension members (RFC 9457 §3.2): e.g. the issues of an invalid DAG. */
  [extension: string]: unknown;
}

export function problem(
  status: number,
  code: ProblemCode,
  detail?: string,
  extra: Record<string, unknown> = {},
): Problem {
  const title = TITLES[code] ?? TITLES[code.split(".")[0] ?? ""] ?? "Error";
  return {
    type: `${PROBLEM_TYPE_PREFIX}${code}`,
    title,
    status,
    code,
    ...(detail === undefined ? {} : { detail }),
    ...extra,
  };
}

/** Every code the API may answer with, for docs/http-api.md and the OpenAPI description. */
export const PROBLEM_CODES: readonly string[] = Object.keys(TITLES);

/** A problem thrown by a route or hook; the server's error handler answers with it. */
export class ProblemError extends Error {
  constructor(readonly problem: Problem) {
    super(problem.detail ?? problem.title);
  }
}

export function fail(
  status: number,
  code: ProblemCode,
  detail?: string,
  extra?: Record<string, unknown>,
): never {
  throw new ProblemError(problem(status, code, detail, extra));
}
