-- dimension_scores: per campaign, model and dimension, the mean final score over cases with its 95 % interval.
-- A case's value is the mean over its run repetitions; low/high: mean ± t975(n-1)·sd/√n, clipped to 0-10.
-- Narrow with --param campaign=<campaign_id>.
WITH per_case AS (
    SELECT campaign_id, model_id, case_id, dimension, avg(score) AS score
    FROM (UNPIVOT (SELECT campaign_id, model_id, case_id, task, process, autonomy, closeness, efficiency, spark
                   FROM results
                   WHERE getvariable('campaign') IS NULL OR campaign_id = getvariable('campaign'))
          ON task, process, autonomy, closeness, efficiency, spark INTO NAME dimension VALUE score)
    GROUP BY ALL
)
SELECT campaign_id,
       model_id,
       dimension,
       count(score)                                                                        AS n,
       round(avg(score), 3)                                                                AS mean,
       -- (NULL below two cases: greatest() and least() pass over a NULL, and read it as 0 and 10)
       CASE WHEN count(score) >= 2 THEN round(greatest(0, avg(score) - t975(count(score) - 1) * stddev_samp(score)
                                                       / sqrt(count(score))), 3) END                      AS low,
       CASE WHEN count(score) >= 2 THEN round(least(10, avg(score) + t975(count(score) - 1) * stddev_samp(score)
                                                    / sqrt(count(score))), 3) END                         AS high
FROM per_case
GROUP BY campaign_id, model_id, dimension
ORDER BY campaign_id, model_id, array_position(['task', 'process', 'autonomy', 'closeness', 'efficiency', 'spark'],
                                               dimension);
