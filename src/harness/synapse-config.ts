/** Renders the test-only Synapse config (recipe §1.2 B): plain HTTP on 127.0.0.1, SQLite, no rate limits. */

export type SynapseRateLimits = "off" | "low";

export interface SynapseConfigParams {
  port: number;
  /** Absolute path; the database, media store, signing key and pid file live here. */
  dataDir: string;
  registrationSecret: string;
  /** "low" keeps rc_message at 1/s with a burst of 2 so 429 handling can be tested. */
  rateLimits?: SynapseRateLimits;
  /** Top-level keys that replace the rendered ones (Synapse merges nothing below the top level). */
  extra?: Record<string, unknown>;
}

/** Every rate limiter Synapse 1.163 reads (synapse/config/ratelimiting.py), raised out of reach. */
export const RAISED_LIMITS = [
  "rc_message",
  "rc_registration",
  "rc_registration_token_validity",
  "rc_login.address",
  "rc_login.account",
  "rc_login.failed_attempts",
  "rc_admin_redaction",
  "rc_joins.local",
  "rc_joins.remote",
  "rc_joins_per_room",
  "rc_invites.per_room",
  "rc_invites.per_user",
  "rc_invites.per_issuer",
  "rc_third_party_invite",
  "rc_3pid_validation",
  "rc_room_creation",
  "rc_presence.per_user",
  "rc_user_directory",
  "rc_delayed_event_mgmt",
  "rc_reports",
  "rc_media_create",
  "rc_key_requests",
  "rc_profile",
] as const;

const RAISED = { per_second: 9999, burst_count: 9999 };
const LOW_MESSAGES = { per_second: 1, burst_count: 2 };

/** Builds the nested rc_* objects from dotted names ("rc_login.address" → rc_login: {address}). */
function rateLimitSection(rateLimits: SynapseRateLimits): Record<string, unknown> {
  const out: Record<string, Record<string, unknown>> = {};
  for (const key of RAISED_LIMITS) {
    const value = key === "rc_message" && rateLimits === "low" ? LOW_MESSAGES : RAISED;
    const [top, sub] = key.split(".") as [string, string | undefined];
    if (sub === undefined) out[top] = value;
    else out[top] = { ...(out[top] ?? {}), [sub]: value };
  }
  return out;
}

/**
 * The config as an object; Synapse reads YAML, and JSON is YAML, so it is written with
 * JSON.stringify and no YAML library is needed.
 */
export function synapseConfig(p: SynapseConfigParams): Record<string, unknown> {
  const base = `http://127.0.0.1:${p.port}/`;
  return {
    server_name: "localhost",
    // Must equal the real URL: /login answers carry it as well_known and bot-sdk follows it.
    public_baseurl: base,
    pid_file: `${p.dataDir}/homeserver.pid`,
    report_stats: false,
    listeners: [
      {
        port: p.port,
        type: "http",
        tls: false,
        x_forwarded: false,
        // Not the generated ['::1', ...]: that bind fails on hosts without IPv6 and Synapse exits.
        bind_addresses: ["127.0.0.1"],
        resources: [{ names: ["client"], compress: false }],
      },
    ],
    database: { name: "sqlite3", args: { database: `${p.dataDir}/homeserver.db` } },
    media_store_path: `${p.dataDir}/media_store`,
    signing_key_path: `${p.dataDir}/localhost.signing.key`,
    trusted_key_servers: [],
    suppress_key_server_warning: true,
    registration_shared_secret: p.registrationSecret,
    enable_registration: false,
    bcrypt_rounds: 4,
    presence: { enabled: false },
    url_preview_enabled: false,
    enable_metrics: false,
    // v12 rooms give creators implicit infinite power outside power_levels.users; tests read that map.
    default_room_version: "11",
    caches: { sync_response_cache_duration: 0 },
    // Background updates would compete with the tests for the 2 cores; a test server never needs them.
    background_updates: { min_batch_size: 100000, sleep_duration_ms: 100000 },
    ...rateLimitSection(p.rateLimits ?? "off"),
    ...p.extra,
  };
}

export function renderSynapseConfig(p: SynapseConfigParams): string {
  return `# TEST ONLY, rendered by dagbot (src/harness/synapse-config.ts). Never use in production.\n${JSON.stringify(
    synapseConfig(p),
    null,
    2,
  )}\n`;
}
