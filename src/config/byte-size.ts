/** Byte sizes as people write them in a node config: 65536, "512B", "64KiB", "1MiB", "10MB". */

const UNIT_BYTES: Record<string, number> = {
  B: 1,
  KB: 1_000,
  kB: 1_000,
  KiB: 1_024,
  MB: 1_000_000,
  MiB: 1_048_576,
  GB: 1_000_000_000,
  GiB: 1_073_741_824,
};

const SIZE = /^(\d+(?:\.\d+)?)\s?(B|KB|kB|KiB|MB|MiB|GB|GiB)?$/;

/** Whole bytes from a non-negative integer or a string like "64KiB"; null for anything else. */
export function parseByteSize(value: string | number): number | null {
  if (typeof value === "number") return Number.isSafeInteger(value) && value >= 0 ? value : null;
  if (typeof value !== "string" || value.length > 32) return null;
  const match = SIZE.exec(value);
  if (match === null) return null;
  const bytes = Math.round(Number(match[1]) * (UNIT_BYTES[match[2] ?? "B"] ?? Number.NaN));
  return Number.isSafeInteger(bytes) ? bytes : null;
}
