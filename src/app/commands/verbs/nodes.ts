/** `!dag nodes [verbose]`: the room's nodes, their labels, heartbeats, running tasks, and the leader. */
import type { Parsed } from "../../../domain/command-grammar.js";
import { arity, fail, ok, unquote } from "../../../domain/command-grammar.js";
import { quoteInput } from "../../../domain/command-text.js";
import { formatDuration } from "../../../domain/duration.js";
import { describeRelease } from "../../../domain/release.js";
import { bulleted } from "../../render/blocks.js";
import type { Rendered } from "../../render/html.js";
import { code, join, r, text } from "../../render/html.js";
import { deviceWords, undecryptableWords } from "../../render/node-crypto-words.js";
import { plural } from "../../render/words.js";
import type { HandlerContext } from "../context.js";
import type { Outcome } from "../outcome.js";
import type { NodeLine } from "../outcome.js";
import { nodeLine } from "../outcome.js";
import { defineVerb } from "../verb.js";
import { byLayout } from "../face.js";

export interface NodesCommand {
  verb: "nodes";
  /** Also the leader's term and lease, which a person rarely needs. */
  verbose?: boolean;
}

export const nodes = defineVerb<NodesCommand, "nodes">({
  verb: "nodes",
  usage: "!dag nodes [verbose]",
  summary: "show nodes, labels, heartbeats, running tasks and the leader",
  group: "follow",
  permission: "open",
  details: ["`verbose` adds the leader's term and how long its lease is valid."],
  parse: (args): Parsed<NodesCommand> => {
    const err = arity("nodes", args, 0, 1, "");
    if (err !== null) return err;
    const option = args[0] === undefined ? null : unquote(args[0]).toLowerCase();
    if (option === null) return ok({ verb: "nodes", verbose: false });
    if (option === "verbose" || option === "-v" || option === "--verbose")
      return ok({ verb: "nodes", verbose: true });
    return fail(
      "bad-argument",
      "nodes",
      `unknown option ${quoteInput(args[0] ?? "")}: the only one is verbose`,
    );
  },
  handle: (ctx, c) => handleNodes(ctx, c.verbose === true),
  render: { nodes: byLayout(renderNodes, nodesText) },
});

async function handleNodes(ctx: HandlerContext, verbose = false): Promise<Outcome> {
  const [nodes, lease, at] = await Promise.all([
    ctx.store.listNodes(),
    ctx.store.getLease(ctx.roomId),
    ctx.store.now(),
  ]);
  const leader =
    lease === null || lease.holder === null
      ? null
      : { nodeId: lease.holder.nodeId, term: lease.term, expiresInMs: lease.expiresAt - lease.now };
  // Only this room's nodes: a store shared by several rooms must not show one room the others' fleet.
  const lines = nodes
    .filter((n) => n.roomIds.includes(ctx.roomId))
    .map((n) => nodeLine(n, ctx.roomId))
    .sort((a, b) => a.nodeId.localeCompare(b.nodeId));
  return { kind: "nodes", nodes: lines, leader, staleAfterMs: ctx.policy.nodeStaleAfterMs, at, verbose };
}

function renderNodes(outcome: Extract<Outcome, { kind: "nodes" }>): Rendered {
  if (outcome.nodes.length === 0) return text("No node has reported a heartbeat yet.");
  const leader = outcome.leader;
  const head =
    leader === null
      ? text("No node leads this room right now.")
      : outcome.verbose === true
        ? r`${code(leader.nodeId)} leads this room (term ${String(leader.term)}, lease ${
            leader.expiresInMs > 0 ? `valid for ${formatDuration(leader.expiresInMs)}` : "expired"
          }).`
        : r`${code(leader.nodeId)} leads this room.`;
  const items = outcome.nodes.map((n) => {
    const alive = n.heartbeatAgeMs <= outcome.staleAfterMs;
    // A node silent past the limit is gone (killed, crashed, cut off): say so and since when,
    // not its last-known slots; it is dropped from the list after the retention.
    if (!alive) return r`⚫ ${code(n.nodeId)} · gone: last heartbeat ${formatDuration(n.heartbeatAgeMs)} ago`;
    const labels =
      n.labels.length === 0
        ? text("no labels")
        : r`labels ${join(
            n.labels.map((l) => code(l)),
            ", ",
          )}`;
    const isLeader = leader !== null && leader.nodeId === n.nodeId ? " (leader)" : "";
    return r`🟢 ${code(n.nodeId)}${isLeader} · ${labels} · ${String(n.runningTasks)}/${String(
      n.capacity,
    )} slots busy · ${plural(n.actions.length, "action")} · heartbeat ${formatDuration(n.heartbeatAgeMs)} ago${[
      deviceWords(n),
      undecryptableWords(n),
    ]
      .map((w) => (w === null ? "" : ` · ${w}`))
      .join(
        "",
      )}${n.serves ? "" : " · not serving this room"} · ${describeRelease(n.release ?? null, n.protocol ?? null)}`;
  });
  return bulleted(mixedReleases(outcome.nodes, outcome.staleAfterMs, head), items);
}

/** Live nodes of more than one release (an upgrade in progress): said in the head, with each release's nodes. */
function mixedReleases(nodes: NodeLine[], staleAfterMs: number, head: Rendered): Rendered {
  const live = nodes.filter((n) => n.heartbeatAgeMs <= staleAfterMs);
  const releases = [...new Set(live.map((n) => describeRelease(n.release ?? null, n.protocol ?? null)))];
  if (releases.length < 2) return head;
  return r`${head} ⚠️ Nodes of ${String(releases.length)} releases are live: ${releases.join("; ")} (an upgrade in progress: docs/operations.md, "Upgrading").`;
}

/** One line per node: its load, its release, its crypto's health; the leader marked. */
function nodesText(o: Extract<Outcome, { kind: "nodes" }>): string {
  return (
    o.nodes
      .map(
        (n) =>
          `${n.nodeId}${o.leader?.nodeId === n.nodeId ? " (leader)" : ""}: ${n.runningTasks}/${n.capacity} busy, ${describeRelease(n.release ?? null, n.protocol ?? null)}${[
            deviceWords(n),
            undecryptableWords(n),
          ]
            .map((w) => (w === null ? "" : `, ${w}`))
            .join("")}`,
      )
      .join("\n") || "no nodes"
  );
}
