/**
 * `!dag graph` in chat: turns a picture request of the outbox into the event to send, drawing the
 * run as it is at that moment (GraphRenderer port) and uploading the PNG (MediaUploader port). Every
 * failure becomes a one-line notice saying why, never an exception: the command gets one answer.
 */
import type { GraphRenderer, Picture } from "../ports/graph-renderer.js";
import { RenderError } from "../ports/graph-renderer.js";
import type { MediaUploader } from "../ports/chat.js";
import { isChatSendError } from "../ports/chat.js";
import type { Store } from "../ports/store.js";
import type { PictureRequest } from "./render/pictures.js";
import { imageContent, pictureFailureContent } from "./render/pictures.js";
import { runGraphOf, shortRunId } from "./run-picture.js";

/** Encrypted rooms get an encrypted upload (the key travels in the encrypted m.image event). */
export interface MediaCrypto {
  isEncrypted(roomId: string): Promise<boolean>;
  /** The bytes to upload and the EncryptedFile info without its url. */
  encrypt(data: Uint8Array): Promise<{ data: Uint8Array; file: Record<string, unknown> }>;
}

export interface PictureDeps {
  store: Pick<Store, "getRunById" | "listTasks">;
  renderer: GraphRenderer;
  uploader: MediaUploader;
  mediaCrypto?: MediaCrypto;
}

export interface PictureEvent {
  eventType: string;
  content: Record<string, unknown>;
}

export type PictureMaker = (request: PictureRequest, roomId?: string) => Promise<PictureEvent>;

const kib = (bytes: number): string => `${Math.max(1, Math.round(bytes / 1024))} KiB`;

export function createPictureMaker(deps: PictureDeps): PictureMaker {
  return async (request, roomId) => {
    const fail = (why: string): PictureEvent => pictureFailureContent(request.dagId, why, request.relation);
    const run = await deps.store.getRunById(request.runId);
    if (run === null) return fail("the run is no longer in the store");
    const graph = runGraphOf(run, await deps.store.listTasks(run.runId));
    let picture: Picture;
    try {
      picture = await deps.renderer.render(graph, "png");
    } catch (err) {
      if (err instanceof RenderError) return fail(`it could not be drawn (${err.message})`);
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
        return fail(`the homeserver refused the ${kib(picture.data.byteLength)} picture as too large (413)`);
      }
      const reason = isChatSendError(err) ? err.failure : err instanceof Error ? err.message : String(err);
      return fail(`the upload to the homeserver failed (${reason})`);
    }
    return imageContent(
      {
        url,
        ...(file === undefined ? {} : { file }),
        mimetype: picture.mimetype,
        width: picture.width,
        height: picture.height,
        size: picture.data.byteLength,
        filename,
        caption: `${graph.title} — ${graph.counts}`,
      },
      request.relation,
    );
  };
}
