-- pass_at_k: per campaign and model with run repetitions and a pass threshold, over the cases judged k times
-- (k: the most repetitions of one case): pass@k, the share of cases passed at least once in k runs, and pass^k,
-- the share passed all k times, each with its Wilson interval. Narrow with --param campaign=<campaign_id>.
WITH per_case AS (
    SELECT campaign_id, model_id, case_id, count(passed) AS k, bool_or(passed) AS any_pass, bool_and(passed) AS all_pass
    FROM results
    WHERE passed IS NOT NULL AND (getvariable('campaign') IS NULL OR campaign_id = getvariable('campaign'))
    GROUP BY ALL
), complete AS (
    SELECT p.* FROM per_case p
    JOIN (SELECT campaign_id, model_id, max(k) AS k FROM per_case GROUP BY ALL) m USING (campaign_id, model_id, k)
    WHERE p.k >= 2
)
SELECT campaign_id,
       model_id,
       any_value(k)                                                          AS k,
       count(*)                                                              AS cases,
       round(avg(any_pass::INTEGER), 3)                                      AS pass_at_k,
       round(wilson_low(count(*) FILTER (WHERE any_pass), count(*)), 3)      AS pass_at_k_low,
       round(wilson_high(count(*) FILTER (WHERE any_pass), count(*)), 3)     AS pass_at_k_high,
       round(avg(all_pass::INTEGER), 3)                                      AS pass_all_k,
       round(wilson_low(count(*) FILTER (WHERE all_pass), count(*)), 3)      AS pass_all_k_low,
       round(wilson_high(count(*) FILTER (WHERE all_pass), count(*)), 3)     AS pass_all_k_high
FROM complete
GROUP BY ALL
ORDER BY campaign_id, pass_at_k DESC, model_id;
