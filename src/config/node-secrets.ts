/**
 * The node's own secrets, as its config and environment give them: what must never leave through a
 * task's output (domain/secret-mask.ts masks them) and what the node removes from its own
 * environment once the config is read.
 */
import { TOKEN_NOT_LOADED } from "./load-config.js";
import type { NodeConfig } from "./node-config.js";

/**
 * Environment variables that hold a secret the config has already read: once the config is loaded
 * the node needs them no more, and an action running as the node's user could read them in
 * /proc/<node pid>/environ. (PGPASSWORD is not among them: the PostgreSQL driver reads it for every
 * new connection.)
 */
export const CONSUMED_SECRET_ENV = ["DAGBOT_ACCESS_TOKEN", "DAGBOT_STORE", "DAGBOT_RECOVERY_KEY"] as const;

/** The variables this config has consumed: the fixed ones and each webhook's `secret_env`. */
export function consumedSecretEnv(config: NodeConfig): string[] {
  const named = config.webhooks.flatMap((h) => ("env" in h.secretFrom ? [h.secretFrom.env] : []));
  return [...new Set([...CONSUMED_SECRET_ENV, ...named])];
}

/** Every secret of the node: the Matrix access token and recovery key, the store's password, the HTTP token hashes, the webhooks' secrets, an edge node's token, PGPASSWORD. */
export function nodeSecrets(config: NodeConfig, env: Readonly<Record<string, string | undefined>>): string[] {
  const secrets: string[] = [];
  const token = config.matrix?.accessToken;
  if (token !== undefined && token !== TOKEN_NOT_LOADED) secrets.push(token);
  const recoveryKey = config.matrix?.recoveryKey;
  if (recoveryKey !== undefined && recoveryKey !== null) {
    // As written (groups of 4 with spaces) and as one run, the two ways it is copied around.
    secrets.push(recoveryKey, recoveryKey.replace(/\s+/g, ""));
  }
  if (config.store.kind === "postgres") secrets.push(...urlSecrets(config.store.url));
  // Only hashes are configured, but a hash of a short token can be brute-forced.
  for (const t of config.http?.tokens ?? []) secrets.push(t.sha256);
  for (const hook of config.webhooks) if (hook.secret !== "") secrets.push(hook.secret);
  if (config.edge !== null && config.edge.token !== "") secrets.push(config.edge.token);
  const pgPassword = env["PGPASSWORD"];
  if (pgPassword !== undefined && pgPassword !== "") secrets.push(pgPassword);
  return [...new Set(secrets)];
}

/** A PostgreSQL URL's password (as written and decoded) and the values of query keys that name one. */
function urlSecrets(text: string): string[] {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return [];
  }
  const out: string[] = [];
  if (url.password !== "") {
    out.push(url.password);
    try {
      out.push(decodeURIComponent(url.password));
    } catch {
      // A malformed escape: the form as written is all there is.
    }
  }
  for (const [key, value] of new URLSearchParams(url.search)) {
    if (/pass|secret|token|key/i.test(key) && value !== "") out.push(value);
  }
  return out;
}
