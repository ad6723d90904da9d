/**
 * Schedules run on a living authority: before a slot fires, its owner — the
 * publisher, and under the two-person rule the confirmer of its first run too — must still be
 * allowed to run it, judged exactly as a command of theirs would be now: the room's stored policy
 * (power level, allowlist) and their standing from the same permission oracle the commands use.
 */
import type { PermissionOracle } from "../ports/permissions.js";
import type { DefinitionRecord, OutboxMessageInput, PolicyStore, RunRecord } from "../ports/store.js";
import type { CommandPolicy } from "./commands/context.js";
import { withRoomPolicy } from "./commands/context.js";
import { isOperator } from "./commands/permissions.js";
import { code, r, userPill } from "./render/html.js";
import { MESSAGE_EVENT_TYPE, noticeContent, runThreadPlacement } from "./render/messages.js";
import { RUN_EMOJI, RUN_WORD } from "./render/words.js";
import type { ScheduleAuthority } from "./schedules.js";

export interface AuthorityDeps {
  store: Pick<PolicyStore, "getRoomPolicy">;
  permissions: PermissionOracle;
  /** The node's own settings; the room's stored policy replaces its permissions where there is one. */
  policy: CommandPolicy;
  /** Whether anything sends this room's messages (a chat node); false: the pause is not announced. */
  queueMessages: boolean;
}

/** The txnId of the one message that says a schedule paused itself at `slot`. */
export const schedulePausedTxnId = (roomId: string, dagId: string, slot: number): string =>
  `schedule.paused.${roomId}.${dagId}.${slot}`;

export function scheduleAuthority(deps: AuthorityDeps): ScheduleAuthority {
  return {
    refusal: async (def) => {
      const stored = await deps.store.getRoomPolicy(def.roomId);
      const policy = stored === null ? deps.policy : withRoomPolicy(deps.policy, stored.policy);
      const owners = [def.publisher];
      const confirmer = def.origin?.confirmedBy ?? null;
      if (policy.twoPersonRule && confirmer !== null && confirmer !== def.publisher) owners.push(confirmer);
      for (const user of owners) {
        const standing = await deps.permissions.standing(def.roomId, user);
        const judged =
          standing.kind === "room-member"
            ? { ...standing, allowlisted: policy.allowlist.includes(user) }
            : standing;
        if (isOperator(judged, policy)) continue;
        const role = user === def.publisher ? "its publisher" : "the confirmer of its first run";
        const have = judged.kind === "room-member" ? judged.powerLevel : 0;
        return `${user} (${role}) may no longer run it: power level ${have} in this room, ${policy.requiredPowerLevel} needed, not on the allowlist`;
      }
      return null;
    },
    notice: (def, reason, slot) => (deps.queueMessages ? pausedNotice(def, reason, slot) : null),
    afterSkippedNotice: (def, upstream, reason) =>
      deps.queueMessages ? afterSkippedNotice(def, upstream, reason) : null,
  };
}

/** The txnId of the one message that says `dagId` did not start after the upstream run. */
export const afterSkippedTxnId = (dagId: string, upstreamRunId: string): string =>
  `after.skipped.${dagId}.${upstreamRunId}`;

/**
 * Said once, in the upstream run's thread, after its end: outcome first (it may be the thread's last
 * event, which its summary shows), then which DAG did not start after it and why.
 */
function afterSkippedNotice(def: DefinitionRecord, upstream: RunRecord, reason: string): OutboxMessageInput {
  const rendered = r`${RUN_EMOJI[upstream.status]} ${code(upstream.dagId)} ${RUN_WORD[upstream.status]} · ⏭️ ${code(
    def.dagId,
  )} (after ${code(def.dag.after?.dag ?? upstream.dagId)}) did not start: ${reason}.`;
  return {
    txnId: afterSkippedTxnId(def.dagId, upstream.runId),
    roomId: def.roomId,
    eventType: MESSAGE_EVENT_TYPE,
    content: noticeContent(rendered, runThreadPlacement(upstream)),
  };
}

function pausedNotice(def: DefinitionRecord, reason: string, slot: number): OutboxMessageInput {
  const rendered = r`⏸️ The schedule of ${code(def.dagId)} paused itself instead of firing: ${reason}. Its owner is ${userPill(def.publisher)}. An operator may ${code(`!dag schedule resume ${def.dagId}`)} once they are allowed again, or ${code(`!dag schedule delete ${def.dagId}`)}.`;
  return {
    txnId: schedulePausedTxnId(def.roomId, def.dagId, slot),
    roomId: def.roomId,
    eventType: MESSAGE_EVENT_TYPE,
    content: noticeContent(rendered, { kind: "room" }),
  };
}
