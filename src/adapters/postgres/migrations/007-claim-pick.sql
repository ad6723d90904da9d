-- summary: the claim's pick in a function with a fixed plan
--
-- The claim's pick in a function whose plan cannot depend on planner statistics.
-- Taken before a burst of queued tasks, they make the planner read every queued row of the room
-- (a bitmap scan, or tasks_open) and sort them, on every claim; seen in half the claims of a
-- bench round. With sorts, bitmap and sequential scans disabled here, the walk of tasks_claim
-- (already in claim order, stopping at the first fitting rows) is the only plan left.
-- It locks and returns up to p_limit fitting ready rows in claim order, each with `more`: the
-- batch was filled and another fitting ready task is still queued (rows other claimers hold
-- count: they are still queued in this snapshot); false when the batch was not filled. That
-- check is ordered too, so it walks tasks_claim from its head rather than tasks_open, whose
-- (room, 'queued') entries of every task ever queued it would read in heap order. ROWS 1: with
-- the default estimate (1,000 rows) the claim's UPDATE joins its rows to a scan of all tasks.

CREATE FUNCTION claim_pick(p_now bigint, p_rooms text[], p_node text, p_actions text[], p_labels text[],
                           p_limit integer)
  RETURNS TABLE (run_id text, task_id text, more boolean)
  LANGUAGE plpgsql VOLATILE ROWS 1
  SET enable_sort = off SET enable_bitmapscan = off SET enable_seqscan = off
  SET plan_cache_mode = force_generic_plan
AS $fn$
DECLARE
  runs text[] := '{}';
  ids text[] := '{}';
  seqs bigint[] := '{}';
  left_more boolean := false;
  r record;
BEGIN
  FOR r IN
    SELECT t.run_id, t.task_id, t.seq FROM tasks t
     WHERE t.status = 'queued'
       AND t.room_id = ANY(p_rooms)
       AND (t.not_before IS NULL OR t.not_before <= p_now)
       AND (t.node_pin IS NULL OR t.node_pin = p_node)
       AND t.action = ANY(p_actions)
       AND t.labels <@ p_labels
     ORDER BY t.priority DESC, t.seq
     LIMIT p_limit
     FOR UPDATE OF t SKIP LOCKED
  LOOP
    runs := runs || r.run_id;
    ids := ids || r.task_id;
    seqs := seqs || r.seq;
  END LOOP;
  IF cardinality(seqs) = p_limit THEN
    left_more := EXISTS (
      SELECT 1 FROM tasks t
       WHERE t.status = 'queued'
         AND t.room_id = ANY(p_rooms)
         AND (t.not_before IS NULL OR t.not_before <= p_now)
         AND (t.node_pin IS NULL OR t.node_pin = p_node)
         AND t.action = ANY(p_actions)
         AND t.labels <@ p_labels
         AND t.seq <> ALL(seqs)
       ORDER BY t.priority DESC, t.seq
       LIMIT 1);
  END IF;
  RETURN QUERY SELECT x.run_id, x.task_id, left_more FROM unnest(runs, ids) AS x(run_id, task_id);
END
$fn$;
