import { spawnSync } from "node:child_process";
import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { createLogger, scrubSecrets } from "../../src/adapters/log/pino-logger.js";

function capture(): { stream: Writable; lines: () => Record<string, unknown>[] } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      chunks.push(chunk.toString("utf8"));
      cb();
    },
  });
  return {
    stream,
    lines: () =>
      chunks
        .join("")
        .split("\n")
        .filter((l) => l !== "")
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

describe("pino logger", () => {
  it("carries child scope and redacts secrets in fields, bindings and messages", () => {
    const out = capture();
    const log = createLogger({ level: "debug", destination: out.stream }).child({
      node: "n1",
      accessToken: "syt_x",
    });
    log
      .child({ room: "local", run: "r1", task: "t1" })
      .info(
        { store: "postgres://dagbot:hunter2@db:5432/app", cfg: { matrix: { access_token: "syt_secret" } } },
        "connecting to postgres://dagbot:hunter2@db/app with Bearer abc.def",
      );
    const [line] = out.lines();
    const text = JSON.stringify(line);
    expect(text).not.toContain("hunter2");
    expect(text).not.toContain("syt_secret");
    expect(text).not.toContain("syt_x");
    expect(text).not.toContain("abc.def");
    expect(line).toMatchObject({ node: "n1", room: "local", run: "r1", task: "t1", level: "info" });
    expect(line?.store).toBe("postgres://dagbot:[redacted]@db:5432/app");
  });

  it("keeps URLs without a password and levels below the threshold out", () => {
    const out = capture();
    const log = createLogger({ level: "info", destination: out.stream });
    log.debug("hidden");
    log.info({ store: "postgres://postgres@127.0.0.1:5432/test" }, "shown");
    expect(out.lines()).toHaveLength(1);
    expect(out.lines()[0]?.store).toBe("postgres://postgres@127.0.0.1:5432/test");
    expect(scrubSecrets("sqlite:./data/dagbot.db")).toBe("sqlite:./data/dagbot.db");
  });

  it("loads pino only at the first line its level lets through, and then writes it", () => {
    // A process of its own: pino must not be loaded already, as it is in a test worker.
    const script = `
      import { createRequire } from "node:module";
      const { createLogger } = await import(process.argv[1]);
      const loaded = () => Object.keys(createRequire(import.meta.url).cache).some((k) => /[\\/]pino[\\/]/.test(k));
      const log = createLogger({ level: "warn" }).child({ node: "n1" });
      log.info("not shown"); log.debug({ a: 1 }, "not shown"); log.child({ run: "r1" }).info("not shown");
      const before = loaded();
      log.child({ run: "r1" }).warn({ store: "postgres://u:hunter2@h/db" }, "shown");
      console.log(JSON.stringify({ before, after: loaded() }));
    `;
    const module = new URL("../../dist/adapters/log/pino-logger.js", import.meta.url).href;
    const child = spawnSync(process.execPath, ["--input-type=module", "-e", script, module], {
      encoding: "utf8",
    });
    expect(child.status, child.stderr).toBe(0);
    expect(JSON.parse(child.stdout)).toEqual({ before: false, after: true });
    const lines = child.stderr.trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({
      level: "warn",
      node: "n1",
      run: "r1",
      msg: "shown",
      store: "postgres://u:[redacted]@h/db",
    });
  });

  it("writes each line through its child's lazily made logger, with the bindings it was given then", () => {
    const out = capture();
    const bindings: Record<string, unknown> = { node: "n1", token: "syt_x" };
    const log = createLogger({ level: "info", destination: out.stream }).child(bindings);
    bindings["node"] = "changed later";
    log.debug("hidden");
    log.child({ run: "r1" }).warn("first");
    log.info("second");
    expect(out.lines().map((l) => [l["msg"], l["node"], l["run"], l["token"]])).toEqual([
      ["first", "n1", "r1", "[redacted]"],
      ["second", "n1", undefined, "[redacted]"],
    ]);
  });
});
