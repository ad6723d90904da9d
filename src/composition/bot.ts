/**
 * What `dagbot start` runs (start.ts registers it, and imports this only then): a node that is also
 * a Matrix bot. The composition root of a chat node: the engine node (lease keeper, leader loop with
 * the command table, worker), Matrix intake feeding the inbox, and, while leading a room, the outbox
 * sender and status cards. The only place besides cli.ts that reads env and signals for it. The
 * first SIGINT/SIGTERM stops gracefully, a second one kills running actions.
 */
import { createHash } from "node:crypto";
import { homedir } from "node:os";
import { join, resolve } from "node:path";
import { systemClock } from "../adapters/clock/system-clock.js";
import { createPictureRenderer } from "./pictures.js";
import { matrixHttp } from "../adapters/matrix/http.js";
import { MatrixMediaUploader } from "../adapters/matrix/media.js";
import { IntakeConfigError, MatrixIntake } from "../adapters/matrix/intake.js";
import { MatrixOutboxTransport } from "../adapters/matrix/outbox-transport.js";
import { PowerLevelOracle } from "../adapters/matrix/power-levels.js";
import { MatrixSender } from "../adapters/matrix/sender.js";
import { cryptoStateDir } from "../adapters/matrix/crypto/state-dir.js";
import { createChatLoops } from "../app/chat-loops.js";
import { createPictureMaker } from "../app/pictures.js";
import { inboxStep } from "../app/commands/inbox-step.js";
import { startEngineNode } from "../app/node.js";
import { describeStoreLocation } from "../config/store-location.js";
import type { PermissionOracle } from "../ports/permissions.js";
import { commandPolicy, isLocalSender, libraryLoader } from "./command-step.js";
import { SetupError } from "./setup-error.js";
import { scheduleAuthority } from "../app/schedule-authority.js";
import { engineSettings, makeLogger, nodeExecutor } from "./engine-settings.js";
import { openNodeStore } from "./store-open.js";
import { ownNodeId } from "./node-identity.js";
import { resolveConfig } from "./config-resolve.js";
import type { CommonOptions } from "./config-resolve.js";
import { engineMetricsRelay, startNodeHttpApi } from "./http-api.js";
import { STOP_MESSAGES, onStopSignals } from "./stop-signals.js";
import { cryptoCheck } from "./crypto-check.js";

export interface StartOptions extends CommonOptions {
  nodeId?: string;
  stateDir?: string;
}

/** The sync position file: per node and account, so a changed account never resumes another's position. */
export function syncStateFile(stateDir: string, nodeId: string, userId: string): string {
  return join(stateDir, `sync-${nodeId}-${accountHash(userId)}.json`);
}

const accountHash = (userId: string): string =>
  createHash("sha256").update(userId).digest("hex").slice(0, 12);

function defaultStateDir(env: NodeJS.ProcessEnv): string {
  const base = env["XDG_STATE_HOME"] ?? join(homedir(), ".local", "state");
  return join(base, "dagbot");
}

export async function runStart(options: StartOptions): Promise<number> {
  const config = resolveConfig(options, options.nodeId === undefined ? {} : { nodeId: options.nodeId });
  const matrix = config.matrix;
  if (matrix === null) {
    throw new SetupError("the config has no [matrix] section; `dagbot node` runs a node without chat");
  }
  const logger = makeLogger(config);
  // Like `dagbot node`: a store not reachable yet is retried with backoff (each attempt logged),
  // and a signal during that wait ends it (exit 0) instead of being lost.
  let earlySignal!: () => void;
  const firstSignal = new Promise<void>((resolve) => (earlySignal = resolve));
  const stopListening = onStopSignals(() => earlySignal());
  const store = await openNodeStore(config, logger, firstSignal).finally(stopListening);
  if (store === null) return 0;
  const bootId = await ownNodeId(config, store, logger);
  if (bootId === null) {
    await store.close();
    return 2;
  }
  const stateDir = resolve(
    options.stateDir ?? process.env["DAGBOT_STATE_DIR"] ?? defaultStateDir(process.env),
  );
  logger.info(
    { store: describeStoreLocation(config.store), node: config.nodeId, user: matrix.userId, stateDir },
    "store open",
  );

  const shutdown = new AbortController();
  const http = matrixHttp(matrix.homeserverUrl, matrix.accessToken);
  const sender = new MatrixSender({
    homeserverUrl: matrix.homeserverUrl,
    accessToken: matrix.accessToken,
    signal: shutdown.signal,
    onRetry: (e) => logger.warn({ ...e }, "send retried"),
    // Encrypted rooms get encrypted events (the intake holds this device's crypto).
    ...(matrix.encryption
      ? {
          encrypt: (roomId: string, type: string, content: Record<string, unknown>) =>
            intake === null ? Promise.resolve({ type, content }) : intake.encryptFor(roomId, type, content),
        }
      : {}),
  });
  const oracle = new PowerLevelOracle({ http, allowlist: config.permissions.allow });
  const permissions: PermissionOracle = {
    // Commands typed on this machine's CLI come with the store's credentials, not a Matrix account.
    standing: (roomId, userId) =>
      isLocalSender(userId) ? Promise.resolve({ kind: "local-operator" }) : oracle.standing(roomId, userId),
  };

  // `!dag graph`: drawn in a worker thread (started on first use), uploaded to the media repository.
  const renderer = createPictureRenderer();
  const uploader = new MatrixMediaUploader({
    homeserverUrl: matrix.homeserverUrl,
    accessToken: matrix.accessToken,
    signal: shutdown.signal,
  });
  let intake: MatrixIntake | null = null;
  const fleet = new Set([matrix.userId, ...matrix.fleet]);
  const relay = engineMetricsRelay();
  const chat = createChatLoops({
    store,
    observer: relay.observer,
    transport: new MatrixOutboxTransport(sender, http, fleet, (roomId, ev) =>
      intake?.crypto ? intake.crypto.decrypt(roomId, ev) : Promise.resolve(null),
    ),
    clock: systemClock,
    logger,
    // With encryption on, an encrypted room is served like any other.
    isEncrypted: (roomId) => !matrix.encryption && (intake?.isEncrypted(roomId) ?? false),
    cards: { nodeLiveWithinMs: config.retention.nodeGoneAfterMs },
    members: (roomId, level) => oracle.membersAtLevel(roomId, level),
    bots: fleet,
    pictures: createPictureMaker({
      store,
      nodeLiveWithinMs: config.retention.nodeGoneAfterMs,
      renderer,
      uploader,
      ...(matrix.encryption
        ? {
            mediaCrypto: {
              isEncrypted: async (roomId: string) => {
                const crypto = await intake?.cryptoFor(roomId);
                return crypto ? crypto.isRoomEncrypted(roomId) : false;
              },
              encrypt: (data: Uint8Array) => {
                const crypto = intake?.crypto;
                if (!crypto) return Promise.reject(new Error("encryption is not ready yet"));
                return crypto.encryptMedia(data);
              },
            },
          }
        : {}),
    }),
  });
  const intakeFailed = (err: unknown): void => {
    if (stopping !== null) return;
    const why = err instanceof IntakeConfigError ? err.message : `matrix intake failed: ${String(err)}`;
    logger.fatal({ err: String(err) }, "cannot read the Matrix rooms");
    process.stderr.write(`dagbot start: ${why}\n`);
    exitCode = err instanceof IntakeConfigError ? 2 : 1;
    process.kill(process.pid, "SIGTERM");
  };
  intake = new MatrixIntake({
    homeserverUrl: matrix.homeserverUrl,
    accessToken: matrix.accessToken,
    userId: matrix.userId,
    rooms: matrix.rooms,
    commandWindowMs: matrix.commandWindowMs,
    decryptGraceMs: matrix.decryptGraceMs,
    fleet: matrix.fleet,
    stateFile: syncStateFile(stateDir, config.nodeId, matrix.userId),
    nodeId: config.nodeId,
    inbox: store,
    logger,
    onPowerLevelsChanged: (roomId) => oracle.invalidate(roomId),
    onEncrypted: (roomId) => chat.roomEncrypted(roomId),
    onFailed: intakeFailed,
    ...(matrix.encryption
      ? {
          cryptoDir: (deviceId: string) =>
            cryptoStateDir(stateDir, config.nodeId, accountHash(matrix.userId), deviceId),
          recoveryKey: matrix.recoveryKey,
        }
      : {}),
  });

  const node = startEngineNode(engineSettings(config), {
    store,
    bootId,
    executor: nodeExecutor(config, process.env, logger),
    clock: systemClock,
    logger,
    processInbox: inboxStep({
      store,
      permissions,
      policy: commandPolicy(config),
      loadDag: libraryLoader(config.dagLibrary),
      logger,
    }),
    onLeadership: (roomId, fence) => chat.onLeadership(roomId, fence),
    // Schedules run on the authority of their owner, judged as their commands are.
    scheduleAuthority: scheduleAuthority({
      store,
      permissions,
      policy: commandPolicy(config),
      queueMessages: true,
    }),
    crypto: () => ({
      undecryptable: intake?.undecryptable ?? 0,
      undecryptableReason: intake?.lastUndecryptable?.reason ?? null,
      deviceSigned: intake?.crypto?.signing?.signed ?? null,
    }),
    observer: relay.observer,
  });

  let exitCode = 0;
  let stopping: Promise<void> | null = null;
  let api: Awaited<ReturnType<typeof startNodeHttpApi>> = null;
  const stop = (abortRunning: boolean): Promise<void> => {
    if (stopping !== null) {
      if (abortRunning) void node.stop({ abortRunning: true });
      return stopping;
    }
    stopping = (async () => {
      // Chat first: no send may be in flight when the lease is handed over, or the next leader
      // could post the same message again from its own device.
      shutdown.abort();
      await api?.close().catch(() => {});
      await chat.stop();
      await renderer.close();
      await node.stop({ abortRunning, graceMs: config.stopGraceMs });
      intake?.stop();
      await store.close();
    })();
    return stopping;
  };
  const stopped = new Promise<void>((resolveStopped) => {
    onStopSignals((stage, signal) => {
      logger.info({ signal }, STOP_MESSAGES[stage]);
      void stop(stage === "hard").then(resolveStopped);
    });
  });

  // Last line of defence: every loop awaits and catches its own work, so this should never fire; if
  // it does, the node keeps serving (its state is in the store, every write fenced) and says so.
  process.on("unhandledRejection", (reason) => {
    logger.error({ err: String(reason) }, "unhandled rejection; the node keeps running");
  });

  try {
    api = await startNodeHttpApi(config, store, node, logger, async () => {
      const checks: Record<string, string> = {};
      try {
        const res = await fetch(new URL("/_matrix/client/versions", matrix.homeserverUrl), {
          signal: AbortSignal.timeout(3000),
        });
        checks["homeserver"] = res.ok ? "ok" : `the homeserver answered ${res.status}`;
      } catch (err) {
        checks["homeserver"] = `the homeserver cannot be reached: ${String(err).slice(0, 120)}`;
      }
      if (matrix.encryption && intake !== null) checks["crypto"] = cryptoCheck(intake, Date.now());
      return checks;
    });
    relay.attach(api);
  } catch (err) {
    logger.fatal({ listen: config.http?.listen, err: String(err) }, "the HTTP API cannot listen; stopping");
    process.stderr.write(
      `dagbot start: the HTTP API cannot listen on ${config.http?.listen}: ${String(err)}\n`,
    );
    exitCode = 1;
    process.kill(process.pid, "SIGTERM");
  }

  void intake.start().catch(intakeFailed);

  await stopped;
  logger.info("stopped");
  // matrix-bot-sdk's long-poll (up to 30 s) cannot be aborted; everything else has stopped.
  setTimeout(() => process.exit(exitCode), 50).unref();
  return exitCode;
}
