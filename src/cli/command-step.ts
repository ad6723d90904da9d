/**
 * The seam between the engine's leader loop and the command table's inbox processing step
 * (src/app/commands/). Until that step exists, commands wait in the inbox and the leader only
 * schedules, reaps and derives outcomes.
 */
import type { InboxStep } from "../app/leader.js";
import type { NodeConfig } from "../config/node-config.js";
import type { Logger } from "../ports/logger.js";
import type { Store } from "../ports/store.js";

export function commandStep(_config: NodeConfig, _store: Store, _logger: Logger): InboxStep | null {
  return null;
}
