-- 0008_retry_waits: a shard whose only work left is retries due later hands its wait to the
-- scheduler instead of holding one of its worker's shard slots (HERALD_RETRY_HOLD_SECONDS).
--
-- Applied by `herald migrate` inside one transaction; forward-only.

-- The shard message waits in scheduled_jobs (reason 'retry') and is produced to herald.shards
-- (lane 'shards') or herald.shards.urgent ('shards-urgent') when its first retry falls due.
-- shard_no names the shard; -1 on a job's own releases (campaign, urgent lanes). It is part
-- of the release key: two shards of one job may wait until the same second.
ALTER TABLE scheduled_jobs
    ADD COLUMN shard_no integer NOT NULL DEFAULT -1,
    DROP CONSTRAINT scheduled_jobs_release_key,
    ADD CONSTRAINT scheduled_jobs_release_key UNIQUE (job_id, reason, due_at, shard_no),
    DROP CONSTRAINT scheduled_jobs_lane_check,
    ADD CONSTRAINT scheduled_jobs_lane_check CHECK (lane IN ('campaign', 'urgent', 'shards', 'shards-urgent')),
    ADD CONSTRAINT scheduled_jobs_shard_no_check CHECK (
        (lane IN ('shards', 'shards-urgent') AND shard_no >= 0 AND reason = 'retry')
        OR (lane IN ('campaign', 'urgent') AND shard_no = -1));

COMMENT ON TABLE scheduled_jobs IS
    'Work to produce to Kafka at due_at: job messages to herald.jobs (or herald.jobs.urgent), and shards waiting for their retries to herald.shards (or herald.shards.urgent). The scheduler claims due rows with FOR UPDATE SKIP LOCKED, produces them, and deletes them after the broker acknowledges.';
COMMENT ON COLUMN scheduled_jobs.lane IS 'campaign -> herald.jobs, urgent -> herald.jobs.urgent, shards -> herald.shards, shards-urgent -> herald.shards.urgent.';
COMMENT ON COLUMN scheduled_jobs.shard_no IS 'For a shard waiting for its retries (lanes shards, shards-urgent; reason retry): the shard; the body is its shard message. -1 otherwise.';
COMMENT ON COLUMN scheduled_jobs.body IS 'The job (or shard) message to produce, exactly as it will be sent to Kafka (a job may narrow the audience, e.g. to the zones due at this instant).';
