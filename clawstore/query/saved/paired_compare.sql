-- paired_compare: campaign B against campaign A over the (model, case) pairs both hold: per model, the mean of
-- B - A of the case scores (each the mean of its repetitions' final scores, as `claw report`), its 95 %
-- t-interval (mean ± t975(n-1)·sd/√n of the case differences) and the minimum detectable effect at 80 % power,
-- (t975(n-1) + 0.8416)·sd/√n (`claw compare` takes t(0.8, n-1) for 0.8416: 0.02 more at 20 cases).
-- Give --param a=<campaign_id> --param b=<campaign_id>. `claw compare` computes the same per model on the mean
-- of the judge scores, with a bootstrap of the cases and a permutation p-value, and adjusts for several models
-- (docs/compare.md); this is the analytic version, unadjusted.
WITH per_case AS (
    SELECT campaign_id, model_id, case_id, avg(final_score) AS score
    FROM results
    WHERE campaign_id IN (getvariable('a'), getvariable('b')) AND final_score IS NOT NULL
    GROUP BY ALL
), diffs AS (
    SELECT a.model_id, a.case_id, b.score - a.score AS d
    FROM per_case a JOIN per_case b USING (model_id, case_id)
    WHERE a.campaign_id = getvariable('a') AND b.campaign_id = getvariable('b')
)
SELECT model_id,
       count(*)                                                                  AS cases,
       round(avg(d), 4)                                                          AS delta,
       round(avg(d) - t975(count(*) - 1) * stddev_samp(d) / sqrt(count(*)), 4)   AS low,
       round(avg(d) + t975(count(*) - 1) * stddev_samp(d) / sqrt(count(*)), 4)   AS high,
       round((t975(count(*) - 1) + 0.841621) * stddev_samp(d) / sqrt(count(*)), 4) AS mde_80
FROM diffs
GROUP BY ALL
ORDER BY delta, model_id;
