/**
 * The messages of `!dag graph`: the request the leader queues (the picture is drawn and uploaded
 * when the outbox sends it, from the run as it is then), the m.image it becomes, and the one-line
 * notice that replaces it when the picture cannot be drawn or uploaded. All three go out under the
 * command's reply txnId, so the command gets exactly one answer.
 */
import type { OutboxMessageInput } from "../../ports/store.js";
import type { RunSummary } from "../commands/outcome.js";
import type { Placement } from "./messages.js";
import { MESSAGE_EVENT_TYPE, noticeContent, relatesTo, replyTxnId } from "./messages.js";
import { code, r } from "./html.js";

/** The outbox row type of a picture to draw; never sent as such. */
export const PICTURE_REQUEST_TYPE = "org.dagbot.picture-request";

export interface PictureRequest {
  runId: string;
  dagId: string;
  /** The relation the m.image (or its failure notice) carries. */
  relation: Record<string, unknown> | null;
}

/** The picture goes into the run's thread (answering the command); a run without one: a reply. */
export function picturePlacement(run: RunSummary, commandEventId: string, fallback: Placement): Placement {
  return run.publishEventId === null
    ? fallback
    : { kind: "thread", root: run.publishEventId, to: commandEventId };
}

export function pictureRequestMessage(
  roomId: string,
  commandEventId: string,
  run: RunSummary,
  placement: Placement,
): OutboxMessageInput {
  const request: PictureRequest = { runId: run.runId, dagId: run.dagId, relation: relatesTo(placement) };
  return {
    txnId: replyTxnId(commandEventId),
    roomId,
    eventType: PICTURE_REQUEST_TYPE,
    content: { ...request },
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
  /** One line for clients that show no images, and the caption for those that do. */
  caption: string;
}

/**
 * An m.image. No thumbnail_url: the homeserver's media repository makes thumbnails of an uploaded
 * PNG on request (/thumbnail), which is what clients ask for; a second upload per picture would only
 * duplicate that.
 */
export function imageContent(picture: UploadedPicture, relation: Record<string, unknown> | null) {
  const content: Record<string, unknown> = {
    msgtype: "m.image",
    body: picture.caption,
    filename: picture.filename,
    ...(picture.file === undefined ? { url: picture.url } : { file: picture.file }),
    info: { mimetype: picture.mimetype, w: picture.width, h: picture.height, size: picture.size },
  };
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
