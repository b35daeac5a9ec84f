-- 0003_delivery: jobs, their shards and parked retries, scheduled releases, device-event dedupe.
--
-- Applied by `herald migrate` inside one transaction; forward-only.

-- ---------------------------------------------------------------------------------------------
-- jobs
-- ---------------------------------------------------------------------------------------------

CREATE TABLE jobs (
    id                 text        NOT NULL,
    app_id             text        NOT NULL,
    kind               text        NOT NULL,
    body               jsonb       NOT NULL,
    state              text        NOT NULL DEFAULT 'received',
    audience_estimate  bigint,
    shard_count        integer,
    urgent             boolean     NOT NULL DEFAULT false,
    created_at         timestamptz NOT NULL,
    received_at        timestamptz NOT NULL DEFAULT now(),
    planned_at         timestamptz,
    completed_at       timestamptz,
    cancelled_at       timestamptz,
    expires_at         timestamptz,
    accepted           bigint      NOT NULL DEFAULT 0,
    unregistered       bigint      NOT NULL DEFAULT 0,
    failed             bigint      NOT NULL DEFAULT 0,
    dropped            bigint      NOT NULL DEFAULT 0,

    CONSTRAINT jobs_pkey PRIMARY KEY (id),
    CONSTRAINT jobs_app_id_fkey FOREIGN KEY (app_id) REFERENCES apps (id) ON DELETE CASCADE,
    CONSTRAINT jobs_id_check CHECK (id ~ '^[A-Za-z0-9._:-]{1,64}$'),
    CONSTRAINT jobs_kind_check CHECK (kind IN ('notification', 'live_activity', 'voip')),
    CONSTRAINT jobs_body_check CHECK (jsonb_typeof(body) = 'object'),
    CONSTRAINT jobs_state_check CHECK (state IN
        ('received', 'scheduled', 'planned', 'running', 'completed', 'cancelled', 'halted', 'expired')),
    CONSTRAINT jobs_audience_estimate_check CHECK (audience_estimate >= 0),
    CONSTRAINT jobs_shard_count_check CHECK (shard_count >= 0),
    CONSTRAINT jobs_completed_check CHECK (state <> 'completed' OR completed_at IS NOT NULL),
    CONSTRAINT jobs_cancelled_check CHECK (state <> 'cancelled' OR cancelled_at IS NOT NULL),
    CONSTRAINT jobs_totals_check CHECK (accepted >= 0 AND unregistered >= 0 AND failed >= 0 AND dropped >= 0)
);

COMMENT ON TABLE jobs IS
    'Every job Herald has accepted, keyed by its idempotency key: replaying a job id never fans out twice because this row decides.';
COMMENT ON COLUMN jobs.id IS 'The job''s idempotency key ([A-Za-z0-9._:-]{1,64}), global across apps.';
COMMENT ON COLUMN jobs.body IS 'The validated job (herald.job.v1) as received; shards re-read it from here.';
COMMENT ON COLUMN jobs.state IS 'received -> scheduled | planned -> running -> completed; or cancelled, halted (provider credential fault), expired (expires_at passed).';
COMMENT ON COLUMN jobs.audience_estimate IS 'Audience size estimated at planning (the planned event); not an exact count.';
COMMENT ON COLUMN jobs.shard_count IS 'Number of job_shards rows created at planning; NULL before planning.';
COMMENT ON COLUMN jobs.urgent IS 'delivery.urgent: the job and its shards travel on the urgent lane.';
COMMENT ON COLUMN jobs.created_at IS 'created_at from the job itself (set by the upstream API), not when Herald saw it.';
COMMENT ON COLUMN jobs.received_at IS 'When Herald first stored the job; retention deletes by this.';
COMMENT ON COLUMN jobs.accepted IS 'Terminal receipt totals, summed from the shards; published in the completed event.';

-- Retention: DELETE FROM jobs WHERE received_at < $cutoff AND state IN (terminal states) ...
-- (cascades to job_shards, shard_retries and scheduled_jobs). Only terminal jobs may be deleted:
-- a job scheduled further ahead than the retention would otherwise lose its scheduled_jobs rows.
CREATE INDEX jobs_received_at_idx ON jobs (received_at);
-- Per-app job listings (herald jobs, tail) and the ON DELETE CASCADE from apps.
CREATE INDEX jobs_app_id_received_at_idx ON jobs (app_id, received_at);

-- ---------------------------------------------------------------------------------------------
-- job_shards
-- ---------------------------------------------------------------------------------------------

CREATE TABLE job_shards (
    job_id            text        NOT NULL,
    shard_no          integer     NOT NULL,
    shard_count       integer     NOT NULL,
    id_from           uuid        NOT NULL,
    id_to             uuid,
    cursor            uuid,
    sent              bigint      NOT NULL DEFAULT 0,
    accepted          bigint      NOT NULL DEFAULT 0,
    unregistered      bigint      NOT NULL DEFAULT 0,
    failed            bigint      NOT NULL DEFAULT 0,
    dropped           bigint      NOT NULL DEFAULT 0,
    state             text        NOT NULL DEFAULT 'pending',
    lease_holder      text,
    lease_expires_at  timestamptz,
    claims            integer     NOT NULL DEFAULT 0,
    created_at        timestamptz NOT NULL DEFAULT now(),
    started_at        timestamptz,
    finished_at       timestamptz,
    checkpoint_at     timestamptz,

    CONSTRAINT job_shards_pkey PRIMARY KEY (job_id, shard_no),
    CONSTRAINT job_shards_job_id_fkey FOREIGN KEY (job_id) REFERENCES jobs (id) ON DELETE CASCADE,
    CONSTRAINT job_shards_shard_no_check CHECK (shard_no >= 0 AND shard_no < shard_count),
    CONSTRAINT job_shards_id_range_check CHECK (id_to IS NULL OR id_to > id_from),
    CONSTRAINT job_shards_cursor_check CHECK (
        cursor IS NULL OR (cursor >= id_from AND (id_to IS NULL OR cursor < id_to))
    ),
    CONSTRAINT job_shards_counts_check CHECK (
        sent >= 0 AND accepted >= 0 AND unregistered >= 0 AND failed >= 0 AND dropped >= 0
    ),
    CONSTRAINT job_shards_state_check CHECK (state IN ('pending', 'running', 'finished', 'cancelled')),
    CONSTRAINT job_shards_lease_check CHECK ((lease_holder IS NULL) = (lease_expires_at IS NULL)),
    CONSTRAINT job_shards_lease_holder_check CHECK (lease_holder <> ''),
    CONSTRAINT job_shards_claims_check CHECK (claims >= 0),
    CONSTRAINT job_shards_finished_check CHECK (state <> 'finished' OR finished_at IS NOT NULL)
);

COMMENT ON TABLE job_shards IS
    'One slice of a job''s audience by subscription id range, claimed under a lease and checkpointed as it goes.';
COMMENT ON COLUMN job_shards.shard_count IS 'Shards of the job (copied from the shard message); shard_no < shard_count.';
COMMENT ON COLUMN job_shards.id_from IS 'Lowest subscription id of the shard, inclusive.';
COMMENT ON COLUMN job_shards.id_to IS 'Upper bound of subscription ids, exclusive; NULL = no upper bound (the last shard).';
COMMENT ON COLUMN job_shards.cursor IS 'Checkpoint: the last subscription id handed to a provider whose receipts are acknowledged. A resumed shard continues after it; NULL = from id_from.';
COMMENT ON COLUMN job_shards.sent IS 'Requests handed to a provider so far (including retries still parked).';
COMMENT ON COLUMN job_shards.lease_holder IS 'Worker instance that holds the claim; another may take over once lease_expires_at has passed.';
COMMENT ON COLUMN job_shards.lease_expires_at IS 'End of the 30 s lease, renewed by every checkpoint.';
COMMENT ON COLUMN job_shards.claims IS 'How many times the shard was claimed; > 1 means it was resumed after a crash or rebalance.';
COMMENT ON COLUMN job_shards.checkpoint_at IS 'Time of the last checkpoint (cursor + counts + parked retries written together).';

-- ---------------------------------------------------------------------------------------------
-- shard_retries
-- ---------------------------------------------------------------------------------------------

CREATE TABLE shard_retries (
    job_id            text        NOT NULL,
    shard_no          integer     NOT NULL,
    subscription_id   uuid        NOT NULL,
    attempts          integer     NOT NULL DEFAULT 1,
    next_attempt_at   timestamptz NOT NULL,
    last_reason       text,
    first_attempt_at  timestamptz NOT NULL DEFAULT now(),

    CONSTRAINT shard_retries_pkey PRIMARY KEY (job_id, shard_no, subscription_id),
    CONSTRAINT shard_retries_shard_fkey FOREIGN KEY (job_id, shard_no)
        REFERENCES job_shards (job_id, shard_no) ON DELETE CASCADE,
    CONSTRAINT shard_retries_attempts_check CHECK (attempts >= 1)
);

COMMENT ON TABLE shard_retries IS
    'Subscriptions of a shard parked for a retry (429, 5xx, connection loss), written at the checkpoint so the cursor can move past them and a crash loses none. No FK to subscriptions: this is a hot write path.';
COMMENT ON COLUMN shard_retries.attempts IS 'Attempts made so far; at the configured maximum (default 8) the subscription fails with retries-exhausted.';
COMMENT ON COLUMN shard_retries.next_attempt_at IS 'Earliest next attempt: exponential backoff with jitter, or Retry-After.';
COMMENT ON COLUMN shard_retries.last_reason IS 'Reason of the last failed attempt (receipt reason vocabulary).';
COMMENT ON COLUMN shard_retries.first_attempt_at IS 'First attempt; with the maximum age (default 24 h) or expires_at it bounds retrying.';

CREATE INDEX shard_retries_due_idx ON shard_retries (job_id, shard_no, next_attempt_at);

-- ---------------------------------------------------------------------------------------------
-- scheduled_jobs
-- ---------------------------------------------------------------------------------------------

CREATE TABLE scheduled_jobs (
    id          bigint      GENERATED ALWAYS AS IDENTITY,
    job_id      text        NOT NULL,
    app_id      text        NOT NULL,
    due_at      timestamptz NOT NULL,
    lane        text        NOT NULL,
    body        jsonb       NOT NULL,
    reason      text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),

    CONSTRAINT scheduled_jobs_pkey PRIMARY KEY (id),
    -- One row per (job, why, when). Re-planning the same job computes the same rows, so
    -- INSERT ... ON CONFLICT ON CONSTRAINT scheduled_jobs_release_key DO NOTHING is idempotent.
    -- due_at is part of the key because one job has many rows for one reason (local-time: one
    -- per distinct UTC instant; zones sharing an offset share it).
    CONSTRAINT scheduled_jobs_release_key UNIQUE (job_id, reason, due_at),
    CONSTRAINT scheduled_jobs_job_id_fkey FOREIGN KEY (job_id) REFERENCES jobs (id) ON DELETE CASCADE,
    CONSTRAINT scheduled_jobs_app_id_fkey FOREIGN KEY (app_id) REFERENCES apps (id) ON DELETE CASCADE,
    -- Whole seconds, so a recomputed due_at cannot differ by sub-second noise and slip past
    -- the unique key as a second row.
    CONSTRAINT scheduled_jobs_due_at_check CHECK (due_at = date_trunc('second', due_at)),
    CONSTRAINT scheduled_jobs_lane_check CHECK (lane IN ('campaign', 'urgent')),
    CONSTRAINT scheduled_jobs_body_check CHECK (jsonb_typeof(body) = 'object'),
    CONSTRAINT scheduled_jobs_reason_check CHECK (reason IN
        ('send-after', 'local-time', 'quiet-hours', 'best-hour', 'retry'))
);

COMMENT ON TABLE scheduled_jobs IS
    'Work to produce to herald.jobs (or herald.jobs.urgent) at due_at. The scheduler claims due rows with FOR UPDATE SKIP LOCKED, produces them, and deletes them after the broker acknowledges.';
COMMENT ON COLUMN scheduled_jobs.job_id IS 'The jobs row this release belongs to; cancelling or deleting the job removes its pending releases.';
COMMENT ON COLUMN scheduled_jobs.due_at IS 'When to produce the body; whole seconds, computed only from the job and the calendar (never now() or random jitter) so re-planning yields the same value.';
COMMENT ON COLUMN scheduled_jobs.lane IS 'campaign -> herald.jobs, urgent -> herald.jobs.urgent.';
COMMENT ON COLUMN scheduled_jobs.body IS 'The job message to produce, exactly as it will be sent to Kafka (may narrow the audience, e.g. to the zones due at this instant).';
COMMENT ON COLUMN scheduled_jobs.reason IS 'Why it waits: send-after, local-time, quiet-hours, best-hour, retry.';

CREATE INDEX scheduled_jobs_due_at_idx ON scheduled_jobs (due_at);
COMMENT ON INDEX scheduled_jobs_due_at_idx IS
    'Scheduler claim: WHERE due_at <= now() ORDER BY due_at LIMIT n FOR UPDATE SKIP LOCKED.';

-- ---------------------------------------------------------------------------------------------
-- device_event_seen
-- ---------------------------------------------------------------------------------------------

CREATE TABLE device_event_seen (
    type             text        NOT NULL,
    job_id           text        NOT NULL,
    subscription_id  uuid        NOT NULL,
    action_id        text        NOT NULL DEFAULT '',
    seen_at          timestamptz NOT NULL DEFAULT now(),

    CONSTRAINT device_event_seen_pkey PRIMARY KEY (type, job_id, subscription_id, action_id),
    CONSTRAINT device_event_seen_type_check CHECK (type IN ('received', 'confirmed', 'clicked')),
    CONSTRAINT device_event_seen_job_id_check CHECK (job_id ~ '^[A-Za-z0-9._:-]{1,64}$'),
    CONSTRAINT device_event_seen_action_id_check CHECK (char_length(action_id) <= 256)
);

COMMENT ON TABLE device_event_seen IS
    'Dedupe of device events: INSERT ... ON CONFLICT DO NOTHING; forward to herald.results only when a row was inserted, and commit after the broker acknowledges. No FKs: events may outlive their job''s retention.';
COMMENT ON COLUMN device_event_seen.action_id IS 'Button id of a clicked event; empty string = none (so it can be part of the primary key).';

CREATE INDEX device_event_seen_seen_at_idx ON device_event_seen (seen_at);
