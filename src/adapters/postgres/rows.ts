/** Row → record mapping for the PostgreSQL adapter: jsonb and text[] arrive parsed, bigint as number (db.ts). */
import { rowMappers } from "../store-common/records.js";

export {
  DEFINITION_COLUMNS,
  DEFINITION_FROM,
  INBOX_COLUMNS,
  OUTBOX_COLUMNS,
  RUN_COLUMNS,
  TASK_COLUMNS,
} from "../store-common/records.js";

// The driver has decoded jsonb and text[] already.
export const { toRun, toDefinition, toTask, toInbox, toOutbox, toLogEvent, toNode } = rowMappers(
  <T>(v: unknown): T => v as T,
);
