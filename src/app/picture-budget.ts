/**
 * How often a room and each of its members may ask for a picture: a sliding window per
 * member and one per room, kept by the leader in memory (a new leader starts with a clean slate,
 * which at worst allows one more window's worth). A refused ask is answered once in words, with
 * when to try again; each ask after it within that time is answered with a ⏳ reaction on it
 * (inbox-step.ts), so a flood of `!dag graph` costs neither drawing nor messages, and no command
 * goes unanswered. Times come from the caller (the store's clock). Where the
 * other picture budgets live: docs/architecture.md §9.
 */

export interface RateLimit {
  /** Asks allowed within any window. */
  count: number;
  windowMs: number;
}

export interface PictureLimits {
  member: RateLimit;
  room: RateLimit;
}

/**
 * A picture within the budget of graph-budget.ts costs the leader's render worker up to about 1.2
 * CPU-seconds (bench/README.md); 10 a minute per room keeps a room below a fifth of one core, and
 * 3 a minute per member leaves the others room to ask.
 */
export const PICTURE_LIMITS: PictureLimits = {
  member: { count: 3, windowMs: 60_000 },
  room: { count: 10, windowMs: 60_000 },
};

export type PictureAsk =
  | { kind: "allowed" }
  /** Over a limit: `tell` is false when this member was already told within `retryAfterMs`. */
  | { kind: "refused"; scope: "member" | "room"; limit: RateLimit; retryAfterMs: number; tell: boolean };

/** Keys kept at most; past it the stalest are dropped (memory stays bounded whoever asks). */
const MAX_KEYS = 10_000;

export class PictureLimiter {
  private readonly asks = new Map<string, number[]>();
  private readonly toldUntil = new Map<string, number>();

  constructor(private readonly limits: PictureLimits = PICTURE_LIMITS) {}

  /** Counts the ask when allowed; a refused ask counts nothing. */
  ask(roomId: string, sender: string, now: number): PictureAsk {
    const memberKey = `m\u0000${roomId}\u0000${sender}`;
    const roomKey = `r\u0000${roomId}`;
    const member = this.recent(memberKey, this.limits.member, now);
    const room = this.recent(roomKey, this.limits.room, now);
    const over =
      member.length >= this.limits.member.count
        ? { scope: "member" as const, limit: this.limits.member, times: member }
        : room.length >= this.limits.room.count
          ? { scope: "room" as const, limit: this.limits.room, times: room }
          : null;
    if (over === null) {
      this.remember(memberKey, [...member, now]);
      this.remember(roomKey, [...room, now]);
      return { kind: "allowed" };
    }
    // The oldest ask in the window leaves it first; then one more fits.
    const retryAfterMs = Math.max(
      1,
      over.times[over.times.length - over.limit.count]! + over.limit.windowMs - now,
    );
    const told = (this.toldUntil.get(memberKey) ?? -Infinity) > now;
    if (!told) this.toldUntil.set(memberKey, now + retryAfterMs);
    return { kind: "refused", scope: over.scope, limit: over.limit, retryAfterMs, tell: !told };
  }

  private recent(key: string, limit: RateLimit, now: number): number[] {
    return (this.asks.get(key) ?? []).filter((t) => t > now - limit.windowMs && t <= now);
  }

  private remember(key: string, times: number[]): void {
    this.asks.delete(key);
    this.asks.set(key, times);
    // Maps iterate in insertion order: the first keys are the least recently asked.
    for (const map of [this.asks, this.toldUntil] as Map<string, unknown>[]) {
      while (map.size > MAX_KEYS) map.delete(map.keys().next().value!);
    }
  }
}

/** "42 s", "2 min": when to try again, rounded up. */
export function retryWords(ms: number): string {
  const seconds = Math.ceil(ms / 1000);
  return seconds < 120 ? `${seconds} s` : `${Math.ceil(seconds / 60)} min`;
}

/** A refusal a member reads once: which limit, and when to ask again. */
export function pictureRefusal(ask: Extract<PictureAsk, { kind: "refused" }>): string {
  const per = `${ask.limit.count} pictures per ${retryWords(ask.limit.windowMs)}`;
  const whose =
    ask.scope === "member" ? `you asked for ${per} already` : `this room asked for ${per} already`;
  return `${whose}, the most a ${ask.scope === "member" ? "member" : "room"} may; try again in ${retryWords(ask.retryAfterMs)} (further asks until then get ⏳ and no picture)`;
}

/**
 * The last few drawings, by what decides a picture: the room (an encrypted upload belongs to its
 * room), the run and its status, and every task's status. Holds promises, so asks for the same
 * picture while it is being drawn wait for that one drawing. Least recently used goes first.
 */
export class PictureCache<T> {
  private readonly entries = new Map<string, Promise<T>>();

  constructor(private readonly capacity = 32) {}

  /** The cached value for `key`, or `make()`'s, kept unless it rejects or `keep` says no. */
  get(key: string, make: () => Promise<T>, keep: (value: T) => boolean): Promise<T> {
    const hit = this.entries.get(key);
    if (hit !== undefined) {
      this.entries.delete(key);
      this.entries.set(key, hit);
      return hit;
    }
    const made = make();
    this.entries.set(key, made);
    while (this.entries.size > this.capacity) this.entries.delete(this.entries.keys().next().value!);
    const forget = (): void => {
      if (this.entries.get(key) === made) this.entries.delete(key);
    };
    made.then((value) => (keep(value) ? undefined : forget()), forget);
    return made;
  }
}
