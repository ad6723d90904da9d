/**
 * The command table and the inbox step against a real store (run by commands-sqlite.test.ts and
 * commands-postgres.test.ts): every command through the inbox, refusals and errors that store
 * nothing, reactions on cards, and exactly-once handling across a crash between "handled" and
 * "replied". Only the PermissionOracle is a stand-in (it is Matrix's part); the store is real.
 */
import { structuredCommandContent } from "../../src/app/commands/inbox-intent.js";
import { FLEET_PROTOCOL, RELEASE } from "../../src/domain/release.js";
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CommandPolicy, DagLibrary } from "../../src/app/commands/context.js";
import type { InboxDeps } from "../../src/app/commands/inbox-step.js";
import {
  handleInboxEvent,
  inboxStep,
  processNextInboxEvent,
  readOutcome,
} from "../../src/app/commands/inbox-step.js";
import { jsonBytes, MAX_EVENT_CONTENT_BYTES } from "../../src/app/render/html.js";
import { slotDag } from "../../src/app/schedules.js";
import { dagHash } from "../../src/domain/canonical-hash.js";
import { isConflict } from "../../src/ports/errors.js";
import type { PermissionOracle, SenderStanding } from "../../src/ports/permissions.js";
import {
  INBOX_EVENT_TYPE_KEY,
  type LeaderFence,
  type OutboxMessage,
  type Store,
} from "../../src/ports/store.js";
import { becomeLeader, session } from "../support/store-fixtures.js";

export interface Counts {
  runs: number;
  tasks: number;
  outbox: number;
}

export interface CommandsBackend {
  name: string;
  /** A fresh store for the file, with raw row counts of the whole database. */
  open(): Promise<{ store: Store; counts(): Promise<Counts>; close(failed: boolean): Promise<void> }>;
}

const OP = "@op:test"; // power 100
const OP2 = "@op2:test"; // power 50: exactly the level needed
const LOW = "@low:test"; // power 10
const FRIEND = "@friend:test"; // power 0, on the allowlist
const AUTO = "@auto:test"; // power 100, on auto_confirm

const LOCAL = "local:op"; // the CLI's sender (the node's own wiring makes it the local operator)
const HTTP = "http:ci"; // an HTTP token's sender

const POWER: Record<string, number> = {
  [OP]: 100,
  [OP2]: 50,
  [LOW]: 10,
  [FRIEND]: 0,
  [AUTO]: 100,
  [LOCAL]: 100,
  [HTTP]: 100,
};

const policy: CommandPolicy = {
  requiredPowerLevel: 50,
  allowlist: [FRIEND],
  twoPersonRule: true,
  autoConfirm: [AUTO],
  confirmTimeoutMs: 3_600_000,
  nodeStaleAfterMs: 30_000,
};

const oracle: PermissionOracle = {
  standing: async (_roomId, userId): Promise<SenderStanding> => ({
    kind: "room-member",
    powerLevel: POWER[userId] ?? 0,
    allowlisted: policy.allowlist.includes(userId),
    adminLevel: 100,
  }),
};

const HELLO_TOML = 'id = "hello"\n[[tasks]]\nid = "greet"\naction = "echo"\n';
const library: DagLibrary = async (name) => {
  if (name === "explode") throw new Error("EIO: /secret/path/explode.toml");
  return name === "hello"
    ? { ok: true, text: HELLO_TOML, format: "toml" }
    : { ok: false, message: `no file named ${name}.toml or ${name}.json` };
};

/** A chain a → b → c of `action` tasks. */
function chainToml(id: string, action = "echo", extra = ""): string {
  return [
    `id = "${id}"`,
    "[[tasks]]",
    'id = "a"',
    `action = "${action}"`,
    extra,
    "[[tasks]]",
    'id = "b"',
    `action = "${action}"`,
    'needs = ["a"]',
    "[[tasks]]",
    'id = "c"',
    `action = "${action}"`,
    'needs = ["b"]',
  ].join("\n");
}
const publishToml = (toml: string): string => `!dag publish\n\`\`\`toml\n${toml}\n\`\`\``;
const publishJson = (json: unknown): string =>
  `!dag publish\n\`\`\`json\n${JSON.stringify(json, null, 1)}\n\`\`\``;

export function describeCommandSuite(backend: CommandsBackend): void {
  describe(`commands on ${backend.name}`, () => {
    let store: Store;
    let counts: () => Promise<Counts>;
    let close: (failed: boolean) => Promise<void>;
    let failed = false;
    let deps: InboxDeps;
    let clock = 1_700_000_000_000;

    beforeAll(async () => {
      ({ store, counts, close } = await backend.open());
      deps = { store, permissions: oracle, policy, loadDag: library };
    });
    afterAll(async () => {
      await close(failed);
    });

    /** A fresh room led by a fresh leader: tests do not see each other's runs. */
    async function room(): Promise<{ roomId: string; fence: LeaderFence }> {
      const roomId = `!${randomUUID().slice(0, 8)}:test`;
      return { roomId, fence: await becomeLeader(store, roomId) };
    }

    async function say(
      roomId: string,
      sender: string,
      content: Record<string, unknown> | string,
    ): Promise<string> {
      const eventId = `$${randomUUID()}`;
      const body = typeof content === "string" ? { msgtype: "m.text", body: content } : content;
      await store.insertInboxEvent({
        eventId,
        roomId,
        sender,
        originServerTs: ++clock,
        content: body,
        seenBy: "test",
      });
      return eventId;
    }

    async function drain(fence: LeaderFence): Promise<number> {
      let n = 0;
      while ((await processNextInboxEvent(deps, fence)) === "processed") n++;
      return n;
    }

    /**
     * A picture asked for in the main timeline goes into the run's thread (picture.<event id>), and
     * the command's one answer (reply.<event id>) points to it; without a picture, the answer itself.
     */
    async function pictureOrReply(eventId: string): Promise<OutboxMessage | null> {
      const picture = await store.getOutbox(`picture.${eventId}`);
      const answer = await reply(eventId);
      if (picture === null) return answer;
      expect(String(answer?.content["body"])).toMatch(/^🖼️ The picture of `.+` goes into its thread\.$/);
      return picture;
    }

    async function reply(eventId: string): Promise<OutboxMessage | null> {
      return store.getOutbox(`reply.${eventId}`);
    }

    /** Send, handle, and return the reply's plain body. */
    async function ask(
      r: { roomId: string; fence: LeaderFence },
      sender: string,
      body: string,
    ): Promise<string> {
      const eventId = await say(r.roomId, sender, body);
      expect(await drain(r.fence)).toBe(1);
      const m = await reply(eventId);
      if (m === null) throw new Error(`no reply to ${JSON.stringify(body)}`);
      return String(m.content["body"]);
    }

    const track = (fn: () => Promise<void>) => async () => {
      try {
        await fn();
      } catch (e) {
        failed = true;
        throw e;
      }
    };

    it(
      "publish creates a pending run, replies to the command and starts the card in its thread",
      track(async () => {
        const r = await room();
        const eventId = await say(r.roomId, OP, publishToml(chainToml("nightly")));
        expect(await drain(r.fence)).toBe(1);
        const run = await store.getRun(r.roomId, "nightly");
        expect(run).toMatchObject({ status: "pending", publisher: OP, publishEventId: eventId });
        const m = await reply(eventId);
        expect(m?.content["m.relates_to"]).toEqual({ "m.in_reply_to": { event_id: eventId } });
        expect(m?.content["msgtype"]).toBe("m.notice");
        // One line: the card (in the thread) says how to confirm, with the hash.
        expect(String(m?.content["body"])).toBe(
          "📥 Published `nightly` (3 tasks) for confirmation. Its card is in the thread.",
        );
        const card = await store.getOutbox(`card.${run?.runId}`);
        expect(card?.content["m.relates_to"]).toEqual({ rel_type: "m.thread", event_id: eventId });
        expect(card?.content["org.dagbot.fallback_txn"]).toBe(`reply.${eventId}`);
        expect(String(card?.content["body"])).toContain(`\`!dag confirm nightly ${run?.hash.slice(0, 12)}\``);
        // The acknowledgement goes out before the card that points at it.
        expect(m!.seq).toBeLessThan(card!.seq);
        expect(String(card?.content["body"])).toContain("0/3 succeeded · 3 waiting");
        const row = await store.getInboxEvent(eventId);
        expect(row?.status).toBe("replied");
        // The row keeps the outcome the faces render, written with the run in one transaction.
        expect(row?.result).toMatchObject({
          dagbotOutcome: { kind: "published", run: { runId: run?.runId, dagId: "nightly" } },
        });
      }),
    );

    it(
      "!dag run starts a new run of a published DAG as <id>.2, .3; a library DAG published again unchanged after its run ended runs again",
      track(async () => {
        const r = await room();
        expect(await ask(r, OP, "!dag publish hello")).toContain("Published `hello` (1 task");
        // Still pending: publishing it again is "already exists", as before.
        expect(await ask(r, OP, "!dag publish hello")).toMatch(/already exists/);
        expect(await ask(r, OP, "!dag reject hello")).toContain("rejected");
        expect(await ask(r, OP, "!dag publish hello")).toContain("New run of hello: `hello.2` (1 task");
        expect(await ask(r, OP, "!dag run hello")).toContain("New run of hello: `hello.3` (1 task");
        // Naming one of its runs starts another run of the same published DAG.
        expect(await ask(r, OP, "!dag run hello.3")).toContain("New run of hello: `hello.4` (1 task");
        const runs = await Promise.all(
          ["hello", "hello.2", "hello.3", "hello.4"].map((id) => store.getRun(r.roomId, id)),
        );
        expect(runs.map((x) => x?.status)).toEqual(["rejected", "pending", "pending", "pending"]);
        expect(new Set(runs.map((x) => JSON.stringify(x?.dag.tasks))).size).toBe(1);
        expect(await ask(r, OP, "!dag run nosuch")).toMatch(/No run named `nosuch`/);
        // Operators only: a member without the level is refused and nothing is created.
        expect(await ask(r, "@member:test", "!dag run hello")).toMatch(/power level/);
        expect(await store.getRun(r.roomId, "hello.5")).toBeNull();
      }),
    );

    it(
      "!dag approve and !dag deny: judged by the gate's who on the oracle's standing, refused without a change, counted once per person, the form's values checked",
      track(async () => {
        const r = await room();
        const gated = [
          'id = "gated"',
          "[[tasks]]",
          'id = "ok"',
          'approve = { who = "operators", approvers = 2, form = { ticket = "^[A-Z]+-[0-9]+$" } }',
          "[[tasks]]",
          'id = "other"',
          'approve = { who = ["@low:test"] }',
        ].join("\n");
        // AUTO's publish starts at once; the gates have no needs, so the first step opens them.
        expect(await ask(r, AUTO, publishToml(gated))).toContain("`gated`");
        const run = (await store.getRun(r.roomId, "gated"))!;
        expect(run.status).toBe("running");
        expect(await ask(r, OP, "!dag approve gated ok ticket=OPS-1")).toMatch(/not open yet/);
        expect((await store.scheduleStep(r.fence)).opened).toBe(2);
        const status = await ask(r, LOW, "!dag status gated");
        expect(status).toContain("awaits approval by the room's operators");
        // Not allowed: a member below the level, the publisher under the two-person rule.
        expect(await ask(r, LOW, "!dag approve gated ok ticket=OPS-1")).toMatch(
          /only the room's operators may decide on this gate/,
        );
        expect(await ask(r, AUTO, "!dag approve gated ok ticket=OPS-1")).toMatch(/you published this run/);
        expect(await ask(r, OP, "!dag approve gated ok ticket=ops-1")).toMatch(/does not match its pattern/);
        // A form value is the gate's output: no reference, whatever the pattern.
        expect(await ask(r, OP, "!dag approve gated ok ticket={params.p}")).toMatch(
          /field "ticket" holds a \{params\.…\}, \{tasks\.…\} or \{item\} reference/,
        );
        expect(await ask(r, OP, "!dag approve gated nosuch")).toMatch(/has no task named/);
        expect((await store.getTask(run.runId, "ok"))!.gateState!.approvals).toEqual([]);
        expect(await ask(r, OP, "!dag approve gated ok ticket=OPS-1")).toMatch(
          /approved `gated\/ok`; it waits for 1 more/,
        );
        expect(await ask(r, OP, "!dag approve gated ok")).toMatch(/already approved/);
        expect(await ask(r, OP2, "!dag approve gated ok ticket=OPS-2")).toMatch(
          /@op:test approved with ticket=OPS-1/,
        );
        expect(await ask(r, OP2, "!dag approve gated ok")).toMatch(
          /approved `gated\/ok` with ticket=OPS-1: the gate is open, what needs it runs now/,
        );
        const gate = (await store.getTask(run.runId, "ok"))!;
        expect(gate.status).toBe("succeeded");
        expect(gate.outputValues).toEqual({ ticket: "OPS-1" });
        expect(gate.gateState!.approvals.map((a) => [a.by, a.face])).toEqual([
          [OP, "chat"],
          [OP2, "chat"],
        ]);
        // A list names who may decide, whatever their power level; a deny takes its reason.
        expect(await ask(r, OP, "!dag deny gated other")).toMatch(/only @low:test may decide/);
        expect(await ask(r, LOW, "!dag deny gated other not this week")).toMatch(/denied `gated\/other`/);
        const other = (await store.getTask(run.runId, "other"))!;
        expect(other.status).toBe("failed");
        expect(other.error).toBe("denied by @low:test: not this week");
        // !dag status says who decided, from which face and when.
        const shown = await ask(r, LOW, "!dag status gated");
        expect(shown).toMatch(
          /`ok` — .*approved by @op:test \(chat \d\d:\d\d UTC\), @op2:test \(chat \d\d:\d\d UTC\)/,
        );
        expect(shown).toMatch(/`other` — .*denied by @low:test \(chat \d\d:\d\d UTC\): not this week/);
        const events = (await store.readEvents(r.roomId, 0)).filter((e) => e.kind.startsWith("gate."));
        expect(events.map((e) => [e.kind, e.taskId, e.data["by"] ?? null])).toEqual([
          ["gate.opened", "ok", null],
          ["gate.opened", "other", null],
          ["gate.approval", "ok", OP],
          ["gate.approval", "ok", OP2],
          ["gate.approved", "ok", OP2],
          ["gate.denied", "other", LOW],
        ]);
      }),
    );

    it(
      "a run is named by its id or its uuid in every command; replies name it by its id, and another room's uuid is no run here",
      track(async () => {
        const r = await room();
        expect(await ask(r, OP, publishToml(chainToml("named")))).toContain("Published `named`");
        const run = (await store.getRun(r.roomId, "named"))!;
        const uuid = run.runId;
        const status = await ask(r, FRIEND, `!dag status ${uuid}`);
        expect(status).toContain("named");
        expect(status).not.toContain(uuid);
        expect(await ask(r, OP2, `!dag confirm ${uuid.toUpperCase()} ${run.hash.slice(0, 12)}`)).toMatch(
          /confirm.*`named`|`named`.*confirm/i,
        );
        expect((await store.getRun(r.roomId, "named"))?.status).toBe("running");
        expect(await ask(r, OP, `!dag logs ${uuid} a`)).toContain("Output of `a` in `named`");
        expect(await ask(r, FRIEND, `!dag list ${uuid}`)).toContain("`named`");
        expect(await ask(r, OP, `!dag run ${uuid}`)).toContain("New run of named: `named.2`");
        const second = (await store.getRun(r.roomId, "named.2"))!;
        expect(await ask(r, OP, `!dag reject ${second.runId}`)).toContain("`named.2`");
        expect((await store.getRun(r.roomId, "named.2"))?.status).toBe("rejected");
        expect(await ask(r, OP, `!dag cancel ${uuid}`)).toContain("`named`");
        expect((await store.getRun(r.roomId, "named"))?.status).toMatch(/^cancel/);
        // The retry is named after the run, not after the uuid it was asked by.
        expect(await ask(r, OP, `!dag retry ${uuid}`)).toContain("`named.retry1`");
        const other = await room();
        expect(await ask(other, FRIEND, `!dag status ${uuid}`)).toMatch(/No run named/);
        expect(await ask(other, OP, `!dag cancel ${uuid}`)).toMatch(/No run named/);
      }),
    );

    it(
      "!dag run with params: values checked before anything is stored, two-person rule and auto_confirm apply, the card shows the substituted arguments",
      track(async () => {
        const r = await room();
        const nightly = [
          'id = "nightly"',
          "[params.day]",
          'pattern = "[0-9]{4}-[0-9]{2}-[0-9]{2}"',
          'default = "2026-01-01"',
          "[[tasks]]",
          'id = "report"',
          'action = "echo"',
          'args = { message = "day {params.day}" }',
        ].join("\n");
        expect(await ask(r, OP, publishToml(nightly))).toContain("Published `nightly` (1 task");
        const first = (await store.getRun(r.roomId, "nightly"))!;
        expect((await store.listTasks(first.runId))[0]?.args).toEqual({ message: "day 2026-01-01" });
        const before = await counts();
        expect(await ask(r, OP, "!dag run nightly day=tomorrow")).toMatch(
          /parameter "day": "tomorrow" does not match its pattern/,
        );
        expect(await ask(r, OP, "!dag run nightly day=2026-03-01x")).toMatch(/does not match/);
        expect(await ask(r, OP, "!dag run nightly colour=red")).toMatch(
          /unknown parameter "colour" for nightly: it declares day/,
        );
        expect(await ask(r, OP, "!dag run nightly day=2026-03-01 day=2026-03-02")).toMatch(/given twice/);
        expect(await ask(r, LOW, "!dag run nightly day=2026-03-01")).toMatch(/power level/);
        const after = await counts();
        expect({ runs: after.runs, tasks: after.tasks }).toEqual({ runs: before.runs, tasks: before.tasks });

        const started = await ask(r, OP, "!dag run nightly day=2026-03-01");
        expect(started).toContain("New run of nightly: `nightly.2` (1 task");
        expect(started).toContain("day=2026-03-01");
        const second = (await store.getRun(r.roomId, "nightly.2"))!;
        expect(second.status).toBe("pending");
        expect(second.hash).not.toBe(first.hash);
        expect((await store.listTasks(second.runId))[0]?.args).toEqual({ message: "day 2026-03-01" });
        const card = String((await store.getOutbox(`card.${second.runId}`))?.content["body"]);
        expect(card).toContain("day 2026-03-01");
        expect(card).not.toContain("{params.day}");
        expect(card).toContain(second.hash.slice(0, 12));
        // The two-person rule: the one who started it cannot confirm it; another operator can.
        expect(await ask(r, OP, "!dag confirm nightly.2")).toContain("two-person rule");
        expect(await ask(r, OP2, "!dag confirm nightly.2")).toMatch(/confirm/i);
        expect((await store.getRun(r.roomId, "nightly.2"))?.status).toBe("running");
        // auto_confirm covers approved content only: nobody confirmed the published run yet, so a
        // run of it waits for someone allowed to confirm it ...
        expect(await ask(r, AUTO, "!dag run nightly")).toContain("`nightly.3`");
        expect((await store.getRun(r.roomId, "nightly.3"))?.status).toBe("pending");
        // ... and once someone did, starts at once.
        expect(await ask(r, OP2, "!dag confirm nightly")).toMatch(/confirm/i);
        expect(await ask(r, AUTO, "!dag run nightly")).toContain("`nightly.4`");
        expect((await store.getRun(r.roomId, "nightly.4"))?.status).toBe("running");
        expect(await ask(r, FRIEND, "!dag list nightly")).toMatch(/4 runs of `nightly`/);
        expect(await ask(r, FRIEND, "!dag list nosuch")).toMatch(
          /There is no DAG or run `nosuch` in this room/,
        );
      }),
    );

    it(
      "!dag schedules lists scheduled DAGs with their next slot; one awaiting confirmation says it fires once confirmed",
      track(async () => {
        const r = await room();
        expect(await ask(r, FRIEND, "!dag schedules")).toContain("No scheduled DAGs in this room");
        const nightly = [
          'id = "nightly"',
          'schedule = "0 2 * * *"',
          'timezone = "Europe/Paris"',
          'missed = "run_once"',
          "[[tasks]]",
          'id = "a"',
          'action = "echo"',
        ].join("\n");
        expect(await ask(r, OP, publishToml(nightly))).toContain("Published `nightly`");
        const pending = await ask(r, FRIEND, "!dag schedules");
        expect(pending).toContain("`nightly` — `0 2 * * *` Europe/Paris, missed: run_once · next ");
        expect(pending).toContain("(fires once confirmed)");
        expect(pending).toMatch(/next \d{4}-\d{2}-\d{2} 0[01]:00:00 UTC/);
        expect(await ask(r, OP2, "!dag confirm nightly")).toMatch(/confirm/i);
        expect(await ask(r, FRIEND, "!dag schedules")).not.toContain("fires once confirmed");
        expect(await ask(r, OP, publishToml(nightly.replace('"0 2 * * *"', '"0 61 * * *"')))).toMatch(
          /not a valid schedule/,
        );
      }),
    );

    it(
      "!dag schedule pause|resume|delete: operators only; !dag schedules shows the state with who, when and why",
      track(async () => {
        const r = await room();
        const tick = [
          'id = "tick"',
          'schedule = "0 3 * * *"',
          "[[tasks]]",
          'id = "a"',
          'action = "echo"',
        ].join("\n");
        expect(await ask(r, AUTO, publishToml(tick))).toContain("`tick`");
        expect(await ask(r, LOW, "!dag schedule pause tick")).toMatch(/you need power level 50/);
        expect((await store.getDefinition(r.roomId, "tick"))?.scheduleState.state).toBe("active");
        expect(await ask(r, OP, "!dag schedule pause tick disk is full")).toContain(
          "The schedule of `tick` is paused",
        );
        const listed = await ask(r, FRIEND, "!dag schedules");
        expect(listed).toContain(`⏸️ \`tick\``);
        expect(listed).toMatch(/paused by @op:test at \d{4}-\d{2}-\d{2} [\d:]{8} UTC: disk is full/);
        expect(listed).toContain("owner @auto:test");
        expect(await ask(r, OP2, "!dag schedule pause tick")).toContain("was already paused");
        expect(await ask(r, FRIEND, "!dag schedule resume tick")).toContain("is active again");
        expect(await ask(r, FRIEND, "!dag schedules")).toMatch(/⏰ `tick` .* · next /);
        expect(await ask(r, OP, "!dag schedule delete tick")).toContain("is deleted");
        expect(await ask(r, OP, "!dag schedule resume tick")).toContain("cannot be paused or resumed");
        expect(await ask(r, FRIEND, "!dag schedules")).toContain("No scheduled DAGs in this room");
        expect(await ask(r, OP, "!dag schedule pause nosuch")).toContain("`nosuch` has no schedule");
        expect(await ask(r, OP, "!dag schedule stop tick")).toMatch(/expected pause, resume or delete/);
        const events = (await store.readEvents(r.roomId, 0)).filter((e) => e.kind.startsWith("schedule."));
        expect(events.map((e) => [e.kind, e.data["by"]])).toEqual([
          ["schedule.paused", OP],
          ["schedule.resumed", FRIEND],
          ["schedule.deleted", OP],
        ]);
      }),
    );

    it(
      "publish by library name; an unknown name is a clear error",
      track(async () => {
        const r = await room();
        expect(await ask(r, OP, "!dag publish hello")).toContain("Published `hello` (1 task");
        const before = await counts();
        expect(await ask(r, OP, "!dag publish nothere")).toContain(
          "Cannot publish `nothere` from the DAG library: no file named nothere.toml or nothere.json",
        );
        expect(await counts()).toEqual({ ...before, outbox: before.outbox + 1 });
      }),
    );

    it(
      "the same DAG again (even as JSON) is 'already exists'; other content under the id is a conflict; neither stores anything",
      track(async () => {
        const r = await room();
        await ask(r, OP, publishToml(chainToml("dup")));
        const before = await counts();
        const asJson = {
          id: "dup",
          tasks: [
            { id: "a", action: "echo" },
            { action: "echo", id: "b", needs: ["a"] },
            { id: "c", needs: ["b"], action: "echo" },
          ],
        };
        const same = await ask(r, OP2, publishJson(asJson));
        expect(same).toContain("`dup` already exists with the same content: nothing new was stored.");
        expect(same).toContain("`!dag status dup`");
        const other = await ask(r, OP2, publishToml(chainToml("dup", "echo", "priority = 5")));
        expect(other).toContain("`dup` already exists with different content");
        expect(other).toContain("nothing was stored");
        expect(other).toContain("`dup-2`");
        expect(other).toContain("`!dag retry dup`");
        // Two replies and nothing else.
        expect(await counts()).toEqual({ ...before, outbox: before.outbox + 2 });
      }),
    );

    it(
      "a malformed DAG gets every issue with its place and stores nothing",
      track(async () => {
        const r = await room();
        const before = await counts();
        const bad = 'id = "bad"\n[[tasks]]\nid = "a"\naction = "echo"\nneeds = ["ghost"]\ncolour = "red"\n';
        const body = await ask(r, OP, publishToml(bad));
        expect(body).toContain("The DAG in the message (toml) is not valid");
        expect(body).toContain("tasks[0].needs[0]");
        expect(body).toContain("tasks[0].colour");
        expect(body).toContain("nothing was stored");
        const syntax = await ask(r, OP, publishToml('id = "x"\n[[tasks]\n'));
        expect(syntax).toContain("is not valid");
        expect(await counts()).toEqual({ ...before, outbox: before.outbox + 2 });
      }),
    );

    it(
      "actions no live node offers are refused; with no node known the check is skipped",
      track(async () => {
        const r = await room();
        await store.heartbeat({
          session: session("worker-a"),
          labels: [],
          capacity: 2,
          actions: ["echo"],
          roomIds: [r.roomId],
        });
        const before = await counts();
        const body = await ask(r, OP, publishToml(chainToml("nuke", "rm_rf")));
        expect(body).toContain('tasks[0].action: unknown action "rm_rf"');
        expect(await counts()).toEqual({ ...before, outbox: before.outbox + 1 });
        const lonely = await room();
        expect(await ask(lonely, OP, publishToml(chainToml("nuke", "rm_rf")))).toContain("Published `nuke`");
      }),
    );

    it(
      "arguments are checked at publish against the actions the room's nodes registered; nothing is stored",
      track(async () => {
        const r = await room();
        const spec = (pattern: string) => ({
          name: "echo",
          argv: ["…", "{message}"],
          args: { message: { pattern } },
        });
        const beat = (nodeId: string, pattern: string) =>
          store.heartbeat({
            session: session(nodeId),
            labels: [],
            capacity: 2,
            actions: ["echo"],
            roomIds: [r.roomId],
            actionSpecs: { echo: spec(pattern) },
          });
        await beat("args-a", "[a-z ]{1,20}");
        const args = (message: unknown) =>
          publishJson({ id: "argy", tasks: [{ id: "t", action: "echo", args: { message } }] });
        const before = await counts();
        const bad = await ask(r, OP, args("Hello, World!"));
        expect(bad).toContain(
          'tasks[0].args.message: argument "message" does not match its pattern [a-z ]{1,20}',
        );
        const missing = await ask(r, OP, publishJson({ id: "argy", tasks: [{ id: "t", action: "echo" }] }));
        expect(missing).toContain('tasks[0].args.message: argument "message" is missing');
        const option = await ask(r, OP, args("-n"));
        expect(option).toContain('tasks[0].args.message: argument "message" does not match');
        expect(await counts()).toEqual({ ...before, outbox: before.outbox + 3 });
        expect(await store.getRun(r.roomId, "argy")).toBeNull();
        // A second node defines echo more strictly: the value must suit every definition.
        await beat("args-b", "[a-z]{1,20}");
        const split = await ask(r, OP, args("hello world"));
        expect(split).toContain("(as args-b define it)");
        expect(await ask(r, OP, args("hello"))).toContain("Published `argy`");
      }),
    );

    it(
      "operator commands below the power level are refused and store nothing; the allowlist lets a member through",
      track(async () => {
        const r = await room();
        const capBefore = await store.getRoomCap(r.roomId);
        const before = await counts();
        expect(await ask(r, LOW, publishToml(chainToml("nope")))).toBe(
          "⛔ you need power level 50 in this room (or a place on the allowlist) to use publish; you have 10\nUsage: `!dag publish <name> | !dag publish + a ```json or ```toml code block`",
        );
        expect(await ask(r, LOW, "!dag cap 1")).toContain("to use cap; you have 10");
        expect(await ask(r, LOW, "!dag cap lots")).toContain("to use cap; you have 10");
        expect(await store.getRoomCap(r.roomId)).toBe(capBefore);
        expect(await counts()).toEqual({ ...before, outbox: before.outbox + 3 });
        expect(await ask(r, FRIEND, publishToml(chainToml("friendly")))).toContain("Published `friendly`");
      }),
    );

    it(
      "a refused or malformed command keeps only a short prefix of its body; one that acts keeps it whole",
      track(async () => {
        const r = await room();
        const padding = "x".repeat(20_000);
        const thread = { rel_type: "m.thread", event_id: "$root:test" };
        const refused = await say(r.roomId, LOW, {
          msgtype: "m.text",
          body: publishToml(chainToml("big", "echo", `# ${padding}`)),
          format: "org.matrix.custom.html",
          formatted_body: `<pre>${padding}</pre>`,
          "m.relates_to": thread,
          "com.example.extra": padding,
        });
        const malformed = await say(r.roomId, OP, `!dag cap ${padding}`);
        const kept = await say(r.roomId, OP, publishToml(chainToml("kept", "echo", `# ${"y".repeat(500)}`)));
        expect(await drain(r.fence)).toBe(3);

        const refusedRow = await store.getInboxEvent(refused);
        expect(refusedRow?.status).toBe("replied");
        expect(JSON.stringify(refusedRow?.content).length).toBeLessThan(600);
        expect(refusedRow?.content).toEqual({
          msgtype: "m.text",
          body: `${publishToml(chainToml("big", "echo", `# ${padding}`)).slice(0, 200)}…`,
          format: "org.matrix.custom.html",
          "m.relates_to": thread,
        });
        // The reply still went into the command's thread.
        expect((await reply(refused))?.content["m.relates_to"]).toMatchObject(thread);
        expect(String((await store.getInboxEvent(malformed))?.content["body"]).length).toBe(201);
        // A command that took effect is the record of what was asked: kept as received.
        expect(String((await store.getInboxEvent(kept))?.content["body"]).length).toBeGreaterThan(500);
      }),
    );

    it(
      "a room nothing sends messages for (engine-only) answers commands without queueing replies or cards",
      track(async () => {
        const r = await room();
        const quiet: InboxDeps = { ...deps, queueMessages: false };
        const before = await counts();
        const eventId = await say(r.roomId, AUTO, publishToml(chainToml("silent")));
        const statusId = await say(r.roomId, OP, "!dag status silent");
        while ((await processNextInboxEvent(quiet, r.fence)) === "processed");
        const run = await store.getRun(r.roomId, "silent");
        expect(run?.status).toBe("running");
        expect((await store.getInboxEvent(eventId))?.status).toBe("replied");
        expect((await store.getInboxEvent(statusId))?.status).toBe("replied");
        const row = await store.getInboxEvent(statusId);
        expect(row === null ? null : (await readOutcome({ store, policy }, row))?.kind).toBe("status");
        expect(await counts()).toEqual({
          runs: before.runs + 1,
          tasks: before.tasks + 3,
          outbox: before.outbox,
        });
        expect(await store.getOutbox(`card.${run?.runId}`)).toBeNull();
      }),
    );

    it(
      "confirm: the two-person rule stops the publisher, the confirmer is recorded, repeats are answered",
      track(async () => {
        const r = await room();
        await ask(r, OP, publishToml(chainToml("tp")));
        expect(await ask(r, OP, "!dag confirm tp")).toContain("two-person rule");
        expect((await store.getRun(r.roomId, "tp"))?.status).toBe("pending");
        expect(await ask(r, OP2, "!dag confirm tp")).toBe("▶️ @op2:test confirmed `tp`; it started.");
        expect(await store.getRun(r.roomId, "tp")).toMatchObject({ status: "running", confirmedBy: OP2 });
        expect(await ask(r, OP, "!dag confirm tp")).toBe(
          "`tp` is already confirmed by @op2:test; it is running.",
        );
        expect(await ask(r, OP, "!dag reject tp")).toBe(
          "`tp` cannot be rejected: it is running. To stop it, use `!dag cancel tp`.",
        );
        expect(await ask(r, OP, "!dag confirm ghost")).toBe(
          "No run named `ghost` in this room. `!dag list` shows the runs.",
        );
        expect(await ask(r, OP, "!dag confirm Tp")).toContain("Did you mean `tp`?");
      }),
    );

    it(
      "confirm names the content hash it saw: another hash is refused and changes nothing; the card shows what runs",
      track(async () => {
        const r = await room();
        const toml = [
          'id = "seen"',
          "[[tasks]]",
          'id = "t"',
          'action = "echo"',
          // A right-to-left override would reorder what a client shows: the card writes it escaped.
          'args = { message = "hello \u202e olleh" }',
        ].join("\n");
        await ask(r, OP, publishToml(toml));
        const run = (await store.getRun(r.roomId, "seen"))!;
        const card = await store.getOutbox(`card.${run.runId}`);
        const cardBody = String(card?.content["body"]);
        expect(cardBody).toContain(`What runs if confirmed (content hash \`${run.hash.slice(0, 12)}\`):`);
        expect(cardBody).toContain('t: echo message="hello \\u{202e} olleh"');
        expect(cardBody).not.toContain("\u202e");
        expect(card?.content["org.dagbot.card"]).toMatchObject({ hash: run.hash });

        // The hash of other content (the same id can never be given other content: a conflict).
        const other = "0".repeat(12) === run.hash.slice(0, 12) ? "1".repeat(12) : "0".repeat(12);
        const refused = await ask(r, OP2, `!dag confirm seen ${other}`);
        expect(refused).toContain(`⛔ \`seen\` has content hash ${run.hash.slice(0, 12)}, not ${other}`);
        expect(await store.getRun(r.roomId, "seen")).toMatchObject({ status: "pending", confirmedBy: null });
        expect(await ask(r, OP2, "!dag confirm seen abc")).toContain("bad content hash");
        expect(await ask(r, OP2, `!dag confirm seen ${run.hash.slice(0, 8).toUpperCase()}`)).toBe(
          "▶️ @op2:test confirmed `seen`; it started.",
        );
        expect(await store.getRun(r.roomId, "seen")).toMatchObject({ status: "running", confirmedBy: OP2 });
      }),
    );

    it(
      "a publish whose formatted text shows another DAG than its body is refused; an edit is answered, not applied",
      track(async () => {
        const r = await room();
        const shown = chainToml("twofaced");
        const hidden = chainToml("twofaced", "rm_rf");
        const eventId = await say(r.roomId, OP, {
          msgtype: "m.text",
          body: publishToml(hidden),
          format: "org.matrix.custom.html",
          formatted_body: `<p>!dag publish</p><pre><code class="language-toml">${shown}</code></pre>`,
        });
        await drain(r.fence);
        expect(String((await reply(eventId))?.content["body"])).toContain(
          "the message's formatted text shows a different DAG (code block) than its plain text",
        );
        expect(await store.getRun(r.roomId, "twofaced")).toBeNull();
        // The same DAG in both is fine (as clients send a markdown code block).
        const same = await say(r.roomId, OP, {
          msgtype: "m.text",
          body: publishToml(shown),
          format: "org.matrix.custom.html",
          formatted_body: `<p>!dag publish</p>\n<pre><code class="language-toml">${shown}\n</code></pre>\n`,
        });
        await drain(r.fence);
        expect(String((await reply(same))?.content["body"])).toContain("Published `twofaced`");

        const edit = await say(r.roomId, OP, {
          msgtype: "m.text",
          body: `* ${publishToml(hidden)}`,
          "m.new_content": { msgtype: "m.text", body: publishToml(hidden) },
          "m.relates_to": { rel_type: "m.replace", event_id: same },
          [INBOX_EVENT_TYPE_KEY]: "m.room.message",
        });
        await drain(r.fence);
        const answer = await reply(edit);
        expect(String(answer?.content["body"])).toContain("Edits are not applied");
        expect(answer?.content["m.relates_to"]).toEqual({ "m.in_reply_to": { event_id: same } });
        const run = await store.getRun(r.roomId, "twofaced");
        expect(run?.dag.tasks.map((t) => t.action)).toEqual(["echo", "echo", "echo"]);
      }),
    );

    it(
      "auto_confirm publishers skip the confirmation step",
      track(async () => {
        const r = await room();
        const body = await ask(r, AUTO, publishToml(chainToml("fast")));
        expect(body).toBe("📥 Published `fast` (3 tasks); it started. Its card is in the thread.");
        expect((await store.getRun(r.roomId, "fast"))?.status).toBe("running");
      }),
    );

    it(
      "reject and cancel, and their repeats",
      track(async () => {
        const r = await room();
        await ask(r, OP, publishToml(chainToml("r1")));
        expect(await ask(r, OP, "!dag reject r1")).toBe("✋ @op:test rejected `r1`; it will not run.");
        expect((await store.getRun(r.roomId, "r1"))?.status).toBe("rejected");
        expect(await ask(r, OP2, "!dag reject r1")).toBe("`r1` is already rejected.");
        await ask(r, AUTO, publishToml(chainToml("c1")));
        expect(await ask(r, OP, "!dag cancel c1")).toMatch(
          /^(🚫 @op:test canceled `c1`; none|🛑 @op:test canceled `c1`: tasks)/,
        );
        expect(["canceling", "canceled"]).toContain((await store.getRun(r.roomId, "c1"))?.status);
        expect(await ask(r, OP, "!dag cancel c1")).toMatch(/^`c1` is already cancel/);
      }),
    );

    it(
      "status, list, nodes and help answer anyone; unknown commands get the help line; chatter gets nothing",
      track(async () => {
        const r = await room();
        await ask(r, OP, publishToml(chainToml("seen")));
        await store.heartbeat({
          session: session("worker-b"),
          labels: ["gpu"],
          capacity: 4,
          actions: ["echo"],
          roomIds: [r.roomId],
        });
        const status = await ask(r, LOW, "!dag status seen");
        expect(status).toContain("⏳ `seen` — awaiting confirmation");
        expect(status).toContain("`a` — waiting");
        expect(status).toContain("or react ✅ on its status card");
        // A reply is not edited: it says when it was true.
        expect(await ask(r, LOW, "!dag status")).toMatch(
          /^1 active run as of \d\d:\d\d:\d\d UTC:\n⏳ `seen` — awaiting confirmation/,
        );
        expect(await ask(r, LOW, "!dag list")).toContain(
          "`seen` — awaiting confirmation · ▱▱▱▱▱▱▱▱▱▱ 0/3 succeeded · 3 waiting",
        );
        const nodes = await ask(r, LOW, "!dag nodes");
        expect(nodes).toContain("`leader` leads this room");
        expect(nodes).toContain("🟢 `worker-b` · labels `gpu` · 0/4 slots busy · 1 action");
        // Help is a few lines by what people do, each operator's verb marked, saying the sender is
        // not one (it once listed only her verbs, one line each).
        const help = await ask(r, LOW, "!dag help");
        // Its first line is a title: what a preview or a reply's quote shows.
        expect(help.split("\n")).toEqual([
          "dagbot commands",
          "Run DAGs: `publish` 🔒, `run` 🔒, `confirm` 🔒, `reject` 🔒, `cancel` 🔒, `approve`, `deny`, `mark` 🔒, `retry` 🔒",
          "Follow runs: `status`, `list`, `logs` 🔒, `graph`, `nodes`",
          "Schedules and the room: `schedules`, `schedule` 🔒, `triggers`, `cap` 🔒, `policy` 🔒",
          "🔒 needs an operator (power level 50 or a place on the allowlist; you are not one).",
          "`!dag help <command>` explains one, e.g. `!dag help publish`.",
        ]);
        expect(await ask(r, OP, "!dag help")).toContain("you are one)");
        const capHelp = await ask(r, LOW, "!dag help cap");
        expect(capHelp).toContain("`!dag cap <n>`");
        expect(capHelp).toContain(
          "🔒 Operators only here: power level 50 or a place on the allowlist; you are not one.",
        );
        expect(await ask(r, LOW, "!dag help status")).toContain("Anyone in the room may use it.");
        const unknown = await ask(r, LOW, "!dag frobnicate");
        expect(unknown).toBe('⚠️ unknown command "frobnicate"\n`!dag help` lists the commands.');
        // A typo gets the command as meant, to copy, not the verb alone and a line of every verb.
        expect(await ask(r, LOW, "!dag stauts seen")).toBe(
          '⚠️ unknown command "stauts"\nDid you mean `!dag status seen`?',
        );
        expect(await ask(r, LOW, "!dag help stauts")).toBe(
          '⚠️ unknown command "stauts"\nDid you mean `!dag help status`?',
        );
        const chatter = await say(r.roomId, LOW, "good morning");
        expect(await drain(r.fence)).toBe(1);
        expect(await reply(chatter)).toBeNull();
        expect((await store.getInboxEvent(chatter))?.status).toBe("replied");
      }),
    );

    it(
      "logs: the tail of a long hostile output fits one event; an unknown task names the known ones",
      track(async () => {
        const r = await room();
        await ask(r, AUTO, publishToml('id = "noisy"\n[[tasks]]\nid = "spew"\naction = "echo"\n'));
        await store.scheduleStep(r.fence);
        const w = session("worker-c");
        const claimed = await store.claimTask({
          session: w,
          roomIds: [r.roomId],
          labels: [],
          actions: ["echo"],
          leaseMs: 30_000,
        });
        expect(claimed?.task.taskId).toBe("spew");
        const output = `${"<script>&\u0007é ".repeat(8_000)}THE-END`;
        await store.finishTask(claimed!.token, { outcome: "failed", exitCode: 3, output, error: "exit 3" });
        // Logs are for operators by default: a low member is refused the output.
        const refused = await ask(r, LOW, "!dag logs noisy spew");
        expect(refused).toContain("you need power level 50");
        expect(refused).not.toContain("THE-END");
        const eventId = await say(r.roomId, OP2, "!dag logs noisy spew");
        await drain(r.fence);
        const m = await reply(eventId);
        expect(jsonBytes(m?.content)).toBeLessThanOrEqual(MAX_EVENT_CONTENT_BYTES);
        const body = String(m?.content["body"]);
        expect(body).toContain("earlier characters omitted");
        expect(body).toMatch(/THE-END\n```$/);
        expect(String(m?.content["formatted_body"])).not.toContain("<script>");
        expect(String(m?.content["formatted_body"])).toContain("&lt;script&gt;");
        expect(await ask(r, OP2, "!dag logs noisy nope")).toBe(
          "Run `noisy` has no task named `nope`. Its tasks: `spew`.",
        );
      }),
    );

    it(
      "retry: a new run of the failed part under <id>.retry1, needs on succeeded tasks dropped",
      track(async () => {
        const r = await room();
        await ask(r, AUTO, publishToml(chainToml("flaky")));
        const w = session("worker-d");
        const offer = { session: w, roomIds: [r.roomId], labels: [], actions: ["echo"], leaseMs: 30_000 };
        expect(await ask(r, OP, "!dag retry flaky")).toContain(
          "is still running; retry is for a run that ended",
        );
        await store.scheduleStep(r.fence);
        const a = await store.claimTask(offer);
        await store.finishTask(a!.token, { outcome: "succeeded", exitCode: 0, output: "ok", error: null });
        await store.scheduleStep(r.fence);
        const b = await store.claimTask(offer);
        expect(b?.task.taskId).toBe("b");
        await store.finishTask(b!.token, { outcome: "failed", exitCode: 1, output: "boom", error: "exit 1" });
        await store.scheduleStep(r.fence);
        await store.deriveRunOutcomes(r.fence);
        expect((await store.getRun(r.roomId, "flaky"))?.status).toBe("failed");

        const body = await ask(r, OP, "!dag retry flaky");
        // One line pointing to the card in the thread (the answer is in the main timeline now).
        expect(body).toBe(
          "🔁 Retrying the part of `flaky` that did not succeed as `flaky.retry1`: 2 tasks (`b`, `c`), for confirmation. Its card is in the thread.",
        );
        const retry = await store.getRun(r.roomId, "flaky.retry1");
        expect(retry).toMatchObject({ status: "pending", publisher: OP });
        const tasks = await store.listTasks(retry!.runId);
        expect(tasks.map((t) => [t.taskId, t.needs])).toEqual([
          ["b", []],
          ["c", ["b"]],
        ]);
        expect(await store.getOutbox(`card.${retry!.runId}`)).not.toBeNull();
        expect(await ask(r, OP, "!dag retry flaky.retry1")).toContain("is still awaiting confirmation");
        expect(await ask(r, OP, "!dag retry ghost")).toContain("No run named `ghost`");
      }),
    );

    it(
      "retry of a scheduled DAG's slot run or first run: a run of the same definition, no schedule or slot of its own",
      track(async () => {
        const r = await room();
        await ask(r, AUTO, publishToml(`schedule = "0 2 * * *"\n${chainToml("nightly")}`));
        const definition = await store.getDefinition(r.roomId, "nightly");
        expect(definition?.schedule).toMatchObject({ cron: "0 2 * * *" });
        const slotAt = Date.UTC(2030, 0, 2, 2);
        const slotRun = slotDag(definition!, { at: slotAt, covers: 1, firstCovered: slotAt });
        const created = await store.createRun(
          { fence: r.fence },
          {
            roomId: r.roomId,
            dag: slotRun,
            hash: dagHash(slotRun),
            publisher: AUTO,
            publishEventId: null,
            needsConfirmation: false,
            confirmTimeoutMs: 0,
          },
        );
        expect(created.kind).toBe("created");
        // Both runs fail at their first task.
        const w = session("worker-s");
        const offer = { session: w, roomIds: [r.roomId], labels: [], actions: ["echo"], leaseMs: 30_000 };
        await store.scheduleStep(r.fence);
        for (
          let claimed = await store.claimTask(offer);
          claimed !== null;
          claimed = await store.claimTask(offer)
        )
          await store.finishTask(claimed.token, {
            outcome: "failed",
            exitCode: 1,
            output: "",
            error: "exit 1",
          });
        await store.scheduleStep(r.fence);
        await store.deriveRunOutcomes(r.fence);

        expect(await ask(r, OP, `!dag retry ${slotRun.id}`)).toContain(`as \`${slotRun.id}.retry1\``);
        expect(await ask(r, OP, "!dag retry nightly")).toContain("as `nightly.retry1`");
        for (const id of [`${slotRun.id}.retry1`, "nightly.retry1"]) {
          const retry = await store.getRun(r.roomId, id);
          expect(retry?.dag.definition).toBe("nightly");
          expect(retry?.dag.schedule).toBeUndefined();
          expect(retry?.dag.slot).toBeUndefined();
        }
        // The definition keeps its one schedule and its newest slot; the retries are among its runs.
        expect((await store.listScheduledDefinitions(r.roomId)).map((d) => d.dagId)).toEqual(["nightly"]);
        expect((await store.getDefinition(r.roomId, "nightly"))?.lastSlotAt).toBe(slotAt);
        expect((await store.listDefinitionRuns(r.roomId, "nightly")).map((run) => run.dagId).sort()).toEqual(
          ["nightly", "nightly.retry1", slotRun.id, `${slotRun.id}.retry1`].sort(),
        );
        expect(await ask(r, OP, "!dag list nightly")).toContain("4 runs of `nightly`");
      }),
    );

    it(
      "retry refuses a run nobody confirmed (rejected, or canceled while it awaited confirmation)",
      track(async () => {
        const r = await room();
        await ask(r, OP, publishToml(chainToml("dropped")));
        expect(await ask(r, OP2, "!dag reject dropped")).toContain("rejected `dropped`");
        await ask(r, OP, publishToml(chainToml("withdrawn")));
        await ask(r, OP, "!dag cancel withdrawn");
        expect((await store.getRun(r.roomId, "withdrawn"))?.status).toBe("canceled");
        const before = await counts();
        for (const id of ["dropped", "withdrawn"]) {
          const body = await ask(r, OP, `!dag retry ${id}`);
          expect(body).toContain(`⛔ \`${id}\` cannot be retried: nobody confirmed it`);
          expect(await store.getRun(r.roomId, `${id}.retry1`)).toBeNull();
        }
        const after = await counts();
        expect({ runs: after.runs, tasks: after.tasks }).toEqual({ runs: before.runs, tasks: before.tasks });
      }),
    );

    it(
      "cap sets the room's cap through the fence",
      track(async () => {
        const r = await room();
        const previous = await store.getRoomCap(r.roomId);
        expect(await ask(r, OP2, "!dag cap 3")).toContain(`is now 3 (it was ${previous})`);
        expect(await store.getRoomCap(r.roomId)).toBe(3);
      }),
    );

    it(
      "cap is exactly once: its effect and the handled mark commit together; a crash before the reply repeats only the reply",
      track(async () => {
        const r = await room();
        const previous = await store.getRoomCap(r.roomId);
        const eventId = await say(r.roomId, OP2, "!dag cap 4");
        const row = await store.nextInboxEvent(r.fence);
        await handleInboxEvent(deps, r.fence, row!); // ... and the process dies here.
        const handled = await store.getInboxEvent(eventId);
        expect(handled?.status).toBe("handled");
        expect(handled?.result).toEqual({ dagbotOutcome: { kind: "cap", cap: 4, previous } });
        expect(await store.getRoomCap(r.roomId)).toBe(4);
        // A second handling of the same row is refused by the store and changes nothing.
        await store.setRoomCap(r.roomId, 6, { fence: r.fence });
        const again = await store
          .setRoomCap(r.roomId, 4, { fence: r.fence, inboxEventId: eventId, answer: () => ({}) })
          .catch((e: unknown) => e);
        expect(isConflict(again)).toBe(true);
        expect(await store.getRoomCap(r.roomId)).toBe(6);
        // The next pass only replies, from the recorded result.
        expect(await drain(r.fence)).toBe(1);
        expect(String((await reply(eventId))?.content["body"])).toContain(`is now 4 (it was ${previous})`);
        const capEvents = (await store.readEvents(r.roomId, 0)).filter((e) => e.kind === "cap.set");
        expect(capEvents.map((e) => e.data["cap"])).toEqual([4, 6]);
      }),
    );

    it(
      "a row an older release's store handled (its own result, `op`) is answered in this release's words",
      track(async () => {
        // A 0.3.x leader applied the command and kept its store's result on the row; this release
        // answers it (old-results.ts) as it answers the same command it handled itself.
        const r = await room();
        const old = async (body: string, sender: string, result: (id: string) => Record<string, unknown>) => {
          const eventId = await say(r.roomId, sender, body);
          await store.markInboxHandled(r.fence, eventId, result(eventId));
          expect(await drain(r.fence)).toBe(1);
          return String((await reply(eventId))?.content["body"]);
        };
        const publish = publishToml(chainToml("oldrow"));
        await ask(r, OP, publish);
        const run = (await store.getRun(r.roomId, "oldrow"))!;
        const exists = {
          op: "publish",
          kind: "exists",
          runId: run.runId,
          dagId: "oldrow",
          status: "pending",
        };
        expect(await old(publish, OP, () => ({ ...exists, verb: "publish" }))).toBe(
          await ask(r, OP, publish),
        );

        await store.confirmRun({ fence: r.fence }, r.roomId, "oldrow", OP);
        const confirm = { op: "confirm", kind: "done", runId: run.runId, dagId: "oldrow", by: OP };
        expect(await old("!dag confirm oldrow", OP, () => ({ ...confirm, status: "running" }))).toBe(
          "▶️ @op:test confirmed `oldrow`; it started.",
        );
        const already = { ...confirm, kind: "already", status: "running" };
        expect(await old("!dag confirm oldrow", OP, () => already)).toBe(
          await ask(r, OP, "!dag confirm oldrow"),
        );

        const previous = await store.getRoomCap(r.roomId);
        await store.setRoomCap(r.roomId, 5, { fence: r.fence });
        const cap = { op: "cap", kind: "set", cap: 5, previous };
        expect(await old("!dag cap 5", OP, () => cap)).toContain(`is now 5 (it was ${previous})`);
        // A result of no shape this release knows is said to be unreadable, not guessed at.
        expect(await old("!dag cap 6", OP, () => ({ op: "cap", kind: "set", cap: "6" }))).toMatch(
          /the command was handled, but its result cannot be shown/,
        );
      }),
    );

    it(
      "✅ and ❌ on a card awaiting confirmation decide it, with the same permission checks",
      track(async () => {
        const r = await room();
        const publishEvent = await say(r.roomId, OP, publishToml(chainToml("react")));
        await drain(r.fence);
        const run = await store.getRun(r.roomId, "react");
        await store.markOutboxSent(r.fence, `card.${run!.runId}`, "$card-react");
        // As intake stores a reaction: its content and the event's type.
        const react = (sender: string, key: string, target = "$card-react") =>
          say(r.roomId, sender, {
            "m.relates_to": { rel_type: "m.annotation", event_id: target, key },
            [INBOX_EVENT_TYPE_KEY]: "m.reaction",
          });

        const low = await react(LOW, "✅");
        const own = await react(OP, "✅️");
        const stranger = await react(OP2, "✅", "$some-other-event");
        const thumbs = await react(OP2, "👍");
        // A message carrying a reaction's fields is not a reaction, whoever sends it.
        const fake = await say(r.roomId, OP2, {
          msgtype: "m.text",
          body: "!dag help",
          "m.relates_to": { rel_type: "m.annotation", event_id: "$card-react", key: "✅" },
          [INBOX_EVENT_TYPE_KEY]: "m.room.message",
        });
        const camel = await say(r.roomId, OP2, {
          body: "!dag help",
          targetEventId: "$card-react",
          key: "✅",
        });
        expect(await drain(r.fence)).toBe(6);
        expect(String((await reply(low))?.content["body"])).toContain("to use confirm; you have 10");
        expect(String((await reply(own))?.content["body"])).toContain("two-person rule");
        expect(await reply(stranger)).toBeNull();
        expect(await reply(thumbs)).toBeNull();
        expect(await reply(fake)).toBeNull();
        expect(String((await reply(camel))?.content["body"])).toContain("`!dag help <command>` explains one");
        expect((await store.getRun(r.roomId, "react"))?.status).toBe("pending");

        // A ✅ confirms the hash its card showed: a card that showed other content confirms nothing.
        const card = (await store.getOutbox(`card.${run!.runId}`))!;
        expect(card.content["org.dagbot.card"]).toMatchObject({ hash: run!.hash });
        const yes = await react(OP2, "✅");
        await drain(r.fence);
        expect(await store.getRun(r.roomId, "react")).toMatchObject({ status: "running", confirmedBy: OP2 });
        const answer = await reply(yes);
        expect(answer?.content["body"]).toBe("▶️ @op2:test confirmed `react`; it started.");
        // The answer goes to the card, in the publish event's thread.
        expect(answer?.content["m.relates_to"]).toEqual({
          rel_type: "m.thread",
          event_id: publishEvent,
          is_falling_back: false,
          "m.in_reply_to": { event_id: "$card-react" },
        });
        // A second ✅ once it runs is not a decision any more: no reply.
        const again = await react(OP, "✅");
        await drain(r.fence);
        expect(await reply(again)).toBeNull();

        await ask(r, OP, publishToml(chainToml("nah")));
        const nah = await store.getRun(r.roomId, "nah");
        await store.markOutboxSent(r.fence, `card.${nah!.runId}`, "$card-nah");
        const no = await react(OP2, "❌", "$card-nah");
        await drain(r.fence);
        expect((await store.getRun(r.roomId, "nah"))?.status).toBe("rejected");
        // The ❌ ended the run in its thread: its answer is that thread's last word, the run's final
        // message (no second one follows), and says which reaction it answers.
        expect(await reply(no)).toBeNull();
        const final = await store.getOutbox(`final.${nah!.runId}`);
        expect(final?.content["body"]).toBe("✋ @op2:test rejected `nah`; it will not run.");
        expect(final?.content["org.dagbot.answers"]).toBe(no);
      }),
    );

    it(
      "exactly once: a crash between handled and replied repeats only the reply, the same one under the same txnId",
      track(async () => {
        // The same commands in two rooms: one handled normally, one crashing after "handled".
        const normal = await room();
        const crashed = await room();
        const bodies = [publishToml(chainToml("once")), "!dag status once", "!dag confirm once"];
        const normalReplies: string[] = [];
        for (const body of bodies)
          normalReplies.push(await ask(normal, OP2, body.replace("confirm", "status")));

        const before = await counts();
        const crashReplies: string[] = [];
        for (const body of bodies) {
          const sender = body.includes("confirm") ? OP : OP2;
          const eventId = await say(crashed.roomId, sender, body);
          const row = await store.nextInboxEvent(crashed.fence);
          expect(row?.eventId).toBe(eventId);
          await handleInboxEvent(deps, crashed.fence, row!); // ... and the process dies here.
          expect((await store.getInboxEvent(eventId))?.status).toBe("handled");
          expect(await reply(eventId)).toBeNull();
          // The next leader pass picks the handled row up and only replies.
          expect(await drain(crashed.fence)).toBe(1);
          expect(await drain(crashed.fence)).toBe(0);
          const m = await reply(eventId);
          expect(m?.txnId).toBe(`reply.${eventId}`);
          crashReplies.push(String(m?.content["body"]));
        }
        const normalize = (s: string) =>
          s
            .replace(/run `[^`]+`/g, "run `ID`")
            .replace(/as of [0-9:]+ UTC/, "")
            .replace(/expires at [0-9:]+ UTC/, "expires at TIME");
        expect(crashReplies.slice(0, 2).map(normalize)).toEqual(normalReplies.slice(0, 2).map(normalize));
        expect(crashReplies[2]).toBe("▶️ @op:test confirmed `once`; it started.");
        // One run with its 3 tasks; three replies and one card; the confirm happened once.
        expect(await counts()).toEqual({
          runs: before.runs + 1,
          tasks: before.tasks + 3,
          outbox: before.outbox + 4,
        });
        expect(await store.getRun(crashed.roomId, "once")).toMatchObject({
          status: "running",
          confirmedBy: OP,
        });
      }),
    );

    it(
      "a handler's bug answers its command instead of blocking the inbox; readOutcome reads both kinds of result",
      track(async () => {
        const r = await room();
        const boom = await say(r.roomId, OP, "!dag publish explode");
        const after = await say(r.roomId, OP, "!dag publish hello");
        expect(await drain(r.fence)).toBe(2);
        const answer = String((await reply(boom))?.content["body"]);
        expect(answer).toContain("internal error while handling !dag publish");
        expect(answer).not.toContain("/secret/path");
        expect((await store.getInboxEvent(boom))?.status).toBe("replied");
        // The command behind it went through; its result was written by the store, ours by us.
        const published = await readOutcome(deps, (await store.getInboxEvent(after))!);
        expect(published).toMatchObject({
          kind: "published",
          needsConfirmation: true,
          run: { dagId: "hello" },
        });
        expect(await readOutcome(deps, (await store.getInboxEvent(boom))!)).toMatchObject({
          kind: "command-error",
        });
      }),
    );

    it(
      "a deposed leader's step throws ConflictError and handles nothing",
      track(async () => {
        const r = await room();
        const eventId = await say(r.roomId, OP, "!dag list");
        await store.releaseLease(r.fence);
        await becomeLeader(store, r.roomId, "usurper");
        const err = await processNextInboxEvent(deps, r.fence).catch((e: unknown) => e);
        expect(isConflict(err)).toBe(true);
        expect((await store.getInboxEvent(eventId))?.status).toBe("new");
      }),
    );

    it(
      "a command two leaders lost their lease while handling is answered once as dropped, never run; the next one is handled",
      track(async () => {
        const r = await room();
        const poison = await say(r.roomId, AUTO, publishToml(chainToml("poison")));
        const after = await say(r.roomId, OP, "!dag list");
        // Two leaders each started it and lost their lease before finishing (stalled, or killed).
        let fence = r.fence;
        for (const expected of [0, 1]) {
          expect(await store.startInboxHandling(fence, poison)).toEqual({ losses: expected });
          await store.releaseLease(fence);
          fence = await becomeLeader(store, r.roomId, `leader-${expected}`);
        }
        expect(await drain(fence)).toBe(2);
        expect(await store.getRun(r.roomId, "poison")).toBeNull();
        const row = await store.getInboxEvent(poison);
        expect(row).toMatchObject({
          status: "replied",
          result: { dagbotOutcome: { kind: "quarantined", losses: 2 } },
        });
        // Its content is cut like any refused command's.
        expect(String(row?.content["body"]).length).toBeLessThanOrEqual(201);
        expect(String((await reply(poison))?.content["body"])).toMatch(
          /This command was dropped: it took the room's leader down twice/,
        );
        expect((await store.getInboxEvent(after))?.status).toBe("replied");
        expect(String((await reply(after))?.content["body"])).not.toMatch(/dropped/);
      }),
    );

    it(
      "a publish typed on the CLI (a local event id) roots no card thread; a chat publish does",
      track(async () => {
        const r = await room();
        const local = `cli.${randomUUID()}`;
        await store.insertInboxEvent({
          eventId: local,
          roomId: r.roomId,
          sender: AUTO,
          originServerTs: ++clock,
          content: { msgtype: "m.text", body: publishToml(chainToml("from-cli")) },
          seenBy: "cli",
        });
        expect(await drain(r.fence)).toBe(1);
        expect((await store.getRun(r.roomId, "from-cli"))?.publishEventId).toBeNull();
        const chatEvent = await say(r.roomId, AUTO, publishToml(chainToml("from-chat")));
        expect(await drain(r.fence)).toBe(1);
        expect((await store.getRun(r.roomId, "from-chat"))?.publishEventId).toBe(chatEvent);
      }),
    );

    it(
      "!dag nodes shows only the nodes serving this room, not those of other rooms sharing the store",
      track(async () => {
        const r = await room();
        const other = `!${randomUUID().slice(0, 8)}:elsewhere`;
        const beat = (nodeId: string, roomIds: string[]) =>
          store.heartbeat({ session: session(nodeId), labels: [], capacity: 1, actions: ["echo"], roomIds });
        await beat("mine-1", [r.roomId]);
        await beat("shared-2", [other, r.roomId]);
        await beat("theirs-3", [other]);
        const nodes = await ask(r, LOW, "!dag nodes");
        expect(nodes).toContain("`mine-1`");
        expect(nodes).toContain("`shared-2`");
        expect(nodes).not.toContain("theirs-3");
      }),
    );

    it(
      "!dag graph: a member asks for 3 pictures a minute, is refused once with when to ask again, then answered with ⏳ only; the room's 10 hold across members",
      track(async () => {
        const r = await room();
        expect(await ask(r, OP, publishToml(chainToml("pic")))).toContain("Published `pic`");
        const graph = async (sender: string): Promise<OutboxMessage | null> => {
          const eventId = await say(r.roomId, sender, "!dag graph pic");
          expect(await drain(r.fence)).toBe(1);
          expect((await store.getInboxEvent(eventId))?.status).toBe("replied");
          return pictureOrReply(eventId);
        };
        for (let i = 0; i < 3; i++) expect((await graph(LOW))?.eventType).toBe("org.dagbot.picture-request");
        const refusal = await graph(LOW);
        expect(refusal?.eventType).toBe("m.room.message");
        expect(String(refusal?.content["body"])).toMatch(
          /you asked for 3 pictures per 60 s already.*try again in \d+ s/,
        );
        // Told once in words: each ask after it within that time gets a ⏳ on itself, no message.
        for (let i = 0; i < 2; i++) {
          const eventId = await say(r.roomId, LOW, "!dag graph pic");
          expect(await drain(r.fence)).toBe(1);
          expect(await store.getOutbox(`picture.${eventId}`)).toBeNull();
          const answer = await reply(eventId);
          expect(answer?.eventType).toBe("m.reaction");
          expect(answer?.content["m.relates_to"]).toEqual({
            rel_type: "m.annotation",
            event_id: eventId,
            key: "⏳",
          });
        }
        // Others still may, up to the room's 10 in the minute.
        for (let i = 0; i < 7; i++)
          expect((await graph(`@member${i}:test`))?.eventType).toBe("org.dagbot.picture-request");
        const roomFull = await graph(OP);
        expect(String(roomFull?.content["body"])).toContain(
          "this room asked for 10 pictures per 60 s already",
        );
      }),
    );

    it(
      "!dag policy graph operators keeps pictures to operators and the allowlist; graph anyone opens them again",
      track(async () => {
        const r = await room();
        await store.initRoomPolicy(
          r.roomId,
          { powerLevel: 50, allow: [FRIEND], twoPersonRule: false, autoConfirm: [], logs: "operators" },
          "first-node",
        );
        expect(await ask(r, OP, publishToml(chainToml("pic")))).toContain("Published `pic`");
        const graph = async (sender: string): Promise<OutboxMessage | null> => {
          const eventId = await say(r.roomId, sender, "!dag graph pic");
          expect(await drain(r.fence)).toBe(1);
          return pictureOrReply(eventId);
        };
        expect(await ask(r, LOW, "!dag policy")).toContain("you need power level 50");
        expect(await ask(r, OP, "!dag policy")).toContain("graph anyone");
        expect((await graph(LOW))?.eventType).toBe("org.dagbot.picture-request");
        expect(await ask(r, LOW, "!dag policy graph operators")).toContain("you need power level 50");
        expect(await ask(r, OP, "!dag policy graph everyone")).toContain(
          'bad value "everyone" for graph: expected operators or anyone',
        );
        expect(await ask(r, OP, "!dag policy graph operators")).toContain("graph operators");
        expect((await store.getRoomPolicy(r.roomId))?.policy.graph).toBe("operators");
        const refused = await graph(LOW);
        expect(String(refused?.content["body"])).toContain(
          "this room's policy keeps pictures to operators (graph operators): you need power level 50",
        );
        expect((await graph(FRIEND))?.eventType).toBe("org.dagbot.picture-request");
        expect((await graph(OP2))?.eventType).toBe("org.dagbot.picture-request");
        expect(await ask(r, OP, "!dag policy graph anyone")).toContain("graph anyone");
        expect((await graph(LOW))?.eventType).toBe("org.dagbot.picture-request");
      }),
    );

    it(
      "the room's stored policy wins over the leader's config, and only room admins change it with !dag policy",
      track(async () => {
        const r = await room();
        // This leader's config is lax (a node added with a minimal config); the room's policy is not.
        const lax: InboxDeps = {
          ...deps,
          policy: { ...policy, twoPersonRule: false, requiredPowerLevel: 0, allowlist: [] },
        };
        await store.initRoomPolicy(
          r.roomId,
          { powerLevel: 50, allow: [FRIEND], twoPersonRule: true, autoConfirm: [], logs: "operators" },
          "first-node",
        );
        const askLax = async (sender: string, body: string): Promise<string> => {
          const eventId = await say(r.roomId, sender, body);
          while ((await processNextInboxEvent(lax, r.fence)) === "processed");
          return String((await reply(eventId))?.content["body"]);
        };
        expect(await askLax(LOW, publishToml(chainToml("strict")))).toContain("you need power level 50");
        expect(await askLax(OP, publishToml(chainToml("strict")))).toContain("Published `strict`");
        expect(await askLax(OP, "!dag confirm strict")).toContain("two-person rule");
        expect((await store.getRun(r.roomId, "strict"))?.status).toBe("pending");
        expect(await askLax(FRIEND, "!dag policy")).toContain("two_person_rule on");

        expect(await askLax(LOW, "!dag policy two_person_rule off")).toContain("you need power level 50");
        expect((await store.getRoomPolicy(r.roomId))?.policy.twoPersonRule).toBe(true);
        // An operator who does not own the room (power 50; its power levels need 100) changes nothing.
        expect(await askLax(OP2, "!dag policy two_person_rule off")).toContain(
          "changing the room's policy needs power level 100",
        );
        expect((await store.getRoomPolicy(r.roomId))?.policy.twoPersonRule).toBe(true);
        // A room admin proposes; under the two-person rule another admin confirms, not the proposer.
        const proposed = await askLax(OP, "!dag policy two_person_rule off");
        const id = /!dag policy confirm ([0-9a-f]{8})/.exec(proposed)?.[1] ?? "";
        expect(proposed).toContain("needs a second room admin");
        expect((await store.getRoomPolicy(r.roomId))?.policy.twoPersonRule).toBe(true);
        expect(await askLax(OP, `!dag policy confirm ${id}`)).toContain(
          `you proposed policy change ${id}; the two-person rule needs another room admin to confirm it`,
        );
        expect(await askLax(OP2, `!dag policy confirm ${id}`)).toContain("needs power level 100");
        expect((await store.getRoomPolicy(r.roomId))?.policy.twoPersonRule).toBe(true);
        expect(await askLax(AUTO, `!dag policy confirm ${id}`)).toContain(
          `The room's policy is changed by ${AUTO} (proposed by ${OP} as \`${id}\`): two_person_rule on → off.`,
        );
        expect(await store.getRoomPolicy(r.roomId)).toMatchObject({
          setBy: AUTO,
          policy: { twoPersonRule: false },
        });
        expect(await askLax(OP, `!dag policy confirm ${id}`)).toContain(
          `is already applied (confirmed by ${AUTO})`,
        );
        expect(await askLax(OP, "!dag confirm strict")).not.toContain("two-person rule");
        // Without the rule a room admin's change applies at once, and says what it changed.
        expect(await askLax(OP, "!dag policy allow -" + FRIEND)).toContain(
          `The room's policy is changed by ${OP}: allow ${FRIEND} → nobody.`,
        );
        expect(await askLax(FRIEND, "!dag policy")).toContain("you need power level 50");
        expect(await askLax(OP, "!dag policy logs everyone")).toContain(
          'bad value "everyone" for logs: expected operators or anyone',
        );
      }),
    );

    it(
      "a webhook's run awaits confirmation until !dag policy hook_auto_confirm lists it; a webhook may only start runs, and only it names its deliveries",
      track(async () => {
        const r = await room();
        await store.initRoomPolicy(
          r.roomId,
          { powerLevel: 50, allow: [], twoPersonRule: false, autoConfirm: [], logs: "operators" },
          "first-node",
        );
        // The node's wiring: a sender that is not a Matrix user is the deployment's own.
        const wired: InboxDeps = {
          ...deps,
          permissions: {
            standing: async (roomId, sender) =>
              sender.startsWith("@") ? oracle.standing(roomId, sender) : { kind: "local-operator" },
          },
        };
        const hook = "hook:tags";
        const deliver = async (sender: string, data: Record<string, unknown>): Promise<string> => {
          const eventId = await say(r.roomId, sender, { msgtype: "m.text", "dagbot.command": data });
          while ((await processNextInboxEvent(wired, r.fence)) === "processed");
          return String((await reply(eventId))?.content["body"] ?? "");
        };
        expect(await ask(r, OP, publishToml(chainToml("chain")))).toContain("Published `chain`");
        const origin = (delivery: string) => ({ id: "tags", delivery, link: "https://git.example/c/1" });
        await deliver(hook, { verb: "run", id: "chain", params: [], hook: origin("d-1") });
        const first = await store.getRun(r.roomId, "chain.2");
        expect(first).toMatchObject({ status: "pending", publisher: hook });
        expect(first?.dag.hook).toEqual(origin("d-1"));

        expect(await ask(r, LOW, "!dag policy hook_auto_confirm +tags")).toContain("you need power level 50");
        expect(await ask(r, OP, "!dag policy hook_auto_confirm +tags")).toContain(
          "hook_auto_confirm unset → tags",
        );
        expect((await store.getRoomPolicy(r.roomId))?.policy.hookAutoConfirm).toEqual(["tags"]);
        expect(await ask(r, OP, "!dag policy")).toContain("hook_auto_confirm: tags");
        // The policy line covers approved content only: nobody confirmed `chain` yet, so its run waits.
        await deliver(hook, { verb: "run", id: "chain", params: [], hook: origin("d-2") });
        expect((await store.getRun(r.roomId, "chain.3"))?.status).toBe("pending");
        // Nor content someone rejected.
        expect(await ask(r, OP, publishToml(chainToml("refused")))).toContain("Published `refused`");
        expect(await ask(r, OP2, "!dag reject refused")).toMatch(/reject/i);
        await deliver(hook, { verb: "run", id: "refused", params: [], hook: origin("d-2r") });
        expect((await store.getRun(r.roomId, "refused.2"))?.status).toBe("pending");
        // Once someone confirmed it, a delivery starts its run at once.
        expect(await ask(r, OP2, "!dag confirm chain")).toMatch(/confirm/i);
        await deliver(hook, { verb: "run", id: "chain", params: [], hook: origin("d-2c") });
        expect((await store.getRun(r.roomId, "chain.4"))?.status).toBe("running");

        // A delivery's command is no Matrix event (`hook:<id>:<delivery>`): the run it started has no
        // publish message, so its card is its thread's root and the answer goes under the card.
        const deliveryId = "hook:tags:d-9";
        await store.insertInboxEvent({
          eventId: deliveryId,
          roomId: r.roomId,
          sender: hook,
          originServerTs: Date.now(),
          content: {
            msgtype: "m.text",
            "dagbot.command": { verb: "run", id: "chain", params: [], hook: origin("d-9") },
          },
          seenBy: "test",
        });
        while ((await processNextInboxEvent(wired, r.fence)) === "processed");
        const hookRun = (await store.getRun(r.roomId, "chain.5"))!;
        expect(hookRun.publishEventId).toBeNull();
        const hookCard = (await store.getOutbox(`card.${hookRun.runId}`))!;
        const hookAnswer = (await store.getOutbox(`reply.${deliveryId}`))!;
        expect(hookCard.content["m.relates_to"]).toBeUndefined();
        expect(hookAnswer.content["m.relates_to"]).toEqual({ rel_type: "m.thread" });
        expect(hookAnswer.content["org.dagbot.thread_root_txn"]).toBe(`card.${hookRun.runId}`);
        expect(hookAnswer.content["body"]).toBe("📥 New run of chain: `chain.5` (3 tasks); it started.");
        // The card goes first: its event id is the answer's thread root.
        expect(hookCard.seq).toBeLessThan(hookAnswer.seq);
        // Another hook is not covered by this one's line.
        await deliver("hook:other", {
          verb: "run",
          id: "chain",
          params: [],
          hook: { id: "other", delivery: "x" },
        });
        expect((await store.getRun(r.roomId, "chain.6"))?.status).toBe("pending");

        const before = (await store.listRuns(r.roomId, { limit: 100 })).length;
        expect(await deliver(hook, { verb: "cap", n: 0 })).toContain("webhook tags may only start runs");
        expect(await store.getRoomCap(r.roomId)).not.toBe(0);
        expect(await deliver(HTTP, { verb: "run", id: "chain", params: [], hook: origin("d-3") })).toContain(
          "only a webhook's own delivery names its hook",
        );
        expect(
          await deliver("hook:other", { verb: "run", id: "chain", params: [], hook: origin("d-4") }),
        ).toContain("only a webhook's own delivery names its hook");
        expect((await store.listRuns(r.roomId, { limit: 100 })).length).toBe(before);
        expect(await ask(r, OP, "!dag policy hook_auto_confirm -tags")).toContain(
          "hook_auto_confirm tags → nobody",
        );
      }),
    );

    it(
      "a command written by a release of a newer fleet protocol is refused with both releases named; one of the same protocol that this leader cannot parse names them too",
      track(async () => {
        const r = await room();
        const asData = async (content: Record<string, unknown>) => {
          const eventId = await say(r.roomId, LOCAL, content);
          await drain(r.fence);
          return readOutcome(deps, (await store.getInboxEvent(eventId))!);
        };
        const capBefore = await store.getRoomCap(r.roomId);
        const newer = await asData({
          msgtype: "m.text",
          "dagbot.command": { verb: "cap", n: 0 },
          "dagbot.release": { release: "0.9.0", protocol: FLEET_PROTOCOL + 1 },
        });
        expect(newer).toMatchObject({ kind: "command-error" });
        const text = JSON.stringify(newer);
        expect(text).toContain(`dagbot 0.9.0 (fleet protocol ${FLEET_PROTOCOL + 1})`);
        expect(text).toContain(`the leader runs dagbot ${RELEASE} (fleet protocol ${FLEET_PROTOCOL})`);
        expect(text).toContain("nothing was done");
        expect(await store.getRoomCap(r.roomId)).toBe(capBefore);
        // A verb this release lacks, from another release of the same protocol.
        const unknown = await asData({
          msgtype: "m.text",
          "dagbot.command": { verb: "frobnicate" },
          "dagbot.release": { release: "0.2.9", protocol: FLEET_PROTOCOL },
        });
        expect(unknown).toMatchObject({ kind: "command-error" });
        expect(JSON.stringify(unknown)).toContain(
          `the command came from dagbot 0.2.9; the leader runs dagbot ${RELEASE}`,
        );
        // This release's own commands carry its release and are read as before.
        expect(await asData(structuredCommandContent({ verb: "cap", n: 5 }))).toMatchObject({
          kind: "cap",
          cap: 5,
        });
      }),
    );

    it(
      "a command given as data is honoured only from a local or HTTP sender: a room member's event carrying the field is read as the message it is",
      track(async () => {
        const r = await room();
        const asData = async (sender: string, content: Record<string, unknown>) => {
          const eventId = await say(r.roomId, sender, content);
          await drain(r.fence);
          return readOutcome(deps, (await store.getInboxEvent(eventId))!);
        };
        const capBefore = await store.getRoomCap(r.roomId);
        // A room member (even an operator) cannot smuggle a command as data into an event's content.
        const smuggled = await asData(OP, {
          msgtype: "m.text",
          body: "nice weather",
          "dagbot.command": { verb: "cap", n: 0 },
        });
        expect(smuggled).toMatchObject({ kind: "ignored" });
        const typed = await asData(OP, {
          msgtype: "m.text",
          body: "!dag list",
          "dagbot.command": { verb: "cap", n: 0 },
        });
        expect(typed).toMatchObject({ kind: "list" });
        expect(await store.getRoomCap(r.roomId)).toBe(capBefore);

        // The CLI's and HTTP's own senders: the data is the command, whatever the body says.
        expect(
          await asData(LOCAL, { msgtype: "m.text", "dagbot.command": { verb: "cap", n: 7 } }),
        ).toMatchObject({
          kind: "cap",
          cap: 7,
        });
        expect(
          await asData(HTTP, {
            msgtype: "m.text",
            body: "!dag cap 1",
            "dagbot.command": { verb: "cap", n: 3 },
          }),
        ).toMatchObject({ kind: "cap", cap: 3 });
        expect(await store.getRoomCap(r.roomId)).toBe(3);
        // Checked by the rules of typed commands: a bad value or an unknown field changes nothing.
        expect(await asData(LOCAL, { "dagbot.command": { verb: "cap", n: 99_999 } })).toMatchObject({
          kind: "command-error",
        });
        expect(await asData(LOCAL, { "dagbot.command": { verb: "cap", n: 1, sneaky: "x" } })).toMatchObject({
          kind: "command-error",
          message: expect.stringContaining("sneaky"),
        });
        expect(await asData(LOCAL, { "dagbot.command": "!dag cap 0" })).toMatchObject({
          kind: "command-error",
        });
        expect(await store.getRoomCap(r.roomId)).toBe(3);
      }),
    );

    it(
      "a confirmation by another hash is its own answer, naming the run's hash; nothing starts",
      track(async () => {
        const r = await room();
        await ask(r, OP, publishToml(chainToml("mismatch")));
        const run = (await store.getRun(r.roomId, "mismatch"))!;
        const other = run.hash.startsWith("0") ? "1".repeat(12) : "0".repeat(12);
        const eventId = await say(r.roomId, LOCAL, {
          "dagbot.command": { verb: "confirm", id: "mismatch", hash: other },
        });
        await drain(r.fence);
        const outcome = await readOutcome(deps, (await store.getInboxEvent(eventId))!);
        expect(outcome).toMatchObject({ kind: "hash-mismatch", given: other, run: { hash: run.hash } });
        expect(await store.getRun(r.roomId, "mismatch")).toMatchObject({ status: "pending" });
      }),
    );

    it(
      "a parameter value the action refuses (a leading dash) is reported against the parameter, not the DAG",
      track(async () => {
        const r = await room();
        await store.heartbeat({
          session: session("dash-node"),
          labels: [],
          capacity: 1,
          actions: ["echo"],
          roomIds: [r.roomId],
          actionSpecs: {
            echo: { name: "echo", argv: ["echo", "{message}"], args: { message: { pattern: ".{0,40}" } } },
          },
        });
        const dag = {
          id: "dashy",
          params: { tag: { pattern: ".{1,20}", default: "ok" } },
          tasks: [{ id: "t", action: "echo", args: { message: "{params.tag}" } }],
        };
        await ask(r, OP, publishJson(dag));
        const eventId = await say(r.roomId, LOCAL, {
          "dagbot.command": { verb: "run", id: "dashy", params: [["tag", "-rf"]] },
        });
        await drain(r.fence);
        const outcome = await readOutcome(deps, (await store.getInboxEvent(eventId))!);
        expect(outcome).toMatchObject({ kind: "command-error" });
        const message = outcome?.kind === "command-error" ? outcome.message : "";
        expect(message).toMatch(/^parameter "tag" \(value "-rf"\): .*starts with "-"/);
        expect(message).not.toContain("tasks[0]");
        expect(await store.getRun(r.roomId, "dashy.2")).toBeNull();
      }),
    );

    it(
      "the leader loop's inbox step moves every waiting row and reports the count",
      track(async () => {
        const r = await room();
        for (const body of ["!dag list", "!dag nodes", "hello"]) await say(r.roomId, LOW, body);
        const step = inboxStep(deps);
        expect(await step(r.fence, new AbortController().signal)).toBe(3);
        expect(await step(r.fence, new AbortController().signal)).toBe(0);
      }),
    );
  });
}
