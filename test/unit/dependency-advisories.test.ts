/**
 * Dependencies with known advisories are overridden to fixed versions:
 * form-data before 2.5.4 / 3.0.4 / 4.0.4 picks multipart boundaries with Math.random
 * (CVE-2025-7783, critical). matrix-bot-sdk 0.8.0 pulls it in through request@2.88.2.
 */
import { once } from "node:events";
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const rootRequire = createRequire(join(root, "package.json"));
const sdkRequire = createRequire(rootRequire.resolve("matrix-bot-sdk"));
const requestRequire = createRequire(sdkRequire.resolve("request"));

function versionOf(require: NodeJS.Require, name: string): string {
  const pkg = require.resolve(`${name}/package.json`);
  return (JSON.parse(readFileSync(pkg, "utf8")) as { version: string }).version;
}

/** True for the versions CVE-2025-7783 names: < 2.5.4, 3.0.0-3.0.3, 4.0.0-4.0.3. */
function isVulnerableFormData(version: string): boolean {
  const [major = 0, minor = 0, patch = 0] = version.split(".").map(Number);
  if (major < 2) return true;
  if (major === 2) return minor < 5 || (minor === 5 && patch < 4);
  if (major === 3 || major === 4) return minor === 0 && patch < 4;
  return false;
}

describe("dependency advisories", () => {
  it("the vulnerability check itself flags 2.3.3 and passes the fixed lines", () => {
    expect(isVulnerableFormData("2.3.3")).toBe(true);
    expect(isVulnerableFormData("4.0.3")).toBe(true);
    expect(isVulnerableFormData("2.5.4")).toBe(false);
    expect(isVulnerableFormData("4.0.4")).toBe(false);
  });

  it("request (used by matrix-bot-sdk) resolves a fixed form-data", () => {
    const version = versionOf(requestRequire, "form-data");
    expect(isVulnerableFormData(version), `form-data ${version} as request resolves it`).toBe(false);
  });

  it("request still sends multipart bodies with the overridden form-data", async () => {
    const request = requestRequire("request") as (
      options: Record<string, unknown>,
      callback: (err: Error | null, res: { statusCode: number }, body: string) => void,
    ) => void;
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        res.end(
          JSON.stringify({ type: req.headers["content-type"], body: Buffer.concat(chunks).toString() }),
        );
      });
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    try {
      const port = (server.address() as AddressInfo).port;
      const body = await new Promise<string>((done, fail) =>
        request(
          { method: "POST", url: `http://127.0.0.1:${port}/`, formData: { field: "value-42" } },
          (err, _res, text) => (err === null ? done(text) : fail(err)),
        ),
      );
      const echoed = JSON.parse(body) as { type: string; body: string };
      const boundary = /boundary=(\S+)/.exec(echoed.type)?.[1];
      expect(boundary).toBeDefined();
      expect(echoed.body).toContain(`--${boundary}`);
      expect(echoed.body).toContain('name="field"');
      expect(echoed.body).toContain("value-42");
    } finally {
      server.close();
    }
  });
});
