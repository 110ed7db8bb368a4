-- leaderboard: per campaign and model, what `claw report` shows: the mean score over cases (a case's
-- score is the mean of its repetitions' results), pass rate, cost and run latency of the current head.
-- A cost is NULL when a part of it is unknown (a run or judgement whose provider reported no cost and
-- whose model declares no pricing): cost_unknown counts those, cost_priced the ones priced from pricing.
-- Narrow with --param campaign=<campaign_id> and/or --param evaluation_profile=<id>.
-- score_low/score_high: the 95 % interval over cases (mean ± t975(n-1)·sd/√n of the case scores, clipped to
-- 0-10); pass_low/pass_high: the Wilson interval of the cases passed (docs/query.md, "Intervals").
WITH picked AS (
    SELECT * FROM nodes
    WHERE model_id IS NOT NULL AND case_id IS NOT NULL
      AND (getvariable('campaign') IS NULL OR campaign_id = getvariable('campaign'))
      AND (getvariable('evaluation_profile') IS NULL OR evaluation_profile_id = getvariable('evaluation_profile'))
), per_case AS (
    SELECT campaign_id, model_id, case_id,
           avg(final_score) AS score,
           bool_and(passed) AS passed
    FROM results
    WHERE (getvariable('campaign') IS NULL OR campaign_id = getvariable('campaign'))
      AND (getvariable('evaluation_profile') IS NULL OR evaluation_profile_id = getvariable('evaluation_profile'))
    GROUP BY ALL
), scores AS (
    SELECT campaign_id, model_id,
           count(score)                                                    AS scored,
           avg(score)                                                      AS mean_score,
           avg(CASE WHEN passed THEN 1.0 WHEN NOT passed THEN 0.0 END)    AS pass_rate,
           stddev_samp(score)                                              AS score_sd,
           count(passed)                                                   AS verdicts,
           count(*) FILTER (WHERE passed)                                  AS passes
    FROM per_case
    GROUP BY ALL
), spent AS (
    SELECT campaign_id, model_id,
           count(DISTINCT case_id)                                          AS cases,
           CASE WHEN count(*) FILTER (WHERE kind = 'run' AND cost_usd IS NULL) = 0
                THEN coalesce(sum(cost_usd) FILTER (WHERE kind = 'run'), 0) END  AS run_cost_usd,
           CASE WHEN count(*) FILTER (WHERE kind <> 'run' AND cost_usd IS NULL) = 0
                THEN coalesce(sum(cost_usd) FILTER (WHERE kind <> 'run'), 0) END AS eval_cost_usd,
           count(*) FILTER (WHERE cost_source = 'priced')                   AS cost_priced,
           count(*) FILTER (WHERE cost_usd IS NULL)                         AS cost_unknown,
           avg(latency_s) FILTER (WHERE kind = 'run')                       AS mean_latency_s
    FROM picked
    GROUP BY ALL
)
SELECT spent.campaign_id,
       spent.model_id,
       spent.cases,
       coalesce(scores.scored, 0)                              AS scored,
       round(scores.mean_score, 3)                             AS mean_score,
       round(scores.pass_rate, 3)                              AS pass_rate,
       -- (NULL below two scored cases: greatest() and least() pass over a NULL, and read it as 0 and 10)
       CASE WHEN scores.scored >= 2 THEN round(greatest(0, scores.mean_score - t975(scores.scored - 1)
                                                        * scores.score_sd / sqrt(scores.scored)), 3) END
                                                               AS score_low,
       CASE WHEN scores.scored >= 2 THEN round(least(10, scores.mean_score + t975(scores.scored - 1)
                                                     * scores.score_sd / sqrt(scores.scored)), 3) END
                                                               AS score_high,
       round(wilson_low(scores.passes, scores.verdicts), 3)    AS pass_low,
       round(wilson_high(scores.passes, scores.verdicts), 3)   AS pass_high,
       round(spent.run_cost_usd, 10)                           AS run_cost_usd,
       round(spent.eval_cost_usd, 10)                          AS eval_cost_usd,
       round(spent.run_cost_usd + spent.eval_cost_usd, 10)     AS total_cost_usd,
       spent.cost_priced,
       spent.cost_unknown,
       round(spent.mean_latency_s, 2)                          AS mean_latency_s
FROM spent LEFT JOIN scores USING (campaign_id, model_id)
ORDER BY spent.campaign_id, mean_score DESC NULLS LAST, spent.model_id;
