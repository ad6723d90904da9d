/**
 * A seeded generator of hostile chat events for the fuzz pass: mutated example DAGs (wrong types,
 * missing and unknown keys, duplicates, cycles, unknown needs and actions, bad durations, limits
 * exceeded, broken JSON/TOML text), malformed `!dag` commands, random code units (lone surrogates,
 * NUL, bidi controls), huge messages, event contents of the wrong shape, reactions and HTML bodies.
 * Each event says whether it must be answered: a plain string body that begins with `!dag` and a
 * space is a command, right or wrong, and a command always gets a reply.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parse as parseToml, stringify as stringifyToml } from "smol-toml";
import { COMMAND_VERBS } from "../../src/app/commands/verbs/index.js";
import type { Dice } from "./chaos-settings.js";

export interface FuzzEvent {
  category: string;
  sender: string;
  content: Record<string, unknown>;
  /** The generator knows this is a `!dag` command in a plain body: it must get exactly one reply. */
  mustReply: boolean;
}

export const FUZZ_ADMIN = "@fuzz-admin:example.org";
export const FUZZ_MEMBER = "@fuzz-member:example.org";
export const FUZZ_LOCAL = "local:fuzz";

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Doc = { [key: string]: Json };

/** The example DAGs (config/examples), parsed: the seeds every DAG mutation starts from. */
export function loadExampleDags(folder: string): Doc[] {
  return readdirSync(folder)
    .filter((f) => /\.(json|toml)$/.test(f))
    .sort()
    .map((f) => {
      const text = readFileSync(join(folder, f), "utf8");
      return (f.endsWith(".json") ? JSON.parse(text) : parseToml(text)) as Doc;
    });
}

const HOSTILE = [
  "\u0000",
  "\u202e\u2066evil\u2069",
  "\u200b\u200d\ufeff",
  "\ud800",
  "\udfff\ud800",
  "🙂🧨",
  "\r\n\r\n",
  "<script>alert(1)</script>",
  "<img src=x onerror=alert(1)>",
  "'; DROP TABLE runs; --",
  "$(rm -rf /)",
  "`reboot`",
  "%s%n%x",
  "{{constructor.constructor('return process')()}}",
  "@room",
  "[link](javascript:alert(1))",
  "\\u0000",
  "../../../../etc/passwd",
  "__proto__",
  "constructor",
  "\u0085\u2028\u2029",
  "&lt;&amp;&#0;&#x110000;",
  "a".repeat(70),
];

const NEAR_VERBS = [
  "stauts",
  "publsh",
  "lst",
  "cancle",
  "conifrm",
  "caps",
  "node",
  "log",
  "",
  "-h",
  "--help",
  "PUBLISH",
];
const WRONG_VALUES: Json[] = [
  null,
  true,
  0,
  -1,
  1.5,
  1e308,
  "",
  " ",
  "NaN",
  [],
  [null],
  {},
  { a: 1 },
  "x".repeat(5000),
  [1, "two", { three: 3 }],
];

export class FuzzGenerator {
  private readonly bases: Doc[];

  constructor(
    private readonly dice: Dice,
    examples: Doc[],
    /** Ids of runs that exist, so some commands name real runs. */
    private readonly knownIds: string[],
    /** Event ids that exist (status cards, commands), for reactions and thread relations. */
    private readonly knownEvents: string[],
  ) {
    this.bases = [...examples, chainDag(12)];
  }

  next(): FuzzEvent {
    const d = this.dice;
    const sender = d.chance(0.75) ? FUZZ_ADMIN : d.chance(0.6) ? FUZZ_MEMBER : FUZZ_LOCAL;
    const roll = d.next();
    if (roll < 0.45) return this.dagEvent(sender);
    if (roll < 0.65) return this.commandEvent(sender);
    if (roll < 0.72) return this.randomEvent(sender);
    if (roll < 0.74) return this.hugeEvent(sender);
    if (roll < 0.84) return this.wrongContentEvent(sender);
    if (roll < 0.9) return this.reactionEvent(sender);
    return this.htmlEvent(sender);
  }

  // --- DAG documents

  private dagEvent(sender: string): FuzzEvent {
    const d = this.dice;
    const doc = structuredClone(d.pick(this.bases));
    const mutations = d.int(1, 3);
    const applied: string[] = [];
    for (let i = 0; i < mutations; i++) applied.push(this.mutateDoc(doc));
    let format = d.chance(0.65) ? "json" : "toml";
    let text: string;
    if (format === "toml") {
      try {
        text = stringifyToml(doc);
      } catch {
        format = "json";
        text = JSON.stringify(doc, null, d.chance(0.5) ? 1 : undefined);
      }
    } else {
      text = JSON.stringify(doc, null, d.chance(0.5) ? 1 : undefined);
    }
    if (d.chance(0.35)) text = this.mutateText(text);
    if (d.chance(0.05))
      text = text.replace("{", '{"__proto__":{"polluted":true},"constructor":{"prototype":{}},');
    const wrap = d.int(0, 9);
    let body: string;
    if (wrap <= 5) body = `!dag publish\n\`\`\`${format}\n${text}\n\`\`\``;
    else if (wrap === 6) body = `!dag publish\n\`\`\`\n${text}\n\`\`\``;
    else if (wrap === 7) body = `!dag publish ${format === "json" ? text : `\`\`\`yaml\n${text}\n\`\`\``}`;
    else if (wrap === 8) body = `!dag publish\n\`\`\`${format}\n${text}`;
    else body = `!dag publish see below\n\`\`\`${format}\n${text}\n\`\`\`\nthanks!\n\`\`\`json\n{}\n\`\`\``;
    return {
      category: `dag:${applied.join("+")}`,
      sender,
      content: { msgtype: "m.text", body },
      mustReply: true,
    };
  }

  /** One structural change that breaks the document; returns its name. */
  private mutateDoc(doc: Doc): string {
    const d = this.dice;
    const isDoc = (v: Json): v is Doc => v !== null && typeof v === "object" && !Array.isArray(v);
    const tasks = Array.isArray(doc["tasks"]) ? doc["tasks"].filter(isDoc) : [];
    const task = (): Doc => (tasks.length > 0 ? d.pick(tasks) : doc);
    switch (d.int(0, 17)) {
      case 0: {
        const paths = leafPaths(doc);
        const path = d.pick(paths.length > 0 ? paths : [["id"]]);
        setAt(doc, path, d.pick(WRONG_VALUES));
        return "wrong-type";
      }
      case 1:
        delete doc[d.pick(["id", "tasks"])];
        return "missing-key";
      case 2:
        delete task()[d.pick(["id", "action"])];
        return "missing-task-key";
      case 3:
        (d.chance(0.5) ? doc : task())[d.pick(["colour", "depends_on", "cmd", "shell", "Action"])] = "x";
        return "unknown-key";
      case 4:
        if (tasks.length > 0) tasks.push(structuredClone(d.pick(tasks)));
        return "duplicate-task";
      case 5:
        task()["needs"] = [d.pick(["nope", "", "../x", "a b", "x".repeat(65)])];
        return "unknown-need";
      case 6: {
        if (tasks.length < 2) return "cycle-skipped";
        const a = d.pick(tasks);
        const b = d.pick(tasks);
        a["needs"] = [String(b["id"])];
        b["needs"] = [...(Array.isArray(b["needs"]) ? (b["needs"] as Json[]) : []), String(a["id"])];
        return a === b ? "self-need" : "cycle";
      }
      case 7:
        task()["action"] = d.pick(["rm", "sh", "bash -c id", "$(reboot)", "", "ECHO", "echo ", 5]);
        return "unknown-action";
      case 8:
        task()[d.pick(["timeout", "queue_timeout", "retry_backoff"])] = d.pick([
          "10x",
          "-1s",
          "999999h",
          "",
          "1h-",
          "P1D",
          "1.5.5s",
          5,
          "0s",
        ]);
        return "bad-duration";
      case 9:
        doc["tasks"] = Array.from({ length: 1001 }, (_, i) => ({ id: `t${i}`, action: "true" }));
        return "too-many-tasks";
      case 10:
        (d.chance(0.5) ? doc : task())["id"] = d.chance(0.5)
          ? "a".repeat(d.int(65, 400))
          : d.pick(["../etc", "a b", "é", "__proto__", "constructor", "", "a/b", "\u0000", "🙂", "-", "."]);
        return "bad-id";
      case 11: {
        let nested: Json = "deep";
        for (let i = 0; i < d.int(33, 80); i++) nested = d.chance(0.5) ? [nested] : { n: nested };
        task()["args"] = { message: nested };
        return "deep-nesting";
      }
      case 12:
        task()["args"] = { message: "x".repeat(d.int(4097, 20000)) };
        return "huge-arg";
      case 13:
        task()[d.pick(["priority", "retries"])] = d.pick([1001, -1001, 11, -1, 2.5, 1e20]);
        if (d.chance(0.3)) doc["max_parallel"] = d.pick([0, -3, 1.5, 100000]);
        return "limits";
      case 14:
        doc["tasks"] = d.pick<Json>([[], {}, "x", null, [null], [[]]]);
        return "bad-tasks";
      case 15:
        task()["args"] = d.pick<Json>([[], "x", { a: null }, { a: { b: 1 } }, { "": "x" }, { "a-b": 1 }]);
        return "bad-args";
      case 16:
        task()["on"] = d.pick<Json>([{ labels: "linux" }, { labels: [1] }, { node: 5 }, { nodes: [] }, "x"]);
        return "bad-placement";
      default:
        task()["needs"] = d.pick<Json>(["x", [1], [null], {}, [[]]]);
        return "bad-needs-type";
    }
  }

  private mutateText(text: string): string {
    const d = this.dice;
    if (text.length === 0) return d.pick(HOSTILE);
    const at = d.int(0, text.length - 1);
    switch (d.int(0, 5)) {
      case 0:
        return text.slice(0, at) + text.slice(at + d.int(1, 20));
      case 1:
        return text.slice(0, at) + d.pick(HOSTILE) + text.slice(at);
      case 2:
        return text.slice(0, at);
      case 3:
        return text.slice(0, at) + text.slice(at, at + d.int(1, 200)).repeat(d.int(2, 5)) + text.slice(at);
      case 4:
        return text.replace(/"/g, () => (d.chance(0.1) ? "\u201c" : '"'));
      default:
        return (
          text.slice(0, at) + d.pick(["{", "}", "[", "]", ",", ":", "=", "\\", "'", "\n"]) + text.slice(at)
        );
    }
  }

  // --- Commands and text

  private word(): string {
    const d = this.dice;
    const pool = [
      ...this.knownIds,
      "nope",
      "",
      "../x",
      "-1",
      "0",
      "1e9",
      "0x10",
      "99999999999999999999",
      "10001",
      "`" + (this.knownIds[0] ?? "x") + "`",
      `"${this.knownIds[0] ?? "x"}"`,
      "'quoted'",
      "x".repeat(65),
      d.pick(HOSTILE),
    ];
    return d.pick(pool);
  }

  private commandEvent(sender: string): FuzzEvent {
    const d = this.dice;
    const verb = d.chance(0.75) ? d.pick(COMMAND_VERBS) : d.pick(NEAR_VERBS);
    const args = Array.from({ length: d.int(0, 4) }, () => this.word());
    const spaced = d.pick([" ", "  ", "\t", "\n", " \n "]);
    const prefix = d.pick(["!dag", "!dag", "!DAG", "!Dag"]);
    let body = `${prefix} ${[verb, ...args].join(spaced)}`;
    let mustReply = true;
    const shape = d.int(0, 9);
    if (shape === 0) {
      body = `> <@someone:example.org> !dag cancel ${this.word()}\n\n${body}`;
    } else if (shape === 1) {
      body = d.pick(["!dagstatus", "! dag status", "dag status", "!dags", " !dag status"]);
      mustReply = false;
    } else if (shape === 2) {
      body = `${prefix} publish\n\`\`\`${d.pick(["json", "toml", "yaml", "", "JSON", "js"])}\n${d.pick(["", "{", "}", "id = 1", "[[tasks]]", d.pick(HOSTILE)])}${d.chance(0.5) ? "\n```" : ""}`;
    } else if (shape === 3) {
      body = `${prefix} publish ${d.pick(["hello", "diamond", "../../etc/passwd", ".hidden", "-rf", "a".repeat(80), "nope", "hello.json", "HELLO"])}`;
    }
    return {
      category: `command:${verb || "(empty)"}`,
      sender,
      content: { msgtype: "m.text", body },
      mustReply,
    };
  }

  private randomEvent(sender: string): FuzzEvent {
    const d = this.dice;
    const n = d.int(0, 400);
    let s = "";
    for (let i = 0; i < n; i++) s += String.fromCharCode(d.int(0, 0xffff));
    const asCommand = d.chance(0.6);
    return {
      category: "random-code-units",
      sender,
      content: { msgtype: "m.text", body: asCommand ? `!dag ${s}` : s },
      mustReply: asCommand,
    };
  }

  private hugeEvent(sender: string): FuzzEvent {
    const d = this.dice;
    const size = d.chance(0.1) ? 1024 * 1024 : d.int(64 * 1024 - 50, 300 * 1024);
    const filler = d.pick(["x", "é", "🙂", '{"a":', "\n"]).repeat(Math.ceil(size / 2));
    const body = d.chance(0.5)
      ? `!dag publish\n\`\`\`json\n${filler.slice(0, size)}\n\`\`\``
      : `!dag ${d.pick(COMMAND_VERBS)} ${filler.slice(0, size)}`;
    return { category: "huge", sender, content: { msgtype: "m.text", body }, mustReply: true };
  }

  private wrongContentEvent(sender: string): FuzzEvent {
    const d = this.dice;
    const contents: Array<Record<string, unknown>> = [
      {},
      { body: 5 },
      { body: null },
      { body: ["!dag status"] },
      { body: { text: "!dag status" } },
      { body: true },
      { msgtype: "m.text", body: "!dag status", formatted_body: { html: 1 }, format: 7 },
      { msgtype: "m.text", body: "!dag status", "m.relates_to": "x" },
      { msgtype: "m.text", body: "!dag status", "m.relates_to": [] },
      { msgtype: "m.text", body: "!dag status", "m.relates_to": { rel_type: 5, event_id: {} } },
      { msgtype: "m.text", body: "!dag list", "m.relates_to": { rel_type: "m.replace", event_id: "$x" } },
      { msgtype: "m.text", body: "!dag list", "m.relates_to": { rel_type: "m.thread", event_id: 42 } },
      {
        msgtype: "m.text",
        body: `!dag status ${this.word()}`,
        "m.relates_to": { rel_type: "m.thread", event_id: d.pick([...this.knownEvents, "$nope"]) },
      },
      { msgtype: "m.notice", body: "!dag cap 0" },
      { msgtype: "m.emote", body: "!dag help" },
      { "m.new_content": { body: "!dag cancel x" }, body: "* !dag cancel x" },
      { relatesTo: { relType: "m.annotation", eventId: 5 }, key: "✅" },
      { targetEventId: d.pick([...this.knownEvents, "$nope"]), key: 7 },
      { body: "!dag status", formattedBody: 9, format: "org.matrix.custom.html" },
    ];
    return {
      category: "wrong-content",
      sender,
      content: structuredClone(d.pick(contents)),
      mustReply: false,
    };
  }

  private reactionEvent(sender: string): FuzzEvent {
    const d = this.dice;
    const key = d.pick(["✅", "❌", "✅\ufe0f", "✔", "👍", "", "✅✅", d.pick(HOSTILE)]);
    const target = d.pick([...this.knownEvents, "$nope:example.org", "", d.pick(HOSTILE)]);
    return {
      category: "reaction",
      sender,
      content: { "m.relates_to": { rel_type: "m.annotation", event_id: target, key } },
      mustReply: false,
    };
  }

  private htmlEvent(sender: string): FuzzEvent {
    const d = this.dice;
    const html = d.pick([
      `<mx-reply><blockquote>!dag cancel x</blockquote></mx-reply>!dag status`,
      `<p>!dag <b>publish</b></p><pre><code class="language-json">${d.pick(HOSTILE)}</code></pre>`,
      `<script>!dag cap 1</script>!dag list`,
      `&lt;!dag&gt; ${d.pick(HOSTILE)}`,
      `<pre><code>${"<".repeat(d.int(1, 5000))}</code></pre>`,
      `!dag ${d.pick(COMMAND_VERBS)} <a href="javascript:x">${this.word()}</a>`,
    ]);
    return {
      category: "html",
      sender,
      content: {
        msgtype: "m.text",
        body: `!dag ${d.pick(COMMAND_VERBS)}`,
        format: "org.matrix.custom.html",
        formatted_body: html,
      },
      mustReply: false,
    };
  }
}

/** A valid chain of n echo tasks, a base with more tasks than the examples. */
function chainDag(n: number): Doc {
  return {
    id: "fuzz-chain",
    tasks: Array.from({ length: n }, (_, i) => ({
      id: `c${i}`,
      action: "echo",
      args: { message: `step ${i}` },
      ...(i > 0 ? { needs: [`c${i - 1}`] } : {}),
    })),
  };
}

function leafPaths(value: Json, prefix: Array<string | number> = []): Array<Array<string | number>> {
  if (Array.isArray(value)) return value.flatMap((v, i) => [[...prefix, i], ...leafPaths(v, [...prefix, i])]);
  if (value !== null && typeof value === "object")
    return Object.entries(value).flatMap(([k, v]) => [[...prefix, k], ...leafPaths(v, [...prefix, k])]);
  return [];
}

function setAt(doc: Doc, path: Array<string | number>, value: Json): void {
  let at: Json = doc;
  for (const key of path.slice(0, -1)) at = (at as Record<string | number, Json>)[key] ?? null;
  const last = path[path.length - 1];
  if (at !== null && typeof at === "object" && last !== undefined)
    (at as Record<string | number, Json>)[last] = value;
}
