// An outcome's words exist once, in its renderer: chat and the CLI say the same sentences, chat only
// marking code, adding its emoji and naming commands as typed in the room (docs/architecture.md §5).
import { describe, expect, it } from "vitest";
import type { Outcome, RunSummary } from "../../src/app/commands/outcome.js";
import { plainTextOf, renderOutcome } from "../../src/app/commands/outcome-faces.js";
import { CLI_IDIOM } from "../../src/cli/subcommands/verb-commands.js";

const T0 = Date.UTC(2026, 10, 28, 12, 0, 0);
const run = (over: Partial<RunSummary> = {}): RunSummary => ({
  runId: "8d2f8a7e-0000-4000-8000-000000000001",
  dagId: "deploy",
  status: "failed",
  description: null,
  publisher: "@ann:example.org",
  confirmedBy: null,
  publishEventId: "$publish",
  confirmDeadline: T0 + 3_600_000,
  createdAt: T0,
  updatedAt: T0,
  taskCount: 3,
  hash: "0123456789abcdef0123",
  ...over,
});

/** Chat's body as plain words: no code marks or emoji, commands as the CLI names them, one line. */
const plain = (o: Outcome): string =>
  (renderOutcome(o)?.body ?? "")
    .replace(/`/g, "")
    .replace(/!dag (\w+)/g, "dagbot $1")
    .replace(/^[^\p{L}\p{N}]+ /u, "")
    .replace(/\n/g, " ");

describe("one wording per outcome", () => {
  it.each<[string, Outcome]>([
    ["exists", { kind: "exists", run: run() }],
    ["conflict", { kind: "conflict", dagId: "deploy", existing: run(), suggestion: "deploy-2" }],
    [
      "nothing to retry: succeeded",
      { kind: "nothing-to-retry", run: run({ status: "succeeded" }), why: "succeeded" },
    ],
    [
      "nothing to retry: still running",
      { kind: "nothing-to-retry", run: run({ status: "running" }), why: "not-ended" },
    ],
    [
      "nothing to retry: never confirmed",
      { kind: "nothing-to-retry", run: run({ status: "rejected" }), why: "never-confirmed" },
    ],
  ])("%s: the CLI says chat's sentences", (_name, o) => {
    expect(plainTextOf(o, CLI_IDIOM)).toBe(plain(o));
  });

  it("a library error: chat adds only its usage line", () => {
    const o: Outcome = { kind: "library-error", name: "nightly", message: "no such file" };
    expect(plain(o).startsWith(plainTextOf(o, CLI_IDIOM))).toBe(true);
    expect(plainTextOf(o, CLI_IDIOM)).toBe("Cannot publish nightly from the DAG library: no such file");
  });

  it.each<[string, Outcome, string]>([
    [
      "a publish for confirmation",
      { kind: "published", run: run({ status: "pending" }), needsConfirmation: true, twoPersonRule: true },
      "Published deploy (3 tasks) for confirmation.",
    ],
    [
      "a new run that started",
      {
        kind: "published",
        run: run({ status: "running", dagId: "deploy.2", definition: "deploy", params: { who: "ann" } }),
        needsConfirmation: false,
        twoPersonRule: false,
      },
      "New run of deploy: deploy.2 (3 tasks; who=ann); it started.",
    ],
    [
      "a retry for confirmation",
      {
        kind: "retried",
        from: run(),
        run: run({ status: "pending", dagId: "deploy.retry1" }),
        taskIds: ["a", "b"],
        needsConfirmation: true,
      },
      "Retrying the part of deploy that did not succeed as deploy.retry1: 2 tasks (a, b), for confirmation.",
    ],
  ])(
    "%s: both start with the same sentence; chat points at the card, the CLI says how to confirm",
    (_name, o, head) => {
      expect(plain(o)).toBe(`${head} Its card is in the thread.`);
      const cli = plainTextOf(o, CLI_IDIOM);
      expect(cli.startsWith(head)).toBe(true);
      const awaiting =
        o.kind === "published" ? o.needsConfirmation : o.kind === "retried" && o.needsConfirmation;
      if (awaiting)
        expect(cli).toMatch(
          / It awaits confirmation within 1h00m by .*: dagbot confirm deploy\S* 0123456789ab /,
        );
      else expect(cli).toBe(head);
    },
  );
});
