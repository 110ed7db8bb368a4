-- cost_by_model: what each model's latest runs and their judgements cost, with token totals.
-- Costs are of the results (reused ones included); money spent per build is in `builds`.
WITH r AS (
    SELECT model_id,
           count(*)                     AS runs,
           sum(input_tokens)            AS input_tokens,
           sum(output_tokens)           AS output_tokens,
           sum(reasoning_tokens)        AS reasoning_tokens,
           sum(coalesce(cost_usd, 0))   AS run_cost_usd
    FROM runs
    GROUP BY model_id
), j AS (
    SELECT model_id,
           count(*)                     AS judgements,
           sum(coalesce(cost_usd, 0))   AS judge_cost_usd
    FROM judgements
    GROUP BY model_id
)
SELECT r.model_id,
       r.runs,
       r.input_tokens,
       r.output_tokens,
       r.reasoning_tokens,
       round(r.run_cost_usd, 5)                                AS run_cost_usd,
       coalesce(j.judgements, 0)                               AS judgements,
       round(coalesce(j.judge_cost_usd, 0), 5)                 AS judge_cost_usd,
       round(r.run_cost_usd + coalesce(j.judge_cost_usd, 0), 5) AS total_cost_usd
FROM r LEFT JOIN j USING (model_id)
ORDER BY total_cost_usd DESC, r.model_id;
