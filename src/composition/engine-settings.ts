/** What a node config implies for the engine: its loops' settings, its logger and its executor. */
import { createProcessExecutor, pickBaseEnv } from "../adapters/exec/process-executor.js";
import { createLogger } from "../adapters/log/pino-logger.js";
import { OUTPUT_LIMIT_CHARS } from "../adapters/store-common/checks.js";
import { forgetEnvironment } from "../adapters/os/own-environment.js";
import { DEFAULT_LEADER_TIMINGS } from "../app/leader.js";
import { maskingExecutor } from "../app/masking-executor.js";
import type { EngineSettings } from "../app/node.js";
import { consumedSecretEnv, nodeSecrets } from "../config/node-secrets.js";
import type { LogLevel, NodeConfig } from "../config/node-config.js";
import { secretMasker } from "../domain/secret-mask.js";
import type { Executor } from "../ports/executor.js";
import type { Logger } from "../ports/logger.js";

export function makeLogger(config: NodeConfig, level?: LogLevel): Logger {
  return createLogger({ level: level ?? config.logLevel });
}

/** The engine loop settings a node config implies. */
export function engineSettings(config: NodeConfig, overrides: Partial<EngineSettings> = {}): EngineSettings {
  return {
    nodeId: config.nodeId,
    labels: config.labels,
    capacity: config.capacity,
    roomIds: config.rooms,
    actions: new Map(Object.entries(config.actions)),
    lease: { ...config.lease },
    leader: {
      ...DEFAULT_LEADER_TIMINGS,
      wakeLiveWithinMs: 3 * Math.max(config.lease.renewEveryMs, Math.floor(config.lease.ttlMs / 2)),
    },
    // The task lease is its own (lease.task_ttl, longer than the room's): a store outage shorter
    // than its bound stops no action, while a lost leader is still replaced within lease.ttl
    // (docs/architecture.md §3, "Task lease").
    taskLeaseMs: config.lease.taskTtlMs,
    // Renewed like the room lease; the config guarantees renew_every + task_margin + kill_grace < task_ttl.
    taskRenewEveryMs: config.lease.renewEveryMs,
    taskMarginMs: config.lease.taskMarginMs,
    // Twice per lease TTL (`nodes --check` wants a heartbeat younger than the TTL): a follower's
    // idle cost is mostly this, its lease attempts at the holder's expiry and the claim tick.
    heartbeatEveryMs: Math.max(config.lease.renewEveryMs, Math.floor(config.lease.ttlMs / 2)),
    // The slow safety tick: work arrives by the leader's targeted wake-ups.
    workerPollMs: 10_000,
    work: true,
    initialCap: config.limits.globalCap,
    retention: {
      finishedMs: config.retention.finishedMs,
      forgetNodesAfterMs: config.retention.forgetNodesAfterMs,
      forgetKeysAfterMs: config.retention.forgetKeysAfterMs,
      // A tenth of the shorter retention, between 1 s and a minute: a row outlives its retention by
      // at most that, and a leader with nothing to prune reads a few rows a minute.
      everyMs: Math.min(
        60_000,
        Math.max(
          1_000,
          Math.floor(Math.min(config.retention.finishedMs, config.retention.forgetNodesAfterMs) / 10),
        ),
      ),
    },
    policy: {
      wanted: {
        powerLevel: config.permissions.powerLevel,
        allow: config.permissions.allow,
        twoPersonRule: config.permissions.twoPersonRule,
        autoConfirm: config.permissions.autoConfirm,
        hookAutoConfirm: config.permissions.hookAutoConfirm,
        logs: config.permissions.logs,
      },
      stated: config.permissions.stated,
    },
    ...overrides,
  };
}

/**
 * The executor of a node that loaded `config` from `env`: actions start from a minimal environment,
 * and what they print is masked of the node's secrets before anything keeps it. Then the secrets the
 * config has consumed leave the node's own environment (and its /proc/<pid>/environ), so an action
 * of the node's user cannot read them there; docs/security.md says why run_as is still the boundary.
 */
export function nodeExecutor(config: NodeConfig, env: NodeJS.ProcessEnv, logger: Logger): Executor {
  const mask = secretMasker(nodeSecrets(config, env));
  const executor = maskingExecutor(
    createProcessExecutor({ baseEnv: pickBaseEnv(env) }),
    mask,
    OUTPUT_LIMIT_CHARS,
  );
  const forgot = forgetEnvironment(consumedSecretEnv(config), env);
  if (forgot.removed.length > 0 && !forgot.overwritten)
    logger.warn(
      { variables: forgot.removed, why: forgot.why },
      "removed secrets from the environment, but /proc/<pid>/environ may still show them: use *_FILE or run_as",
    );
  return executor;
}
