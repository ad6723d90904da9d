// Masking the node's secrets in task output: every form, pieces at a tail's edges, byte lengths kept,
// and the executor decorator that applies it to everything an attempt keeps.
import { randomBytes } from "node:crypto";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { maskingExecutor } from "../../src/app/masking-executor.js";
import { MIN_SECRET_CHARS, secretMasker } from "../../src/domain/secret-mask.js";
import type { ExecRequest, ExecResult, OutputSoFar } from "../../src/ports/executor.js";

// Made afresh per run: no token-shaped literal in the repository.
const TOKEN = `syt_${randomBytes(12).toString("hex")}_test`;
const mask = secretMasker([TOKEN, "p@ss wörd/1"]);
const bytes = (s: string): number => Buffer.byteLength(s);

describe("secretMasker", () => {
  it("masks every occurrence, one * per byte, and leaves the rest alone", () => {
    const text = `token=${TOKEN}\nagain ${TOKEN}; done`;
    const masked = mask(text);
    expect(masked).toBe(`token=${"*".repeat(TOKEN.length)}\nagain ${"*".repeat(TOKEN.length)}; done`);
    expect(mask("nothing secret here\n")).toBe("nothing secret here\n");
    expect(bytes(mask("p@ss wörd/1"))).toBe(bytes("p@ss wörd/1"));
    expect(mask("p@ss wörd/1")).toMatch(/^\*+$/);
  });

  it("masks the URL-encoded and JSON-escaped forms", () => {
    expect(mask(`url: ${encodeURIComponent("p@ss wörd/1")}`)).not.toContain("p%40ss");
    expect(mask(JSON.stringify({ password: "p@ss wörd/1" }))).not.toContain("ss w");
  });

  it("masks base64 of a secret wherever it starts in the text", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 7 }), fc.string({ maxLength: 7 }), (before, after) => {
        const plain = `${before}${TOKEN}${after}`;
        for (const encoded of [
          Buffer.from(plain).toString("base64"),
          Buffer.from(plain).toString("base64url"),
        ]) {
          const masked = mask(encoded);
          // What is left cannot be decoded back to more than a few characters of the token.
          const visible = masked.split(/\*+/).filter((part) => part.length > 6);
          for (const part of visible) expect(TOKEN).not.toContain(Buffer.from(part, "base64").toString());
          expect(masked.match(/\*/g)?.length ?? 0).toBeGreaterThanOrEqual(
            Math.floor((TOKEN.length * 4) / 3) - 2,
          );
        }
      }),
    );
  });

  it("masks the end of a secret that starts a tail and the start of one that ends it", () => {
    expect(mask(`${TOKEN.slice(-9)} and then`)).toBe(`${"*".repeat(9)} and then`);
    expect(mask(`first half: ${TOKEN.slice(0, 12)}`)).toBe(`first half: ${"*".repeat(12)}`);
    // Too short a piece to tell from ordinary text.
    expect(mask("e9 end")).toBe("e9 end");
  });

  it("keeps every byte position, whatever the text", () => {
    fc.assert(
      fc.property(fc.string(), fc.string(), fc.nat(TOKEN.length), (a, b, cut) => {
        const text = `${a}${TOKEN.slice(cut)}${b}${TOKEN}${a}${TOKEN.slice(0, cut)}`;
        const masked = mask(text);
        expect(bytes(masked)).toBe(bytes(text));
        expect(masked).not.toContain(TOKEN);
      }),
    );
  });

  it("leaves out secrets too short to tell from ordinary words", () => {
    const short = "x".repeat(MIN_SECRET_CHARS - 1);
    expect(secretMasker([short, ""])(`a ${short} b`)).toBe(`a ${short} b`);
  });
});

describe("maskingExecutor", () => {
  it("masks the output while it runs, the final output and the error", async () => {
    const seen: OutputSoFar[] = [];
    const executor = maskingExecutor(
      {
        run: async (request: ExecRequest): Promise<ExecResult> => {
          request.onOutput?.({ output: `so far ${TOKEN.slice(0, 10)}`, totalBytes: 17 });
          return {
            outcome: "failed",
            exitCode: 1,
            signal: null,
            output: `all: ${TOKEN}\n`,
            outputTruncated: false,
            totalOutputBytes: 6 + TOKEN.length,
            durationMs: 5,
            error: `could not use ${TOKEN}`,
          };
        },
      },
      mask,
    );
    const result = await executor.run({
      action: {
        name: "a",
        argv: ["x"],
        args: {},
        cwd: null,
        env: {},
        timeoutMs: 1000,
        outputLimitBytes: 100,
        killGraceMs: 10,
      },
      args: {},
      env: { DAGBOT_RUN_ID: "r", DAGBOT_TASK_ID: "t", DAGBOT_ATTEMPT: 1 },
      onOutput: (s) => seen.push(s),
    });
    expect(seen).toEqual([{ output: `so far ${"*".repeat(10)}`, totalBytes: 17 }]);
    expect(result.output).toBe(`all: ${"*".repeat(TOKEN.length)}\n`);
    expect(result.error).toBe(`could not use ${"*".repeat(TOKEN.length)}`);
    expect(result.totalOutputBytes).toBe(6 + TOKEN.length);
  });

  it("passes on only the tail anything keeps, masked where it cuts into a secret", async () => {
    const output = `${"x".repeat(50)} ${TOKEN}`;
    const executor = maskingExecutor(
      {
        run: async (request: ExecRequest): Promise<ExecResult> => {
          request.onOutput?.({ output, totalBytes: bytes(output) });
          return {
            outcome: "succeeded",
            exitCode: 0,
            signal: null,
            output,
            outputTruncated: false,
            totalOutputBytes: bytes(output),
            durationMs: 1,
          };
        },
      },
      mask,
      20,
    );
    const seen: OutputSoFar[] = [];
    const result = await executor.run({
      action: {
        name: "a",
        argv: ["x"],
        args: {},
        cwd: null,
        env: {},
        timeoutMs: 1000,
        outputLimitBytes: 100,
        killGraceMs: 10,
      },
      args: {},
      env: { DAGBOT_RUN_ID: "r", DAGBOT_TASK_ID: "t", DAGBOT_ATTEMPT: 1 },
      onOutput: (s) => seen.push(s),
    });
    expect(result.output).toBe("*".repeat(20));
    expect(result.outputTruncated).toBe(true);
    expect(result.totalOutputBytes).toBe(bytes(output));
    expect(seen).toEqual([{ output: "*".repeat(20), totalBytes: bytes(output) }]);
  });
});
