-- summary: tasks carry a run condition (when); the store refuses claims, leases and new runs of nodes before 0.5.0
-- fleet-protocol: 3
--
-- Run conditions (docs/dag-format.md "Run conditions"; docs/architecture.md §4 step 4): run_when
-- is a task's `when` other than the default (NULL: "succeeded"). A leader of protocol 2 (0.2.0 to
-- 0.4.0) does not read it: it would skip a when = "failed" cleanup behind a failure and queue it
-- after a success, wrong side effects. So this raises the fleet protocol to 3 the way
-- 017-fleet-protocol-2.sql raised it to 2 (a connection of protocol 3 made the temp view dagbot_fleet_protocol_3, connection.ts) (docs/architecture.md §11): the fence triggers are made
-- again for protocol 3, an older node's renewals, output writes and finishes still pass (what it
-- runs ends once) and its claims, leases, new runs, tasks and inbox rows are refused with this
-- message. The old triggers go first (they would refuse this very connection); then the leases
-- are handed back, with a new term, so an old leader's next fenced write fails and a protocol-3
-- node takes over.

ALTER TABLE tasks ADD COLUMN run_when TEXT CHECK (run_when IN ('failed','denied','done'));
DROP TRIGGER fleet_fence_claim;
DROP TRIGGER fleet_fence_task;
DROP TRIGGER fleet_fence_run;
DROP TRIGGER fleet_fence_inbox;
DROP TRIGGER fleet_fence_lease_new;
DROP TRIGGER fleet_fence_lease;
UPDATE room_leases SET holder_node = NULL, holder_boot = NULL, expires_at = 0, term = term + 1;
CREATE TRIGGER fleet_fence_claim BEFORE UPDATE OF started_at ON tasks
  WHEN NOT EXISTS (SELECT 1 FROM pragma_table_info('dagbot_fleet_protocol_3', 'temp'))
  BEGIN SELECT RAISE(ABORT, 'this store needs dagbot 0.5.0 or later (fleet protocol 3) to lead, claim or start runs, and this node runs an older release: it may still finish the tasks it runs; upgrade it (README, Upgrading)'); END;
CREATE TRIGGER fleet_fence_task BEFORE INSERT ON tasks
  WHEN NOT EXISTS (SELECT 1 FROM pragma_table_info('dagbot_fleet_protocol_3', 'temp'))
  BEGIN SELECT RAISE(ABORT, 'this store needs dagbot 0.5.0 or later (fleet protocol 3) to lead, claim or start runs, and this node runs an older release: it may still finish the tasks it runs; upgrade it (README, Upgrading)'); END;
CREATE TRIGGER fleet_fence_run BEFORE INSERT ON runs
  WHEN NOT EXISTS (SELECT 1 FROM pragma_table_info('dagbot_fleet_protocol_3', 'temp'))
  BEGIN SELECT RAISE(ABORT, 'this store needs dagbot 0.5.0 or later (fleet protocol 3) to lead, claim or start runs, and this node runs an older release: it may still finish the tasks it runs; upgrade it (README, Upgrading)'); END;
CREATE TRIGGER fleet_fence_inbox BEFORE INSERT ON processed_events
  WHEN NOT EXISTS (SELECT 1 FROM pragma_table_info('dagbot_fleet_protocol_3', 'temp'))
  BEGIN SELECT RAISE(ABORT, 'this store needs dagbot 0.5.0 or later (fleet protocol 3) to lead, claim or start runs, and this node runs an older release: it may still finish the tasks it runs; upgrade it (README, Upgrading)'); END;
CREATE TRIGGER fleet_fence_lease_new BEFORE INSERT ON room_leases
  WHEN NOT EXISTS (SELECT 1 FROM pragma_table_info('dagbot_fleet_protocol_3', 'temp'))
  BEGIN SELECT RAISE(ABORT, 'this store needs dagbot 0.5.0 or later (fleet protocol 3) to lead, claim or start runs, and this node runs an older release: it may still finish the tasks it runs; upgrade it (README, Upgrading)'); END;
CREATE TRIGGER fleet_fence_lease BEFORE UPDATE ON room_leases
  WHEN NOT EXISTS (SELECT 1 FROM pragma_table_info('dagbot_fleet_protocol_3', 'temp'))
  BEGIN SELECT RAISE(ABORT, 'this store needs dagbot 0.5.0 or later (fleet protocol 3) to lead, claim or start runs, and this node runs an older release: it may still finish the tasks it runs; upgrade it (README, Upgrading)'); END;
