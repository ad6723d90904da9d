/**
 * A LeaseStore & ChangeFeed in memory for the LeaseKeeper's unit tests, on a FakeClock (store time
 * and the holder's monotonic time are the same clock, so a renewal lands the instant it is sent).
 * `renewals` decides how renewals answer: granted, refused (deposed), failing (store down) or hanging.
 */
import { ConflictError, StoreError } from "../../src/ports/errors.js";
import type {
  ChangeFeed,
  ChangeTopic,
  LeaderFence,
  LeaseState,
  LeaseStore,
  LeaseSync,
  LeaseWish,
  Session,
} from "../../src/ports/store.js";
import type { FakeClock } from "./fake-clock.js";

export type RenewalMode = "grant" | "conflict" | "fail" | "hang";

export class FakeLeaseStore implements LeaseStore, ChangeFeed {
  renewals: RenewalMode = "grant";
  readonly calls: string[] = [];
  private holder: Session | null = null;
  private term = 0;
  private expiresAt = 0;
  private readonly listeners = new Set<(topic: ChangeTopic, roomId: string | null) => void>();

  constructor(
    private readonly clock: FakeClock,
    private readonly roomId: string,
  ) {}

  private held(fence: LeaderFence): boolean {
    return (
      this.holder !== null &&
      this.holder.nodeId === fence.session.nodeId &&
      this.holder.bootId === fence.session.bootId &&
      this.term === fence.term &&
      this.expiresAt > this.clock.monotonicMs()
    );
  }

  private changed(): void {
    for (const l of this.listeners) l("lease", this.roomId);
  }

  acquireLease(
    roomId: string,
    session: Session,
    ttlMs: number,
  ): Promise<LeaderFence & { expiresAt: number }> {
    this.calls.push("acquire");
    if (this.holder !== null && this.expiresAt > this.clock.monotonicMs()) {
      return Promise.reject(new ConflictError("acquire lease", { free: true }, { term: this.term }));
    }
    this.holder = session;
    this.term += 1;
    this.expiresAt = this.clock.monotonicMs() + ttlMs;
    this.changed();
    return Promise.resolve({ roomId, session, term: this.term, expiresAt: this.expiresAt });
  }

  renewLease(fence: LeaderFence, ttlMs: number): Promise<{ expiresAt: number }> {
    this.calls.push(`renew:${this.renewals}`);
    switch (this.renewals) {
      case "hang":
        return new Promise<never>(() => undefined);
      case "fail":
        return Promise.reject(new StoreError("renew lease", { cause: new Error("connection refused") }));
      case "conflict":
        return Promise.reject(
          new ConflictError("renew lease", { term: fence.term }, { term: this.term + 1 }),
        );
      case "grant":
        if (!this.held(fence)) {
          return Promise.reject(new ConflictError("renew lease", { term: fence.term }, { term: this.term }));
        }
        this.expiresAt = this.clock.monotonicMs() + ttlMs;
        return Promise.resolve({ expiresAt: this.expiresAt });
    }
  }

  /** Each wish answered as acquireLease or renewLease answers it. */
  async syncLeases(session: Session, ttlMs: number, wishes: LeaseWish[]): Promise<LeaseSync[]> {
    const out: LeaseSync[] = [];
    for (const w of wishes) {
      const ok = await (
        w.term === null
          ? this.acquireLease(w.roomId, session, ttlMs)
          : this.renewLease({ roomId: w.roomId, session, term: w.term }, ttlMs)
      ).then(
        () => true,
        () => false,
      );
      const outcome = ok ? (w.term === null ? "acquired" : "renewed") : w.term === null ? "held" : "lost";
      const now = this.clock.monotonicMs();
      out.push({
        roomId: w.roomId,
        outcome,
        holder: this.holder,
        term: this.term,
        expiresAt: this.expiresAt,
        now,
      });
    }
    return out;
  }

  releaseLease(fence: LeaderFence): Promise<void> {
    this.calls.push("release");
    if (!this.held(fence))
      return Promise.reject(new ConflictError("release lease", { term: fence.term }, null));
    this.holder = null;
    this.expiresAt = 0;
    this.changed();
    return Promise.resolve();
  }

  getLease(roomId: string): Promise<LeaseState | null> {
    const now = this.clock.monotonicMs();
    return Promise.resolve({ roomId, holder: this.holder, term: this.term, expiresAt: this.expiresAt, now });
  }

  onChange(listener: (topic: ChangeTopic, roomId: string | null) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}
