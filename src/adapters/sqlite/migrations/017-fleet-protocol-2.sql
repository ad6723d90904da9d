-- summary: nodes record release and protocol; the store refuses claims, leases and new runs of nodes before 0.2.0
-- fleet-protocol: 2
--
-- Upgrade day (docs/architecture.md §11): nodes say which release and fleet protocol they run,
-- and the store refuses what a node of protocol 1 (before 0.2.0) would do wrong beside this
-- schema: a claim (it would run a gate as an action, or a task without checking its outputs),
-- a lease (it would lead and queue gates as tasks), a new run, task or inbox row. Its renewals,
-- output writes and finishes still pass, so what it runs ends once. A connection is of protocol
-- 2 when it made the temp view dagbot_fleet_protocol_2 (connection.ts); an older one has none
-- and reads this message from its failed statement. The leases are handed back, with a new
-- term, so an old leader's next fenced write fails and a protocol-2 node takes over.

ALTER TABLE nodes ADD COLUMN release TEXT;
ALTER TABLE nodes ADD COLUMN protocol INTEGER;
UPDATE room_leases SET holder_node = NULL, holder_boot = NULL, expires_at = 0, term = term + 1;
CREATE TRIGGER fleet_fence_claim BEFORE UPDATE OF started_at ON tasks
  WHEN NOT EXISTS (SELECT 1 FROM pragma_table_info('dagbot_fleet_protocol_2', 'temp'))
  BEGIN SELECT RAISE(ABORT, 'this store needs dagbot 0.2.0 or later (fleet protocol 2) to lead, claim or start runs, and this node runs an older release: it may still finish the tasks it runs; upgrade it (README, Upgrading)'); END;
CREATE TRIGGER fleet_fence_task BEFORE INSERT ON tasks
  WHEN NOT EXISTS (SELECT 1 FROM pragma_table_info('dagbot_fleet_protocol_2', 'temp'))
  BEGIN SELECT RAISE(ABORT, 'this store needs dagbot 0.2.0 or later (fleet protocol 2) to lead, claim or start runs, and this node runs an older release: it may still finish the tasks it runs; upgrade it (README, Upgrading)'); END;
CREATE TRIGGER fleet_fence_run BEFORE INSERT ON runs
  WHEN NOT EXISTS (SELECT 1 FROM pragma_table_info('dagbot_fleet_protocol_2', 'temp'))
  BEGIN SELECT RAISE(ABORT, 'this store needs dagbot 0.2.0 or later (fleet protocol 2) to lead, claim or start runs, and this node runs an older release: it may still finish the tasks it runs; upgrade it (README, Upgrading)'); END;
CREATE TRIGGER fleet_fence_inbox BEFORE INSERT ON processed_events
  WHEN NOT EXISTS (SELECT 1 FROM pragma_table_info('dagbot_fleet_protocol_2', 'temp'))
  BEGIN SELECT RAISE(ABORT, 'this store needs dagbot 0.2.0 or later (fleet protocol 2) to lead, claim or start runs, and this node runs an older release: it may still finish the tasks it runs; upgrade it (README, Upgrading)'); END;
CREATE TRIGGER fleet_fence_lease_new BEFORE INSERT ON room_leases
  WHEN NOT EXISTS (SELECT 1 FROM pragma_table_info('dagbot_fleet_protocol_2', 'temp'))
  BEGIN SELECT RAISE(ABORT, 'this store needs dagbot 0.2.0 or later (fleet protocol 2) to lead, claim or start runs, and this node runs an older release: it may still finish the tasks it runs; upgrade it (README, Upgrading)'); END;
CREATE TRIGGER fleet_fence_lease BEFORE UPDATE ON room_leases
  WHEN NOT EXISTS (SELECT 1 FROM pragma_table_info('dagbot_fleet_protocol_2', 'temp'))
  BEGIN SELECT RAISE(ABORT, 'this store needs dagbot 0.2.0 or later (fleet protocol 2) to lead, claim or start runs, and this node runs an older release: it may still finish the tasks it runs; upgrade it (README, Upgrading)'); END;
