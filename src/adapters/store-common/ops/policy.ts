/**
 * The room's policy, written once for both stores: the policy every node of the room enforces, and
 * the changes room admins proposed under the two-person rule, each applied only when another admin
 * confirms it in time (docs/architecture.md §9, "who may change the room's policy"). Every change is
 * logged with who, from what and to what.
 */
import { NotFoundError } from "../../../ports/errors.js";
import type {
  CommandContext,
  PolicySet,
  PolicyProposal,
  RoomPolicy,
  SetPolicyOptions,
  StoredRoomPolicy,
} from "../../../ports/store.js";
import { checkRoom } from "../checks.js";
import type { Row } from "../records.js";
import { sessionKey } from "../records.js";
import { policySetEvent } from "../run-outcomes.js";
import type { Mappers, Script } from "../script.js";
import { log, mappers, now, p, row, run, sql } from "../script.js";
import { holdFence } from "./fence.js";
import { markAnswered } from "./inbox-handled.js";

const POLICY = sql("a room's policy")`SELECT * FROM room_policies WHERE room_id = ${p.text("roomId")}`;

// Locked on PostgreSQL: two changes of one room's policy apply one after the other, each naming the previous.
const POLICY_LOCKED = sql("a room's policy, locked")`
  SELECT * FROM room_policies WHERE room_id = ${p.text("roomId")}${p.only({ postgres: " FOR UPDATE" })}`;

const INIT = sql("a room's first policy")`
  INSERT INTO room_policies (room_id, policy, set_by, updated_at)
  VALUES (${p.text("roomId")}, ${p.json("policy")}, ${p.text("by")}, ${p.now})
  ON CONFLICT (room_id) DO NOTHING`;

const SET = sql("a room's policy, set")`
  INSERT INTO room_policies (room_id, policy, set_by, updated_at)
  VALUES (${p.text("roomId")}, ${p.json("policy")}, ${p.text("by")}, ${p.now})
  ON CONFLICT (room_id) DO UPDATE SET policy = excluded.policy, set_by = excluded.set_by,
    updated_at = excluded.updated_at`;

const PROPOSAL = sql("a policy proposal")`
  SELECT * FROM policy_proposals WHERE room_id = ${p.text("roomId")} AND change_id = ${p.text("changeId")}`;

// The guard: pending, not expired, and not the proposer's own confirmation.
const CONFIRM = sql("a policy proposal, confirmed")`
  UPDATE policy_proposals SET status = 'applied', confirmed_by = ${p.text("by")}, confirmed_at = ${p.now}
   WHERE room_id = ${p.text("roomId")} AND change_id = ${p.text("changeId")} AND status = 'pending'
     AND expires_at > ${p.now} AND proposed_by <> ${p.text("by")}`;

// Insert-or-ignore: a leader repeating the command after a crash finds its proposal kept.
const PROPOSE = sql("a policy proposal, made")`
  INSERT INTO policy_proposals (room_id, change_id, change, proposed_by, proposed_at, expires_at, status)
  VALUES (${p.text("roomId")}, ${p.text("changeId")}, ${p.json("change")}, ${p.text("by")}, ${p.now},
          ${p.int("expiresAt")}, 'pending')
  ON CONFLICT (room_id, change_id) DO NOTHING`;

const toPolicy = (m: Mappers, r: Row): StoredRoomPolicy => ({
  roomId: r.room_id as string,
  policy: m.json<RoomPolicy>(r.policy),
  setBy: r.set_by as string,
  updatedAt: Number(r.updated_at),
});

const toProposal = (m: Mappers, r: Row): PolicyProposal => ({
  roomId: r.room_id as string,
  changeId: r.change_id as string,
  change: m.json<Record<string, unknown>>(r.change),
  proposedBy: r.proposed_by as string,
  proposedAt: Number(r.proposed_at),
  expiresAt: Number(r.expires_at),
  status: r.status as PolicyProposal["status"],
  confirmedBy: r.confirmed_by as string | null,
  confirmedAt: r.confirmed_at === null ? null : Number(r.confirmed_at),
});

export function* initRoomPolicy(
  roomId: string,
  policy: RoomPolicy,
  setBy: string,
): Script<{ set: boolean; stored: StoredRoomPolicy }> {
  const m = yield* mappers();
  const set = (yield* run(INIT, { roomId, policy, by: setBy })) === 1;
  if (set)
    yield* log(roomId, {
      kind: "policy.set",
      term: null,
      actor: null,
      data: { policy, by: setBy, initial: true },
    });
  const stored = yield* row(POLICY, { roomId });
  if (stored === undefined) throw new NotFoundError("init room policy", { roomId });
  return { set, stored: toPolicy(m, stored) };
}

export function* getRoomPolicy(roomId: string): Script<StoredRoomPolicy | null> {
  const m = yield* mappers();
  const r = yield* row(POLICY, { roomId });
  return r === undefined ? null : toPolicy(m, r);
}

export function* setRoomPolicy(
  ctx: CommandContext<PolicySet>,
  roomId: string,
  policy: RoomPolicy,
  by: string,
  options: SetPolicyOptions = {},
): Script<
  { kind: "set"; previous: RoomPolicy | null } | { kind: "not-pending"; proposal: PolicyProposal | null }
> {
  const operation = "set room policy";
  const m = yield* mappers();
  yield* holdFence(operation, ctx.fence);
  checkRoom(operation, ctx, roomId);
  let proposal: { changeId: string; proposedBy: string } | undefined;
  if (options.confirms !== undefined) {
    const changeId = options.confirms;
    const confirmed = (yield* run(CONFIRM, { by, roomId, changeId })) === 1;
    const r = yield* row(PROPOSAL, { roomId, changeId });
    if (!confirmed || r === undefined)
      return { kind: "not-pending", proposal: r === undefined ? null : toProposal(m, r) };
    proposal = { changeId, proposedBy: r.proposed_by as string };
  }
  const old = yield* row(POLICY_LOCKED, { roomId });
  const previous = old === undefined ? null : toPolicy(m, old).policy;
  yield* run(SET, { roomId, policy, by });
  yield* log(roomId, {
    kind: "policy.set",
    term: ctx.fence.term,
    actor: sessionKey(ctx.fence.session),
    data: policySetEvent(policy, previous, by, options, proposal),
  });
  yield* markAnswered(ctx, { policy, previous, ...(proposal === undefined ? {} : { proposal }) });
  return { kind: "set", previous };
}

export function* proposePolicyChange(
  ctx: CommandContext<PolicyProposal>,
  roomId: string,
  change: { changeId: string; change: Record<string, unknown>; by: string; ttlMs: number },
): Script<PolicyProposal> {
  const operation = "propose a policy change";
  const m = yield* mappers();
  yield* holdFence(operation, ctx.fence);
  checkRoom(operation, ctx, roomId);
  const at = yield* now();
  const inserted = yield* run(PROPOSE, {
    roomId,
    changeId: change.changeId,
    change: change.change,
    by: change.by,
    expiresAt: at + Math.max(0, Math.floor(change.ttlMs)),
  });
  const r = yield* row(PROPOSAL, { roomId, changeId: change.changeId });
  if (r === undefined) throw new NotFoundError(operation, { roomId, changeId: change.changeId });
  const proposal = toProposal(m, r);
  if (inserted === 1)
    yield* log(roomId, {
      kind: "policy.proposed",
      term: ctx.fence.term,
      actor: sessionKey(ctx.fence.session),
      data: {
        changeId: change.changeId,
        change: change.change,
        by: change.by,
        expiresAt: proposal.expiresAt,
      },
    });
  yield* markAnswered(ctx, proposal);
  return proposal;
}

export function* getPolicyProposal(roomId: string, changeId: string): Script<PolicyProposal | null> {
  const m = yield* mappers();
  const r = yield* row(PROPOSAL, { roomId, changeId });
  return r === undefined ? null : toProposal(m, r);
}
