/**
 * A room read back as a Matrix client shows it, from the homeserver's own history (/messages): each
 * message with the latest edit the homeserver bundles (`unsigned.m.relations.m.replace`: the spec
 * honours an edit only from the original sender, so an edit from another account is not bundled),
 * each thread root with its bundled thread summary (`m.thread`: count and latest event), and the
 * room as text: the main timeline with the summaries under the roots, then each thread in full.
 */
import type { RegisteredUser } from "./synapse.js";
import type { MatrixEvent, MatrixUser } from "./matrix-user.js";
import { roomHistory } from "./bot-chat.js";

export interface ShownMessage {
  event: MatrixEvent;
  /** The body a client shows: the bundled edit's new content, else the event's own. */
  body: string;
  /** The bundled edit, if the homeserver bundles one. */
  edit: MatrixEvent | null;
  /** The thread this message is in (its root's id), or null in the main timeline. */
  thread: string | null;
  /** The bundled thread summary, when this message is a thread root. */
  summary: { count: number; latest: MatrixEvent } | null;
}

const relation = (e: MatrixEvent): Record<string, any> => e.content["m.relates_to"] ?? {};
const bodyText = (content: Record<string, any> | undefined): string =>
  typeof content?.["body"] === "string" ? content["body"] : "";

/** The body a client shows for `e`: its bundled latest edit's new content, else its own. */
export function shownBody(e: MatrixEvent): string {
  const edit = e.unsigned?.["m.relations"]?.["m.replace"] as MatrixEvent | undefined;
  return edit === undefined ? bodyText(e.content) : bodyText(edit.content["m.new_content"]);
}

/** Every message of the room (no edits, no reactions), oldest first, as a client shows it. */
export async function messagesAsShown(user: MatrixUser, roomId: string): Promise<ShownMessage[]> {
  const history = await roomHistory(user, roomId);
  return history
    .filter((e) => e.type === "m.room.message" && relation(e).rel_type !== "m.replace")
    .map((event) => {
      const rel = relation(event);
      const bundled = event.unsigned?.["m.relations"] ?? {};
      const thread = bundled["m.thread"];
      return {
        event,
        body: shownBody(event),
        edit: (bundled["m.replace"] as MatrixEvent | undefined) ?? null,
        thread: rel.rel_type === "m.thread" ? String(rel.event_id) : null,
        summary:
          thread === undefined
            ? null
            : { count: Number(thread.count), latest: thread.latest_event as MatrixEvent },
      };
    });
}

/** `@alice:localhost` → `alice`. */
const nameOf = (userId: string): string => userId.replace(/^@/, "").replace(/:.*$/, "");

/** A long body shown as its first lines; a publish shown as what it publishes. */
function short(body: string): string {
  const published = /^!dag publish\n```json\n\{\n {2}"id": "([^"]+)"/.exec(body)?.[1];
  if (published !== undefined) return `!dag publish + a \`\`\`json block (the DAG \`${published}\`)`;
  return body;
}

/**
 * The room as text, as a client with threads lists it: the main timeline, each root followed by its
 * thread summary (reply count and latest reply with its latest edit applied), then each thread in
 * full, every message with its latest edit applied.
 */
export function roomText(messages: readonly ShownMessage[]): string {
  const indent = (t: string) => t.split("\n").join("\n    ");
  const main: string[] = ["Main timeline:"];
  const threads: string[] = [];
  for (const m of messages) {
    if (m.thread !== null) continue;
    main.push(`  ${nameOf(m.event.sender)}: ${indent(short(m.body))}`);
    if (m.summary === null) continue;
    const latest = m.summary.latest;
    const latestBody = shownBody(latest).split("\n")[0] ?? "";
    main.push(`    🧵 ${m.summary.count} replies · latest: ${nameOf(latest.sender)}: ${latestBody}`);
    threads.push("", `Thread of ${nameOf(m.event.sender)}: ${short(m.body).split("\n")[0]}`);
    for (const t of messages.filter((x) => x.thread === m.event.event_id))
      threads.push(`  ${nameOf(t.event.sender)}: ${indent(t.body)}${t.edit === null ? "" : "  (edited)"}`);
  }
  return `${[...main, ...threads].join("\n")}\n`;
}

/**
 * A second device of `user`'s account, logged in with its password under a fixed device id: a
 * fleet of one bot account with a device per node (docs/architecture.md §12).
 */
export async function loginDevice(
  url: string,
  user: RegisteredUser,
  deviceId: string,
): Promise<RegisteredUser> {
  const res = await fetch(`${url}/_matrix/client/v3/login`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      type: "m.login.password",
      identifier: { type: "m.id.user", user: user.localpart },
      password: user.password,
      device_id: deviceId,
    }),
  });
  const json = (await res.json()) as Record<string, unknown>;
  if (res.status !== 200) throw new Error(`login ${deviceId}: HTTP ${res.status} ${JSON.stringify(json)}`);
  return { ...user, accessToken: String(json["access_token"]), deviceId };
}
