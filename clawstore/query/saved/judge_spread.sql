-- judge_spread: per run and judge plan of the current heads, how far the judge's repetitions disagree (its noise).
SELECT run_key,
       model_id,
       case_id,
       repetition,
       evaluation_profile_id,
       judge_run_id,
       count(*)                                AS judge_reps,
       count(overall_score)                    AS scored,
       min(overall_score)                      AS min_score,
       max(overall_score)                      AS max_score,
       round(max(overall_score) - min(overall_score), 3) AS spread,
       round(stddev_samp(overall_score), 3)    AS stdev
FROM judgements
GROUP BY ALL
ORDER BY spread DESC NULLS LAST, model_id, case_id, repetition;
