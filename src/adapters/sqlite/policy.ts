/**
 * The room's policy on SQLite (issue 10, finding 7; issue 24): the policy every node of the room
 * enforces, and the changes room admins proposed under the two-person rule, each applied only when
 * another admin confirms it in time. Every change is logged with who, from what and to what.
 */
import { NotFoundError } from "../../ports/errors.js";
import type {
  CommandContext,
  PolicyProposal,
  RoomPolicy,
  SetPolicyOptions,
  StoredRoomPolicy,
} from "../../ports/store.js";
import { checkRoom } from "../store-common/checks.js";
import { sessionKey } from "../store-common/records.js";
import { policyOutcome, policySetEvent, proposalOutcome } from "../store-common/run-outcomes.js";
import type { SqliteConnection } from "./connection.js";
import { markHandledInTx } from "./inbox.js";

type PolicyRow = { room_id: string; policy: string; set_by: string; updated_at: number };

function toPolicy(row: PolicyRow): StoredRoomPolicy {
  return {
    roomId: row.room_id,
    policy: JSON.parse(row.policy) as RoomPolicy,
    setBy: row.set_by,
    updatedAt: row.updated_at,
  };
}

type ProposalRow = {
  room_id: string;
  change_id: string;
  change: string;
  proposed_by: string;
  proposed_at: number;
  expires_at: number;
  status: "pending" | "applied";
  confirmed_by: string | null;
  confirmed_at: number | null;
};

function toProposal(row: ProposalRow): PolicyProposal {
  return {
    roomId: row.room_id,
    changeId: row.change_id,
    change: JSON.parse(row.change) as Record<string, unknown>,
    proposedBy: row.proposed_by,
    proposedAt: row.proposed_at,
    expiresAt: row.expires_at,
    status: row.status,
    confirmedBy: row.confirmed_by,
    confirmedAt: row.confirmed_at,
  };
}

export function initRoomPolicy(
  c: SqliteConnection,
  roomId: string,
  policy: RoomPolicy,
  setBy: string,
): Promise<{ set: boolean; stored: StoredRoomPolicy }> {
  return c.write("init room policy", (tx) => {
    const set =
      c.run(
        "INSERT INTO room_policies (room_id, policy, set_by, updated_at) VALUES (?, ?, ?, ?) ON CONFLICT (room_id) DO NOTHING",
        roomId,
        JSON.stringify(policy),
        setBy,
        tx.now,
      ) === 1;
    if (set)
      tx.log({
        roomId,
        kind: "policy.set",
        term: null,
        actor: null,
        data: { policy, by: setBy, initial: true },
      });
    const row = c.get<PolicyRow>("SELECT * FROM room_policies WHERE room_id = ?", roomId);
    if (row === undefined) throw new NotFoundError("init room policy", { roomId });
    return { set, stored: toPolicy(row) };
  });
}

export function getRoomPolicy(c: SqliteConnection, roomId: string): Promise<StoredRoomPolicy | null> {
  return c.read("get room policy", () => {
    const row = c.get<PolicyRow>("SELECT * FROM room_policies WHERE room_id = ?", roomId);
    return row === undefined ? null : toPolicy(row);
  });
}

export function setRoomPolicy(
  c: SqliteConnection,
  ctx: CommandContext,
  roomId: string,
  policy: RoomPolicy,
  by: string,
  options: SetPolicyOptions = {},
): Promise<
  { kind: "set"; previous: RoomPolicy | null } | { kind: "not-pending"; proposal: PolicyProposal | null }
> {
  return c.write("set room policy", (tx) => {
    c.checkFence("set room policy", ctx.fence, tx.now);
    checkRoom("set room policy", ctx, roomId);
    let proposal: { changeId: string; proposedBy: string } | undefined;
    if (options.confirms !== undefined) {
      // The guard: pending, not expired, and not the proposer's own confirmation.
      const confirmed =
        c.run(
          `UPDATE policy_proposals SET status = 'applied', confirmed_by = ?, confirmed_at = ?
            WHERE room_id = ? AND change_id = ? AND status = 'pending' AND expires_at > ? AND proposed_by <> ?`,
          by,
          tx.now,
          roomId,
          options.confirms,
          tx.now,
          by,
        ) === 1;
      const row = c.get<ProposalRow>(
        "SELECT * FROM policy_proposals WHERE room_id = ? AND change_id = ?",
        roomId,
        options.confirms,
      );
      if (!confirmed || row === undefined)
        return { kind: "not-pending" as const, proposal: row === undefined ? null : toProposal(row) };
      proposal = { changeId: row.change_id, proposedBy: row.proposed_by };
    }
    const old = c.get<PolicyRow>("SELECT * FROM room_policies WHERE room_id = ?", roomId);
    const previous = old === undefined ? null : toPolicy(old).policy;
    c.run(
      `INSERT INTO room_policies (room_id, policy, set_by, updated_at) VALUES (?, ?, ?, ?)
       ON CONFLICT (room_id) DO UPDATE SET policy = excluded.policy, set_by = excluded.set_by, updated_at = excluded.updated_at`,
      roomId,
      JSON.stringify(policy),
      by,
      tx.now,
    );
    tx.log({
      roomId,
      kind: "policy.set",
      term: ctx.fence.term,
      actor: sessionKey(ctx.fence.session),
      data: policySetEvent(policy, previous, by, options, proposal),
    });
    if (ctx.inboxEventId !== undefined)
      markHandledInTx(c, tx, ctx.fence, ctx.inboxEventId, policyOutcome(policy, previous, proposal));
    return { kind: "set" as const, previous };
  });
}

export function proposePolicyChange(
  c: SqliteConnection,
  ctx: CommandContext,
  roomId: string,
  p: { changeId: string; change: Record<string, unknown>; by: string; ttlMs: number },
): Promise<PolicyProposal> {
  return c.write("propose a policy change", (tx) => {
    c.checkFence("propose a policy change", ctx.fence, tx.now);
    checkRoom("propose a policy change", ctx, roomId);
    // Insert-or-ignore: a leader repeating the command after a crash finds its proposal kept.
    const inserted = c.run(
      `INSERT INTO policy_proposals (room_id, change_id, change, proposed_by, proposed_at, expires_at, status)
       VALUES (?, ?, ?, ?, ?, ?, 'pending') ON CONFLICT (room_id, change_id) DO NOTHING`,
      roomId,
      p.changeId,
      JSON.stringify(p.change),
      p.by,
      tx.now,
      tx.now + Math.max(0, Math.floor(p.ttlMs)),
    );
    const row = c.get<ProposalRow>(
      "SELECT * FROM policy_proposals WHERE room_id = ? AND change_id = ?",
      roomId,
      p.changeId,
    );
    if (row === undefined)
      throw new NotFoundError("propose a policy change", { roomId, changeId: p.changeId });
    const proposal = toProposal(row);
    if (inserted === 1)
      tx.log({
        roomId,
        kind: "policy.proposed",
        term: ctx.fence.term,
        actor: sessionKey(ctx.fence.session),
        data: { changeId: p.changeId, change: p.change, by: p.by, expiresAt: proposal.expiresAt },
      });
    if (ctx.inboxEventId !== undefined)
      markHandledInTx(c, tx, ctx.fence, ctx.inboxEventId, proposalOutcome(proposal));
    return proposal;
  });
}

export function getPolicyProposal(
  c: SqliteConnection,
  roomId: string,
  changeId: string,
): Promise<PolicyProposal | null> {
  return c.read("get a policy proposal", () => {
    const row = c.get<ProposalRow>(
      "SELECT * FROM policy_proposals WHERE room_id = ? AND change_id = ?",
      roomId,
      changeId,
    );
    return row === undefined ? null : toProposal(row);
  });
}
