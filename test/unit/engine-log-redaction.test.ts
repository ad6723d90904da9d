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
});
