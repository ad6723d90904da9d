/** Small statistics for bench figures: nearest-rank percentiles and a median/min–max summary of rounds. */

/** The p-th percentile (0–100) by nearest rank; null for an empty list. */
export function percentile(values, p) {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1];
}

export function median(values) {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** Median and min–max of the rounds of one figure; the raw rounds are kept for the JSON. */
export function summarize(rounds) {
  const ok = rounds.filter((v) => typeof v === "number" && Number.isFinite(v));
  if (ok.length === 0) return { median: null, min: null, max: null, rounds };
  return { median: median(ok), min: Math.min(...ok), max: Math.max(...ok), rounds };
}

/** A number rounded for display: integers above 100, one decimal above 10, else two. */
export function fmt(v) {
  if (v === null || v === undefined || !Number.isFinite(v)) return "–";
  if (Number.isInteger(v)) return String(v);
  const a = Math.abs(v);
  if (a >= 100) return String(Math.round(v));
  if (a >= 10) return v.toFixed(1);
  return v.toFixed(2);
}

/** "median (min–max)" of a summary. */
export function fmtSummary(s, unit = "") {
  if (s === null || s === undefined || s.median === null) return "–";
  const u = unit === "" ? "" : ` ${unit}`;
  if (s.rounds.length === 1 || s.min === s.max) return `${fmt(s.median)}${u}`;
  return `${fmt(s.median)}${u} (${fmt(s.min)}–${fmt(s.max)})`;
}
