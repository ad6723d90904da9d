/**
 * Who may make a run's content execute: the one rule every path that creates a run asks
 * (docs/architecture.md §3, "Authority"). A run's content may execute only if someone allowed to
 * confirm it did, or the room's policy auto-confirms the principal asking for it and the content
 * was never refused. A new run carries the content of runs before it (a definition's published
 * run, the run a retry repeats, the upstream run an `after` firing maps values from): each of those
 * is a source, and a source that was rejected, still awaits confirmation, ended before anyone
 * confirmed it or is gone lends the new run no authority. Pure: the callers read the runs.
 */
import type { RunStatus } from "./model.js";

/** What a run's row says of its approval. */
export interface ApprovalFacts {
  status: RunStatus;
  /** Who confirmed it; null when nobody did (auto-confirmed, or never confirmed). */
  confirmedBy: string | null;
  /** When it would have expired unconfirmed; null when it never awaited confirmation. */
  confirmDeadline: number | null;
}

/**
 * confirmed: a person confirmed it. auto-confirmed: it never awaited confirmation (its principal
 * was on the room's auto-confirm line, or a schedule's slot or an `after` firing of approved
 * content started it). pending: it still awaits confirmation. rejected: someone refused it.
 * unconfirmed: it expired, or was canceled while it waited. unknown: the run is gone (pruned).
 */
export type Approval = "confirmed" | "auto-confirmed" | "pending" | "rejected" | "unconfirmed" | "unknown";

export function approvalOf(run: ApprovalFacts | null): Approval {
  if (run === null) return "unknown";
  if (run.confirmedBy !== null) return "confirmed";
  if (run.confirmDeadline === null) return "auto-confirmed";
  if (run.status === "pending") return "pending";
  if (run.status === "rejected") return "rejected";
  return "unconfirmed";
}

/** Whether content with this approval was approved: by a person, or started on nobody's refusal. */
export function isApproved(approval: Approval): approval is "confirmed" | "auto-confirmed" {
  return approval === "confirmed" || approval === "auto-confirmed";
}

/** A run whose content the new run carries, and how to name it in a reason (`the published run "x"`). */
export interface ContentSource {
  what: string;
  run: ApprovalFacts | null;
}

/** A definition's content as a source of a new run: its published (first) run's approval. */
export function definitionSource(definition: { dagId: string; origin: ApprovalFacts | null }): ContentSource {
  return { what: `the published run "${definition.dagId}"`, run: definition.origin };
}

/** An ended run as a source: the run a retry repeats, the upstream run an `after` firing reads. */
export function runSource(run: ApprovalFacts & { dagId: string }): ContentSource {
  return { what: `the run "${run.dagId}"`, run };
}

export type StartVerdict =
  /** The run may start at once. */
  | { kind: "start" }
  /** It may not start until someone allowed to confirm it does; `reason` says why, in words. */
  | { kind: "confirm"; reason: string };

/**
 * Whether a new run may start without a person's confirmation. `autoConfirmed`: the room's policy
 * auto-confirms the principal asking (a person on auto_confirm, a webhook on hook_auto_confirm), or
 * the path runs on content already confirmed (a schedule's slot, an `after` firing). Every source
 * must have been approved: auto-confirmation never covers content someone refused or nobody
 * confirmed. A path with nobody to ask (a slot, a firing) does not start the run at all.
 */
export function runStartVerdict(autoConfirmed: boolean, sources: readonly ContentSource[]): StartVerdict {
  for (const source of sources) {
    const approval = approvalOf(source.run);
    if (isApproved(approval)) continue;
    return { kind: "confirm", reason: `${source.what} ${APPROVAL_WORDS[approval]}` };
  }
  if (!autoConfirmed) return { kind: "confirm", reason: "the room's policy does not auto-confirm its runs" };
  return { kind: "start" };
}

const APPROVAL_WORDS: Record<Exclude<Approval, "confirmed" | "auto-confirmed">, string> = {
  pending: "still awaits confirmation",
  rejected: "was rejected",
  unconfirmed: "ended before anyone confirmed it",
  unknown: "is gone, so nothing shows that anyone confirmed it",
};
