-- failures: every node of a current campaign head that failed (infrastructure, or the model's invalid or incomplete output), with its error.
-- A checks node whose checks merely failed is a verdict on the model, not a failure, and is left out.
SELECT kind,
       model_id,
       case_id,
       repetition,
       judge_run_id,
       judge_repetition,
       status,
       action,
       error_code,
       error_message,
       build_id,
       campaign_id,
       key
FROM nodes
WHERE action = 'fail'
   OR error_code IS NOT NULL
   OR status IN ('invalid', 'incomplete', 'provider_error', 'timed_out', 'error')
   OR (status = 'failed' AND kind <> 'checks')
ORDER BY build_started_at DESC, kind, model_id, case_id, repetition, judge_run_id, judge_repetition;
