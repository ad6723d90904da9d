/** Schedules: the document keys, slot arithmetic with croner, and what a leader fires when slots were missed. */
import { describe, expect, it } from "vitest";
import { parseDag } from "../../src/domain/dag.js";
import { nextSlot, slotIsQuiet, slotRunId, slotsBetween, slotsToFire } from "../../src/domain/schedule.js";

const base = (extra: string) => `id = "nightly"\n${extra}\n[[tasks]]\nid = "a"\naction = "echo"\n`;
const issues = (text: string): string =>
  (() => {
    const r = parseDag(text, "toml");
    return r.ok ? "" : r.issues.map((i) => `${i.path}: ${i.message}`).join("\n");
  })();

describe("schedule in the DAG document", () => {
  it("parses schedule, timezone and missed with their defaults; a DAG without keeps its hash", () => {
    const r = parseDag(
      base('schedule = "0 2 * * *"\ntimezone = "Europe/Paris"\nmissed = "run_once"'),
      "toml",
    );
    expect(r.ok && r.dag.schedule).toEqual({
      cron: "0 2 * * *",
      timezone: "Europe/Paris",
      missed: "run_once",
    });
    const d = parseDag(base('schedule = "* * * * * *"'), "toml");
    expect(d.ok && d.dag.schedule).toEqual({ cron: "* * * * * *", timezone: "UTC", missed: "skip" });
    const plain = parseDag(base(""), "toml");
    expect(plain.ok && "schedule" in plain.dag).toBe(false);
  });

  it("refuses a bad expression, an unknown time zone, a bad policy, keys without a schedule, a required param", () => {
    expect(issues(base('schedule = "61 * * * *"'))).toMatch(/schedule: is not a valid schedule: .*minute/);
    expect(issues(base('schedule = "0 2 * * *"\ntimezone = "Mars/Olympus"'))).toMatch(
      /timezone: .*time zone/i,
    );
    expect(issues(base('schedule = "0 2 * * *"\nmissed = "all"'))).toMatch(/missed/);
    expect(issues(base('timezone = "UTC"'))).toMatch(/timezone: only means something with a schedule/);
    expect(issues(base('schedule = "0 2 * * *"\n[params.day]\npattern = "[0-9]+"'))).toMatch(
      /params\.day: needs a default/,
    );
  });
});

describe("slots", () => {
  const daily = { cron: "0 2 * * *", timezone: "Europe/Paris" };
  const everySecond = { cron: "* * * * * *", timezone: "UTC" };

  it("follows the time zone, including a daylight saving change", () => {
    // 02:00 in Paris is 01:00 UTC in winter and 00:00 UTC in summer.
    expect(new Date(nextSlot(daily, Date.parse("2026-11-26T08:00:00Z"))!).toISOString()).toBe(
      "2026-11-27T01:00:00.000Z",
    );
    expect(new Date(nextSlot(daily, Date.parse("2026-07-01T08:00:00Z"))!).toISOString()).toBe(
      "2026-07-02T00:00:00.000Z",
    );
  });

  it("lists the slots in (after, upTo], keeping the newest when capped", () => {
    const t0 = Date.parse("2026-11-26T08:00:00Z");
    expect(slotsBetween(everySecond, t0, t0 + 3_000, 100)).toEqual([t0 + 1_000, t0 + 2_000, t0 + 3_000]);
    expect(slotsBetween(everySecond, t0, t0 + 500, 100)).toEqual([]);
    expect(slotsBetween(everySecond, t0, t0 + 10_000, 2)).toEqual([t0 + 9_000, t0 + 10_000]);
  });

  it("a long gap still yields the newest slots, the true newest last, after a bounded walk", () => {
    const t0 = Date.parse("2026-11-26T08:00:00Z");
    const day = 86_400_000;
    const due = slotsBetween(everySecond, t0, t0 + day, 100);
    expect(due).toHaveLength(100);
    expect(due.at(-1)).toBe(t0 + day);
    expect(due.at(-2)).toBe(t0 + day - 1_000);
    // Uneven slots (weekdays at 09:00 Berlin) over a year: still the newest one last, at most max.
    const weekdays = { cron: "0 9 * * 1-5", timezone: "Europe/Berlin" };
    const upTo = Date.parse("2027-11-26T12:00:00Z");
    const few = slotsBetween(weekdays, t0, upTo, 20);
    expect(few.length).toBeGreaterThan(1);
    expect(few.length).toBeLessThanOrEqual(20);
    expect(few.at(-1)).toBe(Date.parse("2027-11-26T08:00:00Z"));
    expect(nextSlot(weekdays, few.at(-1)!)).toBeGreaterThan(upTo);
  });

  it("fires one due slot; missed ones: skip fires only a recent newest, run_once one run that covers them all", () => {
    const now = 1_000_000;
    expect(slotsToFire([], "skip", now, 2_000)).toEqual([]);
    expect(slotsToFire([now - 100], "skip", now, 2_000)).toEqual([
      { at: now - 100, covers: 1, firstCovered: now - 100 },
    ]);
    const missed = [now - 3_000, now - 2_000, now - 1_000];
    expect(slotsToFire(missed, "skip", now, 2_000)).toEqual([
      { at: now - 1_000, covers: 1, firstCovered: now - 1_000 },
    ]);
    expect(slotsToFire(missed, "skip", now + 5_000, 2_000)).toEqual([]);
    expect(slotsToFire(missed, "run_once", now + 5_000, 2_000)).toEqual([
      { at: now - 1_000, covers: 3, firstCovered: now - 3_000 },
    ]);
  });

  it("names a slot's run by the definition and the slot's UTC second, within 64 characters", () => {
    expect(slotRunId("nightly", Date.parse("2026-11-26T08:05:07.000Z"))).toBe("nightly.s20261126T080507");
    const long = slotRunId("x".repeat(64), 0);
    expect(long).toHaveLength(64);
    expect(long.endsWith(".s19700101T000000")).toBe(true);
  });
});

describe("which scheduled runs show in chat", () => {
  const at = (iso: string) => Date.parse(iso);
  const one = (iso: string) => ({ at: at(iso), covers: 1, firstCovered: at(iso) });
  const UTC = "UTC";

  it("a schedule firing more often than once a minute shows only its first slot of each minute", () => {
    const everySecond = { cron: "* * * * * *", timezone: UTC };
    expect(slotIsQuiet(everySecond, one("2026-11-26T08:05:00Z"))).toBe(false);
    expect(slotIsQuiet(everySecond, one("2026-11-26T08:05:01Z"))).toBe(true);
    expect(slotIsQuiet(everySecond, one("2026-11-26T08:05:59Z"))).toBe(true);
    const everyTen = { cron: "5/10 * * * * *", timezone: UTC };
    expect(slotIsQuiet(everyTen, one("2026-11-26T08:05:05Z"))).toBe(false);
    expect(slotIsQuiet(everyTen, one("2026-11-26T08:05:15Z"))).toBe(true);
    // Sixty slots in a minute show once: count them.
    const minute = slotsBetween(everySecond, at("2026-11-26T08:04:59Z"), at("2026-11-26T08:05:59Z"), 100);
    expect(minute).toHaveLength(60);
    expect(minute.filter((t) => !slotIsQuiet(everySecond, one(new Date(t).toISOString())))).toEqual([
      at("2026-11-26T08:05:00Z"),
    ]);
  });

  it("a schedule firing once a minute or less often shows every slot; a catch-up always shows", () => {
    expect(slotIsQuiet({ cron: "30 * * * * *", timezone: UTC }, one("2026-11-26T08:05:30Z"))).toBe(false);
    expect(slotIsQuiet({ cron: "*/5 * * * *", timezone: UTC }, one("2026-11-26T08:05:00Z"))).toBe(false);
    expect(slotIsQuiet({ cron: "0 2 * * *", timezone: "Europe/Paris" }, one("2026-11-27T01:00:00Z"))).toBe(
      false,
    );
    const catchUp = { at: at("2026-11-26T08:05:30Z"), covers: 40, firstCovered: at("2026-11-26T08:04:51Z") };
    expect(slotIsQuiet({ cron: "* * * * * *", timezone: UTC }, catchUp)).toBe(false);
  });
});
