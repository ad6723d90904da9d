/**
 * The messages of `!dag graph`: the request the leader queues (the picture is drawn and uploaded
 * when the outbox sends it, from the run as it is then), the m.image it becomes, and the one-line
 * notice that replaces it when the picture cannot be drawn or uploaded. All three go out under one
 * txnId: the command's reply txnId when the picture is its answer, else `picture.<event id>` beside a
 * short answer that points to it (picturePlacement), so the command gets exactly one answer.
 */
import type { OutboxMessageInput } from "../../ports/store.js";
import type { RunSummary } from "../commands/outcome.js";
import type { Placement } from "./messages.js";
import {
  FALLBACK_TXN_KEY,
  MESSAGE_EVENT_TYPE,
  noticeContent,
  relatesTo,
  replyTxnId,
  runThreadPlacement,
  THREAD_ROOT_TXN_KEY,
} from "./messages.js";
import { code, escapeHtml, r } from "./html.js";
import { HTML_FORMAT } from "./notice.js";

/** The outbox row type of a picture to draw; never sent as such. */
export const PICTURE_REQUEST_TYPE = "org.dagbot.picture-request";

export interface PictureRequest {
  runId: string;
  dagId: string;
  /** The relation the m.image (or its failure notice) carries. */
  relation: Record<string, unknown> | null;
}

/**
 * Where a picture goes and whether it is the command's answer. Asked in the run's thread, the picture
 * itself answers the command there. Asked elsewhere, it goes into the
 * run's thread (clients without threads see it as a reply to the card) and the command gets a short
 * answer where it was typed, pointing to it (`pointer`).
 */
export function picturePlacement(
  run: RunSummary,
  commandEventId: string,
  asked: Placement,
): { placement: Placement; pointer: boolean } {
  if (asked.kind === "thread" && asked.root === run.publishEventId)
    return { placement: { kind: "thread", root: run.publishEventId, to: commandEventId }, pointer: false };
  return { placement: runThreadPlacement(run), pointer: true };
}

/** `reply.<event id>` when the picture is the answer, `picture.<event id>` when a pointer answers. */
export const pictureTxnId = (commandEventId: string): string => `picture.${commandEventId}`;

export function pictureRequestMessage(
  roomId: string,
  commandEventId: string,
  run: RunSummary,
  placement: Placement,
  pointer = false,
): OutboxMessageInput {
  const request: PictureRequest = { runId: run.runId, dagId: run.dagId, relation: relatesTo(placement) };
  const fallback =
    placement.kind === "thread" && placement.to === undefined && placement.fallbackTxn != null
      ? { [FALLBACK_TXN_KEY]: placement.fallbackTxn }
      : placement.kind === "card-thread"
        ? { [THREAD_ROOT_TXN_KEY]: placement.cardTxn, [FALLBACK_TXN_KEY]: placement.cardTxn }
        : {};
  return {
    txnId: pointer ? pictureTxnId(commandEventId) : replyTxnId(commandEventId),
    roomId,
    eventType: PICTURE_REQUEST_TYPE,
    content: { ...request, ...fallback },
  };
}

export function readPictureRequest(content: Record<string, unknown>): PictureRequest | null {
  const { runId, dagId, relation } = content;
  if (typeof runId !== "string" || typeof dagId !== "string") return null;
  return {
    runId,
    dagId,
    relation:
      relation !== null && typeof relation === "object" ? (relation as Record<string, unknown>) : null,
  };
}

export interface UploadedPicture {
  url: string;
  /**
   * An encrypted room's picture: the upload is ciphertext, and this is the key material
   * (EncryptedFile, url included) that goes in `file` instead of `url`.
   */
  file?: Record<string, unknown>;
  mimetype: string;
  width: number;
  height: number;
  size: number;
  filename: string;
  /**
   * One line for clients that show no images, and the caption for those that do. Of a run that has
   * ended, how it ended (the final message's words): the picture may be its thread's last event, and
   * the thread summary shows that event's text.
   */
  caption: string;
  /** The caption's HTML (names as code); absent: the caption, escaped. */
  captionHtml?: string;
}

/** Widest the picture is shown inline: a timeline's width on a laptop; clicking opens it whole. */
const INLINE_MAX_WIDTH = 800;

/**
 * The picture's event. In a room without encryption, an m.notice whose HTML shows the uploaded
 * picture inline (an <img> of its mxc URL, scaled to the timeline) under its caption: the default
 * push rules silence notices, where an m.image would count as a new message for every member of the
 * room. The m.image keys (url, filename, info) stay on it for clients and tools that read them. In
 * an encrypted room the upload is ciphertext an <img> cannot show, and every event notifies as
 * encrypted anyway: an m.image. No thumbnail_url: the homeserver's media repository makes thumbnails
 * of an uploaded PNG on request (/thumbnail), which is what clients ask for.
 */
export function imageContent(picture: UploadedPicture, relation: Record<string, unknown> | null) {
  const info = { mimetype: picture.mimetype, w: picture.width, h: picture.height, size: picture.size };
  let content: Record<string, unknown>;
  if (picture.file !== undefined) {
    content = {
      msgtype: "m.image",
      body: picture.caption,
      filename: picture.filename,
      file: picture.file,
      info,
    };
  } else {
    const scale = Math.min(1, INLINE_MAX_WIDTH / Math.max(1, picture.width));
    const w = Math.max(1, Math.round(picture.width * scale));
    const h = Math.max(1, Math.round(picture.height * scale));
    const caption = picture.captionHtml ?? escapeHtml(picture.caption);
    content = {
      msgtype: "m.notice",
      body: picture.caption,
      format: HTML_FORMAT,
      formatted_body: `<p>${caption}</p><img src="${escapeHtml(picture.url)}" width="${w}" height="${h}" alt="${escapeHtml(
        picture.filename,
      )}">`,
      "m.mentions": {},
      filename: picture.filename,
      url: picture.url,
      info,
    };
  }
  if (relation !== null) content["m.relates_to"] = relation;
  return { eventType: MESSAGE_EVENT_TYPE, content };
}

/** What went wrong, in one notice where the picture would have been. */
export function pictureFailureContent(dagId: string, why: string, relation: Record<string, unknown> | null) {
  const rendered = r`⚠️ No picture of ${code(dagId)}: ${why}. ${code(`dagbot graph ${dagId}`)} draws it on a node.`;
  const content = noticeContent(rendered, { kind: "room" });
  if (relation !== null) content["m.relates_to"] = relation;
  return { eventType: MESSAGE_EVENT_TYPE, content };
}
