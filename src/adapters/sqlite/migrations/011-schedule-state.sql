-- summary: schedules with a state, an owner and the newest slot considered
--
-- A schedule is an object of its own, with a state (active, paused, deleted), who
-- changed it last, when and why, and the newest slot it fired or skipped: a skipped slot is
-- recorded (with an event saying why) so no later leader considers it again.

ALTER TABLE definitions ADD COLUMN schedule_state TEXT NOT NULL DEFAULT 'active'
  CHECK (schedule_state IN ('active','paused','deleted'));
ALTER TABLE definitions ADD COLUMN schedule_state_by TEXT;
ALTER TABLE definitions ADD COLUMN schedule_state_at INTEGER;
ALTER TABLE definitions ADD COLUMN schedule_state_reason TEXT;
ALTER TABLE definitions ADD COLUMN slots_through INTEGER;
UPDATE definitions SET slots_through = last_slot_at;
