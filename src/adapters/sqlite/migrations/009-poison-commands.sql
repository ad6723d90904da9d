-- summary: poison commands: the term that started handling an inbox row, and its losses
--
-- Poison commands (src/domain/inbox-handling.ts): the term of the leader that started
-- handling a new row, and how many leaders started it and lost their lease before finishing.

ALTER TABLE processed_events ADD COLUMN handling_term INTEGER;
ALTER TABLE processed_events ADD COLUMN handling_losses INTEGER NOT NULL DEFAULT 0;
