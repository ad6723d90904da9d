/** Row → record mapping for the SQLite adapter: structured columns are JSON text, parsed here. */
import { rowMappers } from "../store-common/records.js";

export {
  DEFINITION_COLUMNS,
  DEFINITION_FROM,
  INBOX_COLUMNS,
  OUTBOX_COLUMNS,
  RUN_COLUMNS,
} from "../store-common/records.js";

export const { toRun, toDefinition, toTask, toInbox, toOutbox, toLogEvent, toNode } = rowMappers(
  <T>(v: unknown): T => JSON.parse(v as string) as T,
);
