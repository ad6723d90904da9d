/** A copy of a NodeConfig that is safe to log: every secret replaced by "[redacted]". */
import type { NodeConfig } from "./node-config.js";
import { REDACTED, redactPostgresUrl } from "./store-location.js";

export { REDACTED };

/**
 * Replaces the Matrix access token and recovery key, a password in the PostgreSQL URL, the HTTP token hashes, the webhooks' secrets, an edge node's token and the values
 * of every action's env (operators put credentials such as PGPASSWORD there) with "[redacted]".
 */
export function redactConfig(config: NodeConfig): NodeConfig {
  const copy = structuredClone(config);
  if (copy.matrix !== null) {
    copy.matrix.accessToken = REDACTED;
    if (copy.matrix.recoveryKey !== null) copy.matrix.recoveryKey = REDACTED;
  }
  if (copy.store.kind === "postgres") copy.store.url = redactPostgresUrl(copy.store.url);
  // Only hashes are configured, but a hash of a short token can be brute-forced: keep them out of logs too.
  if (copy.http !== null) copy.http.tokens = copy.http.tokens.map((t) => ({ ...t, sha256: REDACTED }));
  for (const hook of copy.webhooks) hook.secret = REDACTED;
  if (copy.edge !== null) copy.edge.token = REDACTED;
  for (const action of Object.values(copy.actions)) {
    for (const key of Object.keys(action.env)) action.env[key] = REDACTED;
  }
  return copy;
}
