-- summary: policy changes waiting for a second admin
--
-- Under the two-person rule a room admin's policy change waits here for a second
-- admin's confirmation (or its expiry); applied ones stay as the record of who agreed.

CREATE TABLE policy_proposals (
  room_id      text NOT NULL,
  change_id    text NOT NULL,
  change       jsonb NOT NULL,
  proposed_by  text NOT NULL,
  proposed_at  bigint NOT NULL,
  expires_at   bigint NOT NULL,
  status       text NOT NULL CHECK (status IN ('pending', 'applied')),
  confirmed_by text,
  confirmed_at bigint,
  PRIMARY KEY (room_id, change_id)
);
