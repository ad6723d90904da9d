/**
 * The logger the app layer writes to: a pino-shaped subset, so src/app never imports pino. Child
 * loggers carry scope ({node, room, run, task}); messages are short facts. Types only.
 */

export interface LogFn {
  (msg: string): void;
  (fields: Record<string, unknown>, msg: string): void;
}

export interface Logger {
  trace: LogFn;
  debug: LogFn;
  info: LogFn;
  warn: LogFn;
  error: LogFn;
  fatal: LogFn;
  /** A logger whose every line carries `bindings` (e.g. { room, run, task }). */
  child(bindings: Record<string, unknown>): Logger;
}
