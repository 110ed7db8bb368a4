-- leaderboard: per model, the mean final score over its latest results, cases, cost and latency.
-- Narrow with --param campaign=<campaign_id> and/or --param evaluation_profile=<id>.
SELECT
    model_id,
    count(DISTINCT case_id)                  AS cases,
    count(*)                                 AS results,
    count(final_score)                       AS scored,
    round(avg(final_score), 3)               AS mean_score,
    round(avg(CASE WHEN passed THEN 1.0 WHEN NOT passed THEN 0.0 END), 3) AS pass_rate,
    round(sum(run_cost_usd), 5)              AS run_cost_usd,
    round(sum(eval_cost_usd), 5)             AS eval_cost_usd,
    round(sum(total_cost_usd), 5)            AS total_cost_usd,
    round(avg(latency_s), 2)                 AS mean_latency_s
FROM results
WHERE (getvariable('campaign') IS NULL OR campaign_id = getvariable('campaign'))
  AND (getvariable('evaluation_profile') IS NULL OR evaluation_profile_id = getvariable('evaluation_profile'))
GROUP BY model_id
ORDER BY mean_score DESC NULLS LAST, model_id;
