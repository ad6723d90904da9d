/**
 * One statement for all of a node's rooms: the lease keepers of one node ask for their
 * acquires and renewals here, and the calls made within a few milliseconds of each other go to the
 * store as ONE syncLeases. Keepers renew on a grid shared by the node (LeaseKeeper) and followers of
 * rooms led by the same node wake at the same expiry, so their calls coincide and coalesce.
 */
import { ConflictError } from "../ports/errors.js";
import type { LeaderFence, LeaseStore, LeaseSync, LeaseWish, Session } from "../ports/store.js";
import { acquiredFence, sessionKey } from "../ports/lease-answer.js";

/** How long a call waits for others to join its statement (none once every room of the node asked). */
export const LEASE_BATCH_WINDOW_MS = 5;

interface Pending {
  wish: LeaseWish;
  resolve: (r: LeaseSync) => void;
  reject: (e: unknown) => void;
}

export class LeaseBatcher implements Pick<LeaseStore, "acquireLease" | "renewLease"> {
  private pending = new Map<string, Pending>();
  private timer: NodeJS.Timeout | null = null;
  /** Statements sent (tests and the bench read it). */
  statements = 0;

  constructor(
    private readonly store: Pick<LeaseStore, "syncLeases">,
    private readonly session: Session,
    private readonly ttlMs: number,
    private readonly windowMs = LEASE_BATCH_WINDOW_MS,
    /**
     * The node's rooms, each with one keeper: once every one of them has asked, nobody is left to
     * join, and the statement goes at once (a node of one room never waits: its first acquire, on
     * the way to leading, is that much sooner).
     */
    private readonly rooms = Infinity,
  ) {}

  async acquireLease(
    roomId: string,
    session: Session,
    ttlMs: number,
  ): Promise<LeaderFence & { expiresAt: number }> {
    this.check(session, ttlMs);
    const r = await this.ask({ roomId, term: null });
    return acquiredFence(roomId, session, r);
  }

  async renewLease(fence: LeaderFence, ttlMs: number): Promise<{ expiresAt: number }> {
    this.check(fence.session, ttlMs);
    const r = await this.ask({ roomId: fence.roomId, term: fence.term });
    if (r.outcome !== "renewed")
      throw new ConflictError(
        "renew lease",
        { roomId: fence.roomId, holder: sessionKey(fence.session), term: fence.term, unexpired: true },
        {
          holder: r.holder === null ? null : sessionKey(r.holder),
          term: r.term,
          expiresAt: r.expiresAt,
          now: r.now,
        },
      );
    return { expiresAt: r.expiresAt };
  }

  private check(session: Session, ttlMs: number): void {
    if (
      session.nodeId !== this.session.nodeId ||
      session.bootId !== this.session.bootId ||
      ttlMs !== this.ttlMs
    )
      throw new RangeError("lease batcher: one session and one ttl per batcher");
  }

  private ask(wish: LeaseWish): Promise<LeaseSync> {
    return new Promise((resolve, reject) => {
      const earlier = this.pending.get(wish.roomId);
      if (earlier !== undefined) {
        // One keeper per room: a second ask for the room in the same window sends the newer wish.
        earlier.reject(new ConflictError("lease batch", { roomId: wish.roomId }, { superseded: true }));
      }
      this.pending.set(wish.roomId, { wish, resolve, reject });
      if (this.pending.size >= this.rooms) {
        if (this.timer !== null) clearTimeout(this.timer);
        void this.flush();
      } else this.timer ??= setTimeout(() => void this.flush(), this.windowMs);
    });
  }

  private async flush(): Promise<void> {
    this.timer = null;
    const batch = [...this.pending.values()].sort((a, b) => (a.wish.roomId < b.wish.roomId ? -1 : 1));
    this.pending = new Map();
    if (batch.length === 0) return;
    this.statements += 1;
    try {
      const answers = await this.store.syncLeases(
        this.session,
        this.ttlMs,
        batch.map((p) => p.wish),
      );
      const byRoom = new Map(answers.map((a) => [a.roomId, a]));
      for (const p of batch) {
        const a = byRoom.get(p.wish.roomId);
        if (a === undefined) p.reject(new Error(`sync leases: no answer for room ${p.wish.roomId}`));
        else p.resolve(a);
      }
    } catch (e) {
      for (const p of batch) p.reject(e);
    }
  }
}
