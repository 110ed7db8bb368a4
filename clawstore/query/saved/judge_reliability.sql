-- judge_reliability: per campaign, judge plan and dimension, how far the judge's repetitions of one run agree.
-- runs: runs judged two or more times; mean_abs_diff: mean over runs of the mean |x_i - x_j| over pairs of
-- repetitions; icc: one-way ICC(1) = (MSB - MSW) / (MSB + (k0 - 1)·MSW); verdict_flips: share of runs where one
-- repetition's overall score reaches the pass threshold and another's does not (docs/query.md, "Intervals").
WITH scored AS (
    SELECT j.campaign_id, j.run_key, j.judge_run_id, j.judge_repetition, dimension, score
    FROM (UNPIVOT (SELECT campaign_id, run_key, judge_run_id, judge_repetition, overall_score AS overall, task,
                          process, autonomy, closeness, efficiency, spark FROM judgements)
          ON overall, task, process, autonomy, closeness, efficiency, spark INTO NAME dimension VALUE score) AS j
), runs AS (
    SELECT campaign_id, judge_run_id, dimension, run_key, count(*) AS k, avg(score) AS mean, min(score) AS lo,
           max(score) AS hi
    FROM scored GROUP BY ALL HAVING count(*) >= 2
), pairs AS (
    SELECT x.campaign_id, x.judge_run_id, x.dimension, x.run_key, avg(abs(x.score - y.score)) AS mad
    FROM scored x JOIN scored y USING (campaign_id, run_key, judge_run_id, dimension)
    WHERE x.judge_repetition < y.judge_repetition
    GROUP BY ALL
), within AS (
    SELECT s.campaign_id, s.judge_run_id, s.dimension, sum((s.score - r.mean) ^ 2) AS ss_within
    FROM scored s JOIN runs r USING (campaign_id, judge_run_id, dimension, run_key)
    GROUP BY ALL
), thresholds AS (
    SELECT campaign_id, run_key, round(10 * any_value(pass_threshold), 9) AS threshold
    FROM results WHERE pass_threshold IS NOT NULL GROUP BY ALL
), plans AS (
    SELECT r.campaign_id, r.judge_run_id, r.dimension,
           count(*)                                                     AS runs,
           max(r.k)                                                     AS judge_repetitions,
           sum(r.k)                                                     AS total,
           sum(r.k * r.k)                                               AS total_sq,
           sum(r.k * r.mean) / sum(r.k)                                 AS grand,
           avg(p.mad)                                                   AS mean_abs_diff,
           avg(CASE WHEN r.dimension <> 'overall' OR t.threshold IS NULL THEN NULL
                    WHEN r.lo < t.threshold AND r.hi >= t.threshold THEN 1.0 ELSE 0.0 END) AS verdict_flips
    FROM runs r JOIN pairs p USING (campaign_id, judge_run_id, dimension, run_key)
    LEFT JOIN thresholds t USING (campaign_id, run_key)
    GROUP BY ALL
), squares AS (
    SELECT pl.*, w.ss_within / (pl.total - pl.runs) AS msw,
           (SELECT sum(r.k * (r.mean - pl.grand) ^ 2) FROM runs r
            WHERE r.campaign_id = pl.campaign_id AND r.judge_run_id = pl.judge_run_id AND r.dimension = pl.dimension)
           / nullif(pl.runs - 1, 0) AS msb,
           (pl.total - pl.total_sq / pl.total) / nullif(pl.runs - 1, 0) AS k0
    FROM plans pl JOIN within w USING (campaign_id, judge_run_id, dimension)
)
SELECT campaign_id,
       judge_run_id,
       dimension,
       runs,
       judge_repetitions,
       round(mean_abs_diff, 3)                                           AS mean_abs_diff,
       round((msb - msw) / nullif(msb + (k0 - 1) * msw, 0), 3)            AS icc,
       round(verdict_flips, 3)                                           AS verdict_flips
FROM squares
ORDER BY campaign_id, judge_run_id,
         array_position(['overall', 'task', 'process', 'autonomy', 'closeness', 'efficiency', 'spark'], dimension);
