-- summary: batched finishes: the rows of a batch from a function with a small row estimate
--
-- The rows of a batch of finishes (tasks.ts, FINISH_MANY_SQL), unnested from the
-- statement's parameter arrays. A function with a small row estimate, not a bare unnest: the
-- planner guesses 100 rows for an unnest of parameters, so it costed the statement's generic
-- plan above its custom one and planned it afresh at every execution (1.5–2 ms each); with
-- the estimate the generic plan (index lookups by primary key) is kept.

CREATE FUNCTION finish_rows(p_runs text[], p_tasks text[], p_versions integer[], p_nodes text[], p_boots text[],
                            p_outcomes text[], p_exits integer[], p_outputs text[], p_errors text[],
                            p_actors text[], p_bytes bigint[], p_values jsonb[], p_wants integer[])
  RETURNS TABLE (b_run text, b_task text, b_version integer, b_node text, b_boot text, b_outcome text,
                 b_exit integer, b_output text, b_error text, b_actor text, b_bytes bigint, b_values jsonb,
                 b_wants integer, b_i bigint)
  LANGUAGE plpgsql IMMUTABLE ROWS 8
AS $fn$
BEGIN
  RETURN QUERY SELECT * FROM unnest(p_runs, p_tasks, p_versions, p_nodes, p_boots, p_outcomes, p_exits,
                                    p_outputs, p_errors, p_actors, p_bytes, p_values, p_wants) WITH ORDINALITY;
END
$fn$;
