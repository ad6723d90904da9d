/**
 * The two kinds of reference a task argument may hold (docs/architecture.md §6): `{params.NAME}`, put
 * in when a run is created (params.ts), and `{tasks.ID.outputs.NAME}`, put in when the task runs
 * (outputs.ts). Each is put in once: a value is never read for references again. A parameter's value
 * may not hold an output reference (it is put in before outputs are), and an output's value neither
 * kind (a retry puts its producers' values in before its parameters): no value can become a
 * reference the DAG's validation never saw. A matrix task's `{matrix.AXIS}` (matrix.ts) is put in
 * first, when the document is parsed: its values are id characters only, so none holds a brace.
 * A fan-out's `{item}` and `{item.index}` (fan-out.ts) are put in when the leader writes its
 * instances, after parameters and before outputs: neither a parameter's nor an output's value may
 * hold one, so no value is read for references again.
 */

/** `{params.NAME}` in a task argument's string value. */
export const PARAM_REFERENCE = /\{params\.([A-Za-z_][A-Za-z0-9_]*)\}/g;

/** `{tasks.ID.outputs.NAME}` in a task argument's string value (a task id may hold dots). */
export const OUTPUT_REFERENCE = /\{tasks\.([A-Za-z0-9_.-]{1,64})\.outputs\.([A-Za-z_][A-Za-z0-9_]*)\}/g;

/** `{item}` or `{item.index}` in a for_each task's argument (fan-out.ts ITEM_REFERENCE, the same text). */
export const ITEM_REFERENCE_SOURCE = /\{item(\.index)?\}/.source;

const ANY_REFERENCE = new RegExp(
  `${PARAM_REFERENCE.source}|${OUTPUT_REFERENCE.source}|${ITEM_REFERENCE_SOURCE}`,
);

/** Whether a value holds a reference of any kind. */
export function holdsReference(value: string): boolean {
  return ANY_REFERENCE.test(value);
}

const ONE_OUTPUT_REFERENCE = new RegExp(OUTPUT_REFERENCE.source);

/** Whether a value holds an output reference. */
export function holdsOutputReference(value: string): boolean {
  return ONE_OUTPUT_REFERENCE.test(value);
}

const ONE_ITEM_REFERENCE = new RegExp(ITEM_REFERENCE_SOURCE);

/** Whether a value holds a fan-out's `{item}` or `{item.index}`. */
export function holdsItemReference(value: string): boolean {
  return ONE_ITEM_REFERENCE.test(value);
}
