-- summary: idempotency keys are found by age for retention
--
-- Idempotency keys are forgotten after retention.idempotency_keys; the oldest are found first.

CREATE INDEX idempotency_keys_age ON idempotency_keys (created_at);
