-- 0007_scheduling: sub-jobs of scheduled jobs, and the shared token buckets of throttled jobs.
--
-- Applied by `herald migrate` inside one transaction; forward-only.

-- A job with delivery.send_after, local_time, respect_quiet_hours or best_hour is planned into
-- sub-jobs (`<job>:tz:3`, ...), each a jobs row of its own with an explicit audience, released
-- by the scheduler from scheduled_jobs. parent_id names the job the user sent: receipts are
-- reported under it, and its `completed` event sums its sub-jobs once all of them completed.
ALTER TABLE jobs
    ADD COLUMN parent_id text,
    ADD CONSTRAINT jobs_parent_id_fkey FOREIGN KEY (parent_id) REFERENCES jobs (id) ON DELETE CASCADE,
    ADD CONSTRAINT jobs_parent_id_check CHECK (parent_id IS NULL OR parent_id <> id);

CREATE INDEX jobs_parent_id_idx ON jobs (parent_id) WHERE parent_id IS NOT NULL;

COMMENT ON COLUMN jobs.parent_id IS 'For a sub-job Herald derived from a scheduled job: the job the user sent (receipts are reported under it). NULL for jobs received from upstream.';

-- delivery.throttle_per_minute: one bucket per job (the parent, for sub-jobs) shared by every
-- shard on every worker. A shard takes small batches of tokens; a shard that finishes puts what
-- it did not use back, so the others speed up.
CREATE TABLE job_throttles (
    job_id      text             NOT NULL,
    per_minute  bigint           NOT NULL,
    tokens      double precision NOT NULL,
    capacity    double precision NOT NULL,
    refilled_at timestamptz      NOT NULL,

    CONSTRAINT job_throttles_pkey PRIMARY KEY (job_id),
    CONSTRAINT job_throttles_job_id_fkey FOREIGN KEY (job_id) REFERENCES jobs (id) ON DELETE CASCADE,
    CONSTRAINT job_throttles_per_minute_check CHECK (per_minute > 0),
    CONSTRAINT job_throttles_tokens_check CHECK (tokens >= 0 AND tokens <= capacity),
    CONSTRAINT job_throttles_capacity_check CHECK (capacity >= 1)
);

COMMENT ON TABLE job_throttles IS
    'Token bucket of a job with delivery.throttle_per_minute, shared by all its shards and workers: refilled at per_minute/60 tokens a second up to capacity (a fifth of a second of sends, so no 10-second window overshoots by more than a few percent).';

-- Per-app provider rate ceilings (sends a minute, all workers together); NULL = the workers'
-- HERALD_APNS_RATE_PER_MINUTE / HERALD_FCM_RATE_PER_MINUTE, 0 = no ceiling for this app.
ALTER TABLE apps
    ADD COLUMN apns_rate_per_minute bigint,
    ADD COLUMN fcm_rate_per_minute  bigint,
    ADD CONSTRAINT apps_rate_per_minute_check CHECK (apns_rate_per_minute >= 0 AND fcm_rate_per_minute >= 0);

COMMENT ON COLUMN apps.apns_rate_per_minute IS 'APNs sends a minute for this app across all workers; NULL = HERALD_APNS_RATE_PER_MINUTE, 0 = none.';
COMMENT ON COLUMN apps.fcm_rate_per_minute IS 'FCM sends a minute for this app (its Firebase project quota) across all workers; NULL = HERALD_FCM_RATE_PER_MINUTE, 0 = none.';

-- Workers announce themselves so each can enforce its share of a provider's rate ceiling.
CREATE TABLE worker_heartbeats (
    worker_id  text        NOT NULL,
    seen_at    timestamptz NOT NULL,

    CONSTRAINT worker_heartbeats_pkey PRIMARY KEY (worker_id)
);

COMMENT ON TABLE worker_heartbeats IS
    'Each worker''s scheduler writes seen_at every few seconds; workers seen in the last 30 s share the per-app provider rate ceilings equally.';
