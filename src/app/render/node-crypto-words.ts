/**
 * What a node's line says of its Matrix device (docs/architecture.md §12), in every face that lists
 * nodes: whether the device is cross-signed by its account, and the encrypted events it could not
 * decrypt with the last one's reason.
 */
import type { NodeLine } from "../commands/outcome.js";
import { plural } from "./words.js";

/** The longest part of a decryption failure's reason shown in a node's line; its log has all of it. */
const REASON_SHOWN = 240;

/** Null while the node's crypto is not loaded (no encrypted room) or its device not yet checked. */
export function deviceWords(n: Pick<NodeLine, "deviceSigned">): string | null {
  if (n.deviceSigned === null) return null;
  return n.deviceSigned
    ? "device cross-signed"
    : "⚠️ device NOT cross-signed: clients that exclude insecure devices cannot read it nor it them (its log says why)";
}

/** Null when the node decrypted everything so far. */
export function undecryptableWords(
  n: Pick<NodeLine, "undecryptable" | "undecryptableReason">,
): string | null {
  if (n.undecryptable === 0) return null;
  const count = plural(n.undecryptable, "undecryptable event");
  if (n.undecryptableReason === null) return count;
  const reason =
    n.undecryptableReason.length > REASON_SHOWN
      ? `${n.undecryptableReason.slice(0, REASON_SHOWN - 1)}…`
      : n.undecryptableReason;
  return `${count} (last: ${reason})`;
}
