/** What both stores' definitions share: the run number an `<id>.N` run id carries. */

/** Run numbers above this are not counted: `!dag run` never names one (it stops at 9999). */
const MAX_RUN_NUMBER = 1_000_000;

/** N when `runDagId` is a run of `definitionId` named `<id>.N` (the id maybe shortened to fit), else null. */
export function runNumber(runDagId: string, definitionId: string): number | null {
  if (runDagId === definitionId) return null;
  const m = /\.(\d{1,7})$/.exec(runDagId);
  if (m === null) return null;
  const n = Number(m[1]);
  return n >= 2 && n <= MAX_RUN_NUMBER ? n : null;
}
