-- cost_by_model: per campaign and model, what the current head's runs and evaluation cost, with tokens.
-- These are the costs `claw report` shows (reused results included); what each build spent is in the per-build view (docs/query.md).
SELECT campaign_id,
       model_id,
       count(*) FILTER (WHERE kind = 'run')                                   AS runs,
       sum(input_tokens) FILTER (WHERE kind = 'run')                          AS input_tokens,
       sum(output_tokens) FILTER (WHERE kind = 'run')                         AS output_tokens,
       sum(reasoning_tokens) FILTER (WHERE kind = 'run')                      AS reasoning_tokens,
       round(coalesce(sum(cost_usd) FILTER (WHERE kind = 'run'), 0), 5)       AS run_cost_usd,
       count(*) FILTER (WHERE kind = 'judge')                                 AS judgements,
       round(coalesce(sum(cost_usd) FILTER (WHERE kind <> 'run'), 0), 5)      AS eval_cost_usd,
       round(coalesce(sum(cost_usd), 0), 5)                                   AS total_cost_usd
FROM nodes
WHERE model_id IS NOT NULL AND case_id IS NOT NULL
GROUP BY campaign_id, model_id
ORDER BY campaign_id, total_cost_usd DESC, model_id;
