/**
 * The room's policy on PostgreSQL (issue 10, finding 7; issue 24): the policy every node of the room
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
import { policyOutcome, policySetEvent, proposalOutcome } from "../store-common/run-outcomes.js";
import type { Db } from "./db.js";
import { markHandledInTx } from "./inbox.js";
import { json, NOW, sessionKey } from "./sql.js";

type PolicyRow = { room_id: string; policy: RoomPolicy; set_by: string; updated_at: number | string };

function toPolicy(row: PolicyRow): StoredRoomPolicy {
  return { roomId: row.room_id, policy: row.policy, setBy: row.set_by, updatedAt: Number(row.updated_at) };
}

type ProposalRow = {
  room_id: string;
  change_id: string;
  change: Record<string, unknown>;
  proposed_by: string;
  proposed_at: number | string;
  expires_at: number | string;
  status: "pending" | "applied";
  confirmed_by: string | null;
  confirmed_at: number | string | null;
};

function toProposal(row: ProposalRow): PolicyProposal {
  return {
    roomId: row.room_id,
    changeId: row.change_id,
    change: row.change,
    proposedBy: row.proposed_by,
    proposedAt: Number(row.proposed_at),
    expiresAt: Number(row.expires_at),
    status: row.status,
    confirmedBy: row.confirmed_by,
    confirmedAt: row.confirmed_at === null ? null : Number(row.confirmed_at),
  };
}

export async function initRoomPolicy(
  db: Db,
  roomId: string,
  policy: RoomPolicy,
  setBy: string,
): Promise<{ set: boolean; stored: StoredRoomPolicy }> {
  return db.tx("init room policy", async (tx) => {
    const { rowCount } = await tx.query(
      `INSERT INTO room_policies (room_id, policy, set_by, updated_at) VALUES ($1, $2::jsonb, $3, ${NOW.replace("$1", "$4")})
       ON CONFLICT (room_id) DO NOTHING`,
      [roomId, json(policy), setBy, db.clockParam()],
    );
    const set = rowCount === 1;
    if (set)
      tx.log(roomId, {
        kind: "policy.set",
        term: null,
        actor: null,
        data: { policy, by: setBy, initial: true },
      });
    const { rows } = await tx.query<PolicyRow>("SELECT * FROM room_policies WHERE room_id = $1", [roomId]);
    const row = rows[0];
    if (row === undefined) throw new NotFoundError("init room policy", { roomId });
    return { set, stored: toPolicy(row) };
  });
}

export async function getRoomPolicy(db: Db, roomId: string): Promise<StoredRoomPolicy | null> {
  const rows = await db.one<PolicyRow>("get room policy", "SELECT * FROM room_policies WHERE room_id = $1", [
    roomId,
  ]);
  return rows[0] === undefined ? null : toPolicy(rows[0]);
}

export async function setRoomPolicy(
  db: Db,
  ctx: CommandContext,
  roomId: string,
  policy: RoomPolicy,
  by: string,
  options: SetPolicyOptions = {},
): Promise<
  { kind: "set"; previous: RoomPolicy | null } | { kind: "not-pending"; proposal: PolicyProposal | null }
> {
  return db.tx("set room policy", async (tx) => {
    await db.lockFence(tx, "set room policy", ctx.fence);
    checkRoom("set room policy", ctx, roomId);
    let proposal: { changeId: string; proposedBy: string } | undefined;
    if (options.confirms !== undefined) {
      // The guard: pending, not expired, and not the proposer's own confirmation.
      const confirmed = await tx.query<ProposalRow>(
        `UPDATE policy_proposals SET status = 'applied', confirmed_by = $4, confirmed_at = ${NOW}
          WHERE room_id = $2 AND change_id = $3 AND status = 'pending' AND expires_at > ${NOW}
            AND proposed_by <> $4
          RETURNING *`,
        [tx.clockParam, roomId, options.confirms, by],
      );
      const row = confirmed.rows[0];
      if (row === undefined) {
        const { rows } = await tx.query<ProposalRow>(
          "SELECT * FROM policy_proposals WHERE room_id = $1 AND change_id = $2",
          [roomId, options.confirms],
        );
        return { kind: "not-pending" as const, proposal: rows[0] === undefined ? null : toProposal(rows[0]) };
      }
      proposal = { changeId: row.change_id, proposedBy: row.proposed_by };
    }
    const { rows } = await tx.query<{ previous: RoomPolicy | null }>(
      `WITH old AS (SELECT policy FROM room_policies WHERE room_id = $1 FOR UPDATE),
            upsert AS (INSERT INTO room_policies (room_id, policy, set_by, updated_at)
                       VALUES ($1, $2::jsonb, $3, ${NOW.replace("$1", "$4")})
                       ON CONFLICT (room_id) DO UPDATE SET policy = excluded.policy, set_by = excluded.set_by,
                         updated_at = excluded.updated_at)
       SELECT (SELECT policy FROM old) AS previous`,
      [roomId, json(policy), by, db.clockParam()],
    );
    const previous = rows[0]?.previous ?? null;
    tx.log(roomId, {
      kind: "policy.set",
      term: ctx.fence.term,
      actor: sessionKey(ctx.fence.session),
      data: policySetEvent(policy, previous, by, options, proposal),
    });
    if (ctx.inboxEventId !== undefined)
      await markHandledInTx(tx, ctx.fence, ctx.inboxEventId, policyOutcome(policy, previous, proposal));
    return { kind: "set" as const, previous };
  });
}

export async function proposePolicyChange(
  db: Db,
  ctx: CommandContext,
  roomId: string,
  p: { changeId: string; change: Record<string, unknown>; by: string; ttlMs: number },
): Promise<PolicyProposal> {
  return db.tx("propose a policy change", async (tx) => {
    await db.lockFence(tx, "propose a policy change", ctx.fence);
    checkRoom("propose a policy change", ctx, roomId);
    // Insert-or-ignore: a leader repeating the command after a crash finds its proposal kept.
    const { rowCount } = await tx.query(
      `INSERT INTO policy_proposals (room_id, change_id, change, proposed_by, proposed_at, expires_at, status)
       VALUES ($2, $3, $4::jsonb, $5, ${NOW}, ${NOW} + $6::bigint, 'pending')
       ON CONFLICT (room_id, change_id) DO NOTHING`,
      [tx.clockParam, roomId, p.changeId, json(p.change), p.by, Math.max(0, Math.floor(p.ttlMs))],
    );
    const { rows } = await tx.query<ProposalRow>(
      "SELECT * FROM policy_proposals WHERE room_id = $1 AND change_id = $2",
      [roomId, p.changeId],
    );
    if (rows[0] === undefined)
      throw new NotFoundError("propose a policy change", { roomId, changeId: p.changeId });
    const proposal = toProposal(rows[0]);
    if (rowCount === 1)
      tx.log(roomId, {
        kind: "policy.proposed",
        term: ctx.fence.term,
        actor: sessionKey(ctx.fence.session),
        data: { changeId: p.changeId, change: p.change, by: p.by, expiresAt: proposal.expiresAt },
      });
    if (ctx.inboxEventId !== undefined)
      await markHandledInTx(tx, ctx.fence, ctx.inboxEventId, proposalOutcome(proposal));
    return proposal;
  });
}

export async function getPolicyProposal(
  db: Db,
  roomId: string,
  changeId: string,
): Promise<PolicyProposal | null> {
  const rows = await db.one<ProposalRow>(
    "get a policy proposal",
    "SELECT * FROM policy_proposals WHERE room_id = $1 AND change_id = $2",
    [roomId, changeId],
  );
  return rows[0] === undefined ? null : toProposal(rows[0]);
}
