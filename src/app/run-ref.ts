/**
 * A run named by a user, in any face (chat, CLI, HTTP, the event stream). A run has one canonical
 * id, its name in the room (`<dag>`, `<dag>.<n>`, `<dag>.s<slot>`), which every output shows; its
 * store uuid is accepted as input too (docs/architecture.md §1, "Run ids and lists").
 */
import type { RunRecord, RunStore } from "../ports/store.js";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The room's run that `ref` names: by its name first (a DAG id may look like a uuid, and names are
 * what people type), then by its uuid. A uuid of another room's run is no run of this room.
 */
export async function findRun(
  store: Pick<RunStore, "getRun" | "getRunById">,
  roomId: string,
  ref: string,
): Promise<RunRecord | null> {
  const named = await store.getRun(roomId, ref);
  if (named !== null || !UUID.test(ref)) return named;
  const byId = await store.getRunById(ref.toLowerCase());
  return byId !== null && byId.roomId === roomId ? byId : null;
}
