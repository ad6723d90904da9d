/**
 * `!dag graph` in chat: turns a picture request of the outbox into the event to send, drawing the
 * run as it is at that moment (GraphRenderer port) and uploading the PNG (MediaUploader port). Every
 * failure becomes a one-line notice saying why, never an exception: the command gets one answer.
 * The same run in the same state is drawn and uploaded once (PictureCache): asking again
 * reuses the upload, and so does a failure to draw (a picture too large stays too large).
 */
import type { GraphRenderer, Picture } from "../ports/graph-renderer.js";
import { RenderError } from "../ports/graph-renderer.js";
import type { MediaUploader } from "../ports/chat.js";
import { isChatSendError } from "../ports/chat.js";
import type { RunRecord, Store, TaskRecord } from "../ports/store.js";
import type { PictureRequest } from "./render/pictures.js";
import { imageContent, pictureFailureContent } from "./render/pictures.js";
import { runGraphOf, shortRunId } from "./run-picture.js";
import type { WaitReader } from "./task-waits.js";
import { readRoomWaits, waitsOf } from "./task-waits.js";
import type { WaitReason } from "../domain/wait-reasons.js";
import { waitText } from "../domain/wait-reasons.js";
import type { UploadedPicture } from "./render/pictures.js";
import { PictureCache } from "./picture-budget.js";
import { isTerminalRun } from "../domain/run-states.js";
import { finalWords } from "./render/messages.js";

/** Encrypted rooms get an encrypted upload (the key travels in the encrypted m.image event). */
export interface MediaCrypto {
  isEncrypted(roomId: string): Promise<boolean>;
  /** The bytes to upload and the EncryptedFile info without its url. */
  encrypt(data: Uint8Array): Promise<{ data: Uint8Array; file: Record<string, unknown> }>;
}

export interface PictureDeps {
  store: Pick<Store, "getRunById" | "listTasks"> & WaitReader;
  /** A node silent longer than this offers nothing to a waiting task (retention.node_gone_after). */
  nodeLiveWithinMs?: number;
  renderer: GraphRenderer;
  uploader: MediaUploader;
  mediaCrypto?: MediaCrypto;
  /** Drawings kept for asking again; a fresh cache of 32 by default. */
  cache?: PictureCache<Drawing>;
}

/** What a request came to, without its place in the room: an upload, or why there is none. */
export type Drawing = { ok: true; picture: UploadedPicture } | { ok: false; why: string; again: boolean };

export interface PictureEvent {
  eventType: string;
  content: Record<string, unknown>;
}

export type PictureMaker = (request: PictureRequest, roomId?: string) => Promise<PictureEvent>;

const kib = (bytes: number): string => `${Math.max(1, Math.round(bytes / 1024))} KiB`;

export function createPictureMaker(deps: PictureDeps): PictureMaker {
  const cache = deps.cache ?? new PictureCache<Drawing>();
  return async (request, roomId) => {
    const run = await deps.store.getRunById(request.runId);
    if (run === null)
      return pictureFailureContent(request.dagId, "the run is no longer in the store", request.relation);
    const tasks = await deps.store.listTasks(run.runId);
    const room = await readRoomWaits(deps.store, run.roomId, deps.nodeLiveWithinMs ?? 30_000);
    const waits = waitsOf(run, tasks, room);
    // What decides the picture: the run (its DAG never changes), its status and each task's, and
    // why its tasks wait.
    const key = [
      roomId ?? "",
      run.runId,
      run.status,
      ...tasks.map((t) => `${t.taskId}=${t.status}`),
      ...[...waits].map(([id, w]) => `${id}:${waitText(w)}`),
    ].join("\u0000");
    const drawing = await cache.get(
      key,
      () => draw(deps, run, tasks, roomId, waits),
      // An upload that failed may work next time; what could not be drawn will not be drawn.
      (d) => d.ok || !d.again,
    );
    if (!drawing.ok) return pictureFailureContent(request.dagId, drawing.why, request.relation);
    return imageContent(drawing.picture, request.relation);
  };
}

async function draw(
  deps: PictureDeps,
  run: RunRecord,
  tasks: readonly TaskRecord[],
  roomId: string | undefined,
  waits: ReadonlyMap<string, WaitReason>,
): Promise<Drawing> {
  const fail = (why: string, again: boolean): Drawing => ({ ok: false, why, again });
  const graph = runGraphOf(run, tasks, waits);
  let picture: Picture;
  try {
    picture = await deps.renderer.render(graph, "png");
  } catch (err) {
    // Busy: the renderer had too many waiting; another ask later may find it free.
    if (err instanceof RenderError)
      return fail(`it could not be drawn (${err.message})`, err.reason === "busy");
    throw err;
  }
  const filename = `${run.dagId}-${shortRunId(run.runId)}.png`;
  let url: string;
  let file: Record<string, unknown> | undefined;
  try {
    if (roomId !== undefined && deps.mediaCrypto && (await deps.mediaCrypto.isEncrypted(roomId))) {
      const encrypted = await deps.mediaCrypto.encrypt(picture.data);
      url = await deps.uploader.upload(encrypted.data, "application/octet-stream", filename);
      file = { ...encrypted.file, url };
    } else {
      url = await deps.uploader.upload(picture.data, picture.mimetype, filename);
    }
  } catch (err) {
    if (isChatSendError(err) && err.details.status === 413) {
      return fail(
        `the homeserver refused the ${kib(picture.data.byteLength)} picture as too large (413)`,
        false,
      );
    }
    const reason = isChatSendError(err) ? err.failure : err instanceof Error ? err.message : String(err);
    return fail(`the upload to the homeserver failed (${reason})`, true);
  }
  return {
    ok: true,
    picture: {
      url,
      ...(file === undefined ? {} : { file }),
      mimetype: picture.mimetype,
      width: picture.width,
      height: picture.height,
      size: picture.data.byteLength,
      filename,
      ...captionOf(run, tasks, `${graph.title} — ${graph.counts}`),
    },
  };
}

/** An ended run's picture says how it ended, as its final message does; a live one, its title and counts. */
function captionOf(
  run: RunRecord,
  tasks: readonly TaskRecord[],
  live: string,
): { caption: string; captionHtml?: string } {
  if (!isTerminalRun(run.status)) return { caption: live };
  const words = finalWords(run, tasks);
  return { caption: words.body, captionHtml: words.html };
}
