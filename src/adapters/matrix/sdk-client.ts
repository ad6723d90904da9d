/**
 * matrix-bot-sdk's client for a node whose rooms need end-to-end encryption: its sync loop drives
 * the SDK's CryptoClient (the WASM crypto), with our processSync (nothing emitted, the batch stored
 * before the token moves on). Imported only then: the SDK's index loads all of it (express, request,
 * sanitize-html, postgres...), about 46 MB of resident memory that a node in plain rooms does without
 * (plain-sync.ts).
 */
import { LogLevel, LogService, MatrixClient } from "matrix-bot-sdk";
import type { Logger } from "../../ports/logger.js";
import type { RoomCrypto } from "./crypto/room-crypto.js";
import type { SyncStateFile } from "./sync-state-file.js";

/** The SDK's client with our processSync: nothing emitted, the batch stored before the token moves on. */
export class IntakeClient extends MatrixClient {
  constructor(
    homeserverUrl: string,
    accessToken: string,
    storage: SyncStateFile,
    private readonly ingest: (raw: Record<string, unknown>) => Promise<void>,
    private readonly roomCrypto: RoomCrypto,
  ) {
    super(homeserverUrl, accessToken, storage, roomCrypto.cryptoStore);
    this.persistTokenAfterSync = true;
    roomCrypto.attach(this);
  }

  protected override async processSync(raw: unknown): Promise<void> {
    if (raw === null || typeof raw !== "object") return;
    // Keys first (to-device), then the timeline; the crypto store is saved before the token moves.
    await this.roomCrypto.onSync(raw as Record<string, unknown>);
    await this.ingest(raw as Record<string, unknown>);
    await this.roomCrypto.save();
  }
}

/** Routes matrix-bot-sdk's own log lines to ours, warnings and errors only. */
export function routeSdkLogs(logger: Logger): void {
  const sdk = logger.child({ module: "matrix-bot-sdk" });
  const line = (module: string, parts: unknown[]): string =>
    `${module}: ${parts.map((p) => (p instanceof Error ? p.message : typeof p === "string" ? p : JSON.stringify(p))).join(" ")}`;
  LogService.setLogger({
    trace: () => undefined,
    debug: () => undefined,
    info: (module, ...parts) => sdk.debug(line(module, parts)),
    warn: (module, ...parts) => sdk.warn(line(module, parts)),
    // Its HTTP client logs every non-2xx as an error, including the expected 404 for m.direct at start.
    error: (module, ...parts) => {
      const text = line(module, parts);
      if (text.includes("M_NOT_FOUND")) sdk.debug(text);
      else sdk.warn(text);
    },
  });
  LogService.setLevel(LogLevel.WARN);
}
