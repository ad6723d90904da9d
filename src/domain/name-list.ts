/**
 * A list of names that fits one line: every name when they all fit, else as many as fit
 * and "and N more". Nothing is dropped silently, and "and 1 more" never stands in for a name that
 * is known: it would take about the same space.
 */

/** Characters of one line of names, backticks and separators included. */
export const NAME_LINE_CHARS = 72;

export interface FittedList<T> {
  /** The items to name, in their order. */
  shown: T[];
  /** How many of `total` are not named: say "and N more" when > 0. */
  more: number;
}

/**
 * `items` are the ones that could be named (the first of `total`, which may count more than are
 * known), `width` the characters one takes when named, `separator` what goes between two. At
 * least one item is named when any is known.
 */
export function fitList<T>(
  items: readonly T[],
  total: number,
  width: (item: T) => number,
  budget = NAME_LINE_CHARS,
  separator = 2,
): FittedList<T> {
  const all = Math.max(total, items.length);
  const widths = items.map(width);
  const named = (k: number): number =>
    widths.slice(0, k).reduce((sum, w) => sum + w, 0) + separator * Math.max(0, k - 1);
  if (items.length === all && named(all) <= budget) return { shown: [...items], more: 0 };
  let k = Math.min(1, items.length);
  while (k < items.length && named(k + 1) + moreWidth(all - k - 1) <= budget) k += 1;
  // "and 1 more" would replace one name that is known: name it instead.
  if (all - k === 1 && k < items.length) k += 1;
  return { shown: items.slice(0, k), more: all - k };
}

/** The characters of " and N more". */
function moreWidth(n: number): number {
  return n === 0 ? 0 : ` and ${n} more`.length;
}

/** `a`, `b` and 3 more (each name in backticks), as one line of plain text. */
export function nameLine(names: readonly string[], total = names.length, budget = NAME_LINE_CHARS): string {
  const { shown, more } = fitList(names, total, (n) => n.length + 2, budget);
  return `${shown.map((n) => `\`${n}\``).join(", ")}${more > 0 ? ` and ${more} more` : ""}`;
}

/** Characters of a plan level's ids on one line of `dagbot validate`. */
export const LEVEL_LINE_CHARS = 100;

/** `a, b, c, … 997 more`: the ids of a plan level that fit one line, and how many it leaves out. */
export function idLine(ids: readonly string[], budget = LEVEL_LINE_CHARS): string {
  const { shown, more } = fitList(ids, ids.length, (id) => id.length, budget);
  return `${shown.join(", ")}${more > 0 ? `, … ${more} more` : ""}`;
}
