-- history: a case's final scores across builds, oldest first.
-- Pick the case with --param case=<case_id> (and optionally --param model=<model_id>).
SELECT case_id,
       model_id,
       repetition,
       build_started_at,
       build_id,
       campaign_id,
       action,
       final_score,
       passed,
       round(total_cost_usd, 10) AS total_cost_usd,  -- (a sum claw made: shown as `claw report` shows it)
       key
FROM result_history
WHERE (getvariable('case') IS NULL OR case_id = getvariable('case'))
  AND (getvariable('model') IS NULL OR model_id = getvariable('model'))
ORDER BY case_id, model_id, repetition, build_started_at, build_id;
