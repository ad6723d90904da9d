/**
 * The reply to a command, rendered from its stored outcome alone (no store reads), so the same
 * outcome always renders the same reply: chat's face of the one renderer of each outcome kind
 * (commands/outcome-faces.ts). `null` means the outcome deserves no reply.
 */
export { renderOutcome } from "../commands/outcome-faces.js";
