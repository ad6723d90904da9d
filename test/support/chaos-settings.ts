/**
 * Sizes of the chaos scenarios: a short version inside `npm test`, a long soak with CHAOS_LONG=1
 * (`npm run chaos`). The seed makes the drivers' choices (victims, commands, fuzz inputs) repeatable;
 * process timing is not, which is the point of a chaos run.
 */

export const CHAOS_LONG = process.env["CHAOS_LONG"] === "1";

/** CHAOS_SEED=<n> replays a run's choices; otherwise a fresh seed, printed with the results. */
export function chaosSeed(): number {
  const fromEnv = Number(process.env["CHAOS_SEED"]);
  return Number.isInteger(fromEnv) && fromEnv > 0 ? fromEnv : 1 + Math.floor(Math.random() * 2 ** 31);
}

/** A small seeded generator (xorshift32): floats in [0, 1). */
export function seededRandom(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s / 2 ** 32;
  };
}

/** Helpers over one generator. */
export class Dice {
  readonly next: () => number;
  constructor(readonly seed: number) {
    this.next = seededRandom(seed);
  }
  /** An integer in [min, max]. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }
  pick<T>(list: readonly T[]): T {
    const item = list[Math.floor(this.next() * list.length)];
    if (item === undefined) throw new Error("pick from an empty list");
    return item;
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
}

/** A pause of the chaos drivers between their moves (not a wait for a state: nothing is asserted on it). */
export const pause = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
