-- cost_by_model: per campaign and model, what the current head's runs and evaluation cost, with tokens.
-- A cost, and the runs' input, output and reasoning tokens, are NULL when a part is unknown (cost_unknown counts those runs and judgements; cost_priced
-- the ones priced from the model's declared pricing; cost_known_usd the known part of the total, `≥` when a part is unknown;
-- input_tokens_known and output_tokens_known the runs' tokens' known part, the same). These are the costs `claw report` shows (reused results included); what each build spent is in the per-build view (docs/query.md).
SELECT campaign_id,
       model_id,
       count(*) FILTER (WHERE kind = 'run')                                   AS runs,
       CASE WHEN count(*) FILTER (WHERE kind = 'run' AND cost_source IS NOT NULL
                                  AND (input_tokens IS NULL OR output_tokens IS NULL)) = 0
            THEN sum(input_tokens) FILTER (WHERE kind = 'run') END            AS input_tokens,
       CASE WHEN count(*) FILTER (WHERE kind = 'run' AND cost_source IS NOT NULL
                                  AND (input_tokens IS NULL OR output_tokens IS NULL)) = 0
            THEN sum(output_tokens) FILTER (WHERE kind = 'run') END           AS output_tokens,
       sum(input_tokens_known) FILTER (WHERE kind = 'run')                    AS input_tokens_known,
       sum(output_tokens_known) FILTER (WHERE kind = 'run')                   AS output_tokens_known,
       CASE WHEN count(*) FILTER (WHERE kind = 'run' AND cost_source IS NOT NULL AND reasoning_tokens IS NULL) = 0
            THEN sum(reasoning_tokens) FILTER (WHERE kind = 'run') END        AS reasoning_tokens,
       CASE WHEN count(*) FILTER (WHERE kind = 'run' AND cost_usd IS NULL) = 0
            THEN round(coalesce(sum(cost_usd) FILTER (WHERE kind = 'run'), 0), 10) END  AS run_cost_usd,
       count(*) FILTER (WHERE kind = 'judge')                                 AS judgements,
       CASE WHEN count(*) FILTER (WHERE kind <> 'run' AND cost_usd IS NULL) = 0
            THEN round(coalesce(sum(cost_usd) FILTER (WHERE kind <> 'run'), 0), 10) END AS eval_cost_usd,
       CASE WHEN count(*) FILTER (WHERE cost_usd IS NULL) = 0
            THEN round(coalesce(sum(cost_usd), 0), 10) END                     AS total_cost_usd,
       round(sum(cost_known_usd), 10)                                         AS cost_known_usd,
       count(*) FILTER (WHERE cost_source = 'priced')                         AS cost_priced,
       count(*) FILTER (WHERE cost_usd IS NULL)                               AS cost_unknown
FROM nodes
WHERE model_id IS NOT NULL AND case_id IS NOT NULL
GROUP BY campaign_id, model_id
ORDER BY campaign_id, total_cost_usd DESC NULLS FIRST, model_id;
