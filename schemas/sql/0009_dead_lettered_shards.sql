-- 0009_dead_lettered_shards: a shard whose run failed for good (its own statement refused or
-- timed out every time, or a temporary failure outlasted HERALD_MESSAGE_RETRY_SECONDS) is
-- dead-lettered instead of retried without end; its row says so, and the job completes without
-- its unsent rest.
--
-- Applied by `herald migrate` inside one transaction; forward-only.

ALTER TABLE job_shards
    DROP CONSTRAINT job_shards_state_check,
    ADD CONSTRAINT job_shards_state_check CHECK (state IN ('pending', 'running', 'finished', 'cancelled', 'dead-lettered')),
    DROP CONSTRAINT job_shards_finished_check,
    ADD CONSTRAINT job_shards_finished_check CHECK (state NOT IN ('finished', 'dead-lettered') OR finished_at IS NOT NULL);

COMMENT ON COLUMN job_shards.state IS
    'pending (planned, not claimed), running (claimed; see the lease), finished, cancelled, or dead-lettered (its run failed for good; the counts are what it sent, its message is on the dead-letter topic).';
