/**
 * `dagbot crypto setup`: the one-time set-up of a bot account's cross-signing (docs/architecture.md
 * §12). Signs in with an access token (a compatibility token on a homeserver behind MAS) or the
 * account's password, makes the cross-signing keys if the account has none, keeps their private
 * halves in the account's secret storage and writes the recovery key, once, to an owner-only file.
 * The password or token is never an argument; the recovery key is never printed.
 */
import { closeSync, constants, existsSync, openSync, rmSync, writeSync } from "node:fs";
import {
  createCrossSigning,
  CrossSigningError,
  publishedMasterKey,
} from "../adapters/matrix/crypto/cross-signing.js";
import { MatrixRequestError, matrixHttp, type MatrixHttp } from "../adapters/matrix/http.js";
import { resolveConfig, type CommonOptions } from "./config-resolve.js";
import { SetupError } from "./setup-error.js";

export interface CryptoSetupOptions extends CommonOptions {
  /** Where the recovery key is written (must not exist). */
  recoveryKeyFile: string;
  /**
   * The account's password or an access token for it, as the CLI read it (a prompt or a file). A
   * token is tried first; a secret the homeserver does not take as a token is used as the password.
   */
  secret: string;
}

export interface CryptoSetupResult {
  userId: string;
  masterKey: string;
  secretStorageKeyId: string;
  recoveryKeyFile: string;
}

/** A device id for a password sign-in of the set-up; signed out again at the end. */
const SETUP_LOGIN_DEVICE = "DAGBOTSETUP";

export async function runCryptoSetup(options: CryptoSetupOptions): Promise<CryptoSetupResult> {
  const config = resolveConfig(options, {}, { storeOnly: true });
  const matrix = config.matrix;
  if (matrix === null)
    throw new SetupError("the config has no [matrix] section: there is no bot account to set up");
  if (existsSync(options.recoveryKeyFile)) {
    throw new SetupError(
      `${options.recoveryKeyFile} exists; the recovery key is written once, to a new file (nothing was changed)`,
    );
  }
  const session = await signIn(matrix.homeserverUrl, matrix.userId, options.secret);
  try {
    if ((await publishedMasterKey(session.http, matrix.userId)) !== null) {
      throw new SetupError(
        `${matrix.userId} already has cross-signing keys; nothing was changed. Give each node the recovery key ` +
          "written when they were made (matrix.recovery_key_file); replacing the keys would distrust every device they signed.",
        1,
      );
    }
    const created = await createCrossSigning({
      http: session.http,
      userId: matrix.userId,
      uploadSigningKeys: (body) => uploadSigningKeys(session.http, matrix.userId, body, session.password),
      keepRecoveryKey: (key) => writeOnce(options.recoveryKeyFile, `${key}\n`),
      dropRecoveryKey: () => rmSync(options.recoveryKeyFile, { force: true }),
    });
    return { userId: matrix.userId, ...created, recoveryKeyFile: options.recoveryKeyFile };
  } catch (e) {
    if (e instanceof CrossSigningError) throw new SetupError(e.message, 1);
    if (e instanceof MatrixRequestError) throw new SetupError(`the homeserver refused: ${e.message}`, 1);
    throw e;
  } finally {
    await session.close();
  }
}

interface Session {
  http: MatrixHttp;
  /** The password, when the secret was one (for interactive auth); null for a token. */
  password: string | null;
  close(): Promise<void>;
}

/** The secret as an access token of `userId` if the homeserver takes it, else as its password. */
async function signIn(homeserverUrl: string, userId: string, secret: string): Promise<Session> {
  const asToken = matrixHttp(homeserverUrl, secret);
  try {
    const whoami = await asToken.request("GET", "/_matrix/client/v3/account/whoami");
    if (whoami["user_id"] !== userId) {
      throw new SetupError(`the access token belongs to ${String(whoami["user_id"])}, not to ${userId}`);
    }
    return { http: asToken, password: null, close: () => Promise.resolve() };
  } catch (e) {
    if (!(e instanceof MatrixRequestError && e.status === 401)) throw e;
  }
  const anonymous = matrixHttp(homeserverUrl, "");
  let login: Record<string, unknown>;
  try {
    login = await anonymous.request("POST", "/_matrix/client/v3/login", {
      body: {
        type: "m.login.password",
        identifier: { type: "m.id.user", user: userId },
        password: secret,
        device_id: SETUP_LOGIN_DEVICE,
        initial_device_display_name: "dagbot crypto setup",
      },
    });
  } catch (e) {
    if (e instanceof MatrixRequestError && (e.status === 403 || e.status === 400)) {
      throw new SetupError(
        `the homeserver took the secret given neither as an access token of ${userId} nor as its password (${e.message})`,
        1,
      );
    }
    throw e;
  }
  const token = login["access_token"];
  if (typeof token !== "string") throw new SetupError("the homeserver's login answer has no access token", 1);
  const http = matrixHttp(homeserverUrl, token);
  return {
    http,
    password: secret,
    // The set-up's own sign-in goes again, with its device.
    close: async () => {
      await http.request("POST", "/_matrix/client/v3/logout", { body: {} }).catch(() => undefined);
    },
  };
}

/**
 * POST /keys/device_signing/upload. An account's first upload needs no interactive auth (Synapse
 * 1.163, MSC3967); a homeserver that asks anyway gets the password when there is one.
 */
async function uploadSigningKeys(
  http: MatrixHttp,
  userId: string,
  body: Record<string, unknown>,
  password: string | null,
): Promise<void> {
  const path = "/_matrix/client/v3/keys/device_signing/upload";
  try {
    await http.request("POST", path, { body });
    return;
  } catch (e) {
    if (!(e instanceof MatrixRequestError && e.status === 401) || e.errcode !== undefined) throw e;
  }
  if (password === null) {
    throw new SetupError(
      "the homeserver asks for interactive auth to upload the cross-signing keys; run the set-up with the " +
        "account's password (--password-file) instead of a token, or approve the reset in the account's " +
        "settings (MAS) and run it again",
      1,
    );
  }
  // A one-stage m.login.password auth completes without a prior session (the homeserver makes one).
  await http.request("POST", path, {
    body: {
      ...body,
      auth: { type: "m.login.password", identifier: { type: "m.id.user", user: userId }, password },
    },
  });
}

/** Writes `text` to a new owner-only file; refuses one that exists (O_EXCL). */
function writeOnce(path: string, text: string): void {
  const fd = openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
  try {
    writeSync(fd, text);
  } finally {
    closeSync(fd);
  }
}
