/**
 * Who a command's sender is, as far as permissions go (docs/architecture.md §5). Types only: the Matrix
 * adapter answers from the room's m.room.power_levels state and the config's allowlist; the CLI and
 * the HTTP API (behind its token) answer "local operator".
 */

export type SenderStanding =
  /** Someone with the machine's own credentials (CLI, HTTP token): may run every command. */
  | { kind: "local-operator" }
  | {
      kind: "room-member";
      /** The sender's power level in the room (users_default when not listed; 0 when the room says nothing). */
      powerLevel: number;
      /** The sender's user id is on the node config's allowlist. */
      allowlisted: boolean;
      /**
       * The level the room requires to change its power levels: its m.room.power_levels content's
       * events["m.room.power_levels"], else state_default, else 50 (the spec's defaults). Those at or
       * above it own the room; they alone may change the room's policy.
       */
      adminLevel: number;
    };

export interface PermissionOracle {
  /**
   * The sender's standing in the room right now. May throw (homeserver unreachable); the caller then
   * leaves the command unhandled and tries again, so a refusal is never made on missing data.
   */
  standing(roomId: string, userId: string): Promise<SenderStanding>;
}
