/**
 * The pino logger behind the Logger port: JSON lines, child loggers for {node, room, run, task}, and
 * secrets scrubbed from every line (secret-named keys anywhere in a record, passwords inside URLs,
 * bearer tokens inside strings) so neither a config dump nor an error message can leak them.
 * pino itself is loaded at the first line the level lets through: a command that logs nothing
 * (`dagbot run` at its level warn, when all goes well) never loads its 10 ms of modules
 * (bench/README.md, "`dagbot run` of a one-task DAG").
 */
import { createRequire } from "node:module";
import type { DestinationStream, Logger as PinoLogger, pino as Pino } from "pino";
import type { LogFn, Logger } from "../../ports/logger.js";

const requireHere = createRequire(import.meta.url);

export type LogLevel = "trace" | "debug" | "info" | "warn" | "error" | "fatal" | "silent";

export const LOG_LEVELS: readonly LogLevel[] = ["trace", "debug", "info", "warn", "error", "fatal", "silent"];

export interface LoggerOptions {
  level: LogLevel;
  /** Where lines go; stderr by default so stdout stays free for command output. */
  destination?: DestinationStream | NodeJS.WritableStream;
  /** Fields on every line. */
  base?: Record<string, unknown>;
}

const SECRET_KEY = /(token|password|passwd|secret|authorization|api[_-]?key|cookie)/i;
// user:password@ inside any URL-looking string (postgres://u:p@h/db, https://u:p@h).
const URL_PASSWORD = /([a-z][a-z0-9+.-]*:\/\/[^:/?#@\s]*:)[^@/?#\s]+@/gi;
const BEARER = /(bearer\s+)[A-Za-z0-9._~+/=-]+/gi;
const REDACTED = "[redacted]";

/** Returns a copy of `text` with URL passwords and bearer tokens replaced. */
export function scrubSecrets(text: string): string {
  return text.replace(URL_PASSWORD, `$1${REDACTED}@`).replace(BEARER, `$1${REDACTED}`);
}

/** Deep copy of a log record with secret-named keys and secrets inside strings redacted. */
export function redactRecord(value: unknown, depth = 0): unknown {
  if (typeof value === "string") return scrubSecrets(value);
  if (value === null || typeof value !== "object" || depth > 8) return value;
  if (value instanceof Error) {
    return { type: value.name, message: scrubSecrets(value.message), stack: scrubSecrets(value.stack ?? "") };
  }
  if (Array.isArray(value)) return value.map((v) => redactRecord(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    out[k] = SECRET_KEY.test(k) && v !== null && v !== undefined ? REDACTED : redactRecord(v, depth + 1);
  }
  return out;
}

export function createLogger(options: LoggerOptions): Logger {
  let root: PinoLogger | undefined;
  return lazy(() => (root ??= pinoLogger(options)), RANK[options.level]);
}

/** How severe each level is; a logger lets through the lines at or above its own. */
const RANK: Record<LogLevel, number> = {
  trace: 10,
  debug: 20,
  info: 30,
  warn: 40,
  error: 50,
  fatal: 60,
  silent: Infinity,
};
const METHODS = ["trace", "debug", "info", "warn", "error", "fatal"] as const;
const dropped: LogFn = () => {};

/**
 * A Logger whose pino logger (`made`, with its bindings) is made at its first line let through;
 * lines below `threshold` are dropped here, as pino would drop them.
 */
function lazy(made: () => PinoLogger, threshold: number): Logger {
  let inner: PinoLogger | undefined;
  const get = (): PinoLogger => (inner ??= made());
  const out = {
    // pino applies formatters.bindings to the root only, so child bindings are redacted here.
    child: (bindings: Record<string, unknown>) => {
      const redacted = redactRecord(bindings) as Record<string, unknown>;
      return lazy(() => get().child(redacted), threshold);
    },
  } as Logger;
  for (const m of METHODS)
    out[m] =
      RANK[m] < threshold
        ? dropped
        : (((...args: [Record<string, unknown>, string]) => get()[m](...args)) as LogFn);
  return out;
}

function pinoLogger(options: LoggerOptions): PinoLogger {
  const { pino } = requireHere("pino") as { pino: typeof Pino };
  const destination = options.destination ?? pino.destination({ fd: 2, sync: false });
  return pino(
    {
      level: options.level,
      base: options.base ?? null,
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: {
        level: (label) => ({ level: label }),
        bindings: (bindings) => redactRecord(bindings) as Record<string, unknown>,
        log: (record) => redactRecord(record) as Record<string, unknown>,
      },
      hooks: {
        // Messages are scrubbed too: an error text may quote a URL.
        logMethod(args, method) {
          const scrubbed = args.map((a) => (typeof a === "string" ? scrubSecrets(a) : a));
          method.apply(this, scrubbed as Parameters<typeof method>);
        },
      },
    },
    destination as DestinationStream,
  );
}

/** A logger that drops everything (tests of loops, commands that must print nothing else). */
export function silentLogger(): Logger {
  return createLogger({ level: "silent" });
}
