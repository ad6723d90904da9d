/** The two questions every transition table answers (task-states.ts, run-states.ts): is a move legal, and where can a state go. */

export interface Transition<S extends string, A extends string> {
  readonly from: S;
  readonly to: S;
  readonly who: readonly A[];
  readonly condition: string;
}

export function canMove<S extends string, A extends string>(
  table: readonly Transition<S, A>[],
  from: S,
  to: S,
  actor: A,
): boolean {
  return table.some((t) => t.from === from && t.to === to && t.who.includes(actor));
}

/** The states `actor` may move to from `from` (every actor when none is given), in table order. */
export function targetsOf<S extends string, A extends string>(
  table: readonly Transition<S, A>[],
  from: S,
  actor?: A,
): S[] {
  const targets: S[] = [];
  for (const t of table) {
    if (t.from !== from || (actor !== undefined && !t.who.includes(actor))) continue;
    if (!targets.includes(t.to)) targets.push(t.to);
  }
  return targets;
}
