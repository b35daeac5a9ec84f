-- 0002_live_activities: live activities, their numbering mark, and their push tokens.
--
-- Applied by `herald migrate` inside one transaction; forward-only.

CREATE TABLE live_activities (
    app_id             text        NOT NULL,
    activity_id        text        NOT NULL,
    current_stream_id  text,
    last_sequence      bigint,
    last_timestamp     bigint,
    ended_at           timestamptz,
    attributes_type    text,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),

    CONSTRAINT live_activities_pkey PRIMARY KEY (app_id, activity_id),
    CONSTRAINT live_activities_app_id_fkey FOREIGN KEY (app_id) REFERENCES apps (id) ON DELETE CASCADE,
    CONSTRAINT live_activities_activity_id_check CHECK (char_length(activity_id) BETWEEN 1 AND 256),
    -- The numbering mark is a pair: a stream and the last sequence accepted on it.
    CONSTRAINT live_activities_mark_check CHECK ((current_stream_id IS NULL) = (last_sequence IS NULL)),
    CONSTRAINT live_activities_current_stream_id_check CHECK (char_length(current_stream_id) BETWEEN 1 AND 256),
    CONSTRAINT live_activities_last_sequence_check CHECK (last_sequence >= 0),
    CONSTRAINT live_activities_last_timestamp_check CHECK (last_timestamp >= 0),
    CONSTRAINT live_activities_attributes_type_check CHECK (char_length(attributes_type) BETWEEN 1 AND 256)
);

COMMENT ON TABLE live_activities IS
    'One iOS live activity and its numbering mark. Updates are checked and the mark moved in one atomic UPDATE ... WHERE ... RETURNING.';
COMMENT ON COLUMN live_activities.activity_id IS 'The job''s live_activity.activity_id; the Kafka key of its jobs is app_id/activity_id.';
COMMENT ON COLUMN live_activities.current_stream_id IS 'Stream of the numbering mark: a server session id, or ''direct'' for session-less test sends numbered by clock. An update on another stream replaces the mark.';
COMMENT ON COLUMN live_activities.last_sequence IS 'Last sequence accepted on current_stream_id; an update on that stream with sequence <= this is dropped as stale-sequence.';
COMMENT ON COLUMN live_activities.last_timestamp IS 'Last APNs aps.timestamp sent (Unix seconds); the next one is never lower.';
COMMENT ON COLUMN live_activities.ended_at IS 'When an end event was accepted; later updates are dropped with reason ended.';
COMMENT ON COLUMN live_activities.attributes_type IS 'ActivityAttributes type name given at start (selects the push-to-start token).';

-- Per-activity push tokens (the token ActivityKit hands the app for one running activity).
-- The live_activities row must exist first (upsert it with ON CONFLICT DO NOTHING).
CREATE TABLE activity_tokens (
    app_id           text        NOT NULL,
    activity_id      text        NOT NULL,
    subscription_id  uuid        NOT NULL,
    token            text        NOT NULL,
    invalidated_at   timestamptz,
    updated_at       timestamptz NOT NULL DEFAULT now(),

    CONSTRAINT activity_tokens_pkey PRIMARY KEY (app_id, activity_id, subscription_id),
    CONSTRAINT activity_tokens_activity_fkey FOREIGN KEY (app_id, activity_id)
        REFERENCES live_activities (app_id, activity_id) ON DELETE CASCADE,
    CONSTRAINT activity_tokens_subscription_fkey FOREIGN KEY (app_id, subscription_id)
        REFERENCES subscriptions (app_id, id) ON DELETE CASCADE,
    CONSTRAINT activity_tokens_token_check CHECK (token <> '')
);

COMMENT ON TABLE activity_tokens IS
    'APNs push token of one running live activity on one device; update and end events go to every valid token of the activity.';
COMMENT ON COLUMN activity_tokens.invalidated_at IS 'Set on an unregistered answer; such tokens are skipped.';

-- Serves the ON DELETE CASCADE from subscriptions (the primary key leads with activity_id).
CREATE INDEX activity_tokens_subscription_idx ON activity_tokens (app_id, subscription_id);

CREATE TABLE push_to_start_tokens (
    app_id           text        NOT NULL,
    subscription_id  uuid        NOT NULL,
    attributes_type  text        NOT NULL,
    token            text        NOT NULL,
    invalidated_at   timestamptz,
    updated_at       timestamptz NOT NULL DEFAULT now(),

    CONSTRAINT push_to_start_tokens_pkey PRIMARY KEY (app_id, subscription_id, attributes_type),
    CONSTRAINT push_to_start_tokens_subscription_fkey FOREIGN KEY (app_id, subscription_id)
        REFERENCES subscriptions (app_id, id) ON DELETE CASCADE,
    CONSTRAINT push_to_start_tokens_attributes_type_check CHECK (char_length(attributes_type) BETWEEN 1 AND 256),
    CONSTRAINT push_to_start_tokens_token_check CHECK (token <> '')
);

COMMENT ON TABLE push_to_start_tokens IS
    'APNs push-to-start token of a device for one ActivityAttributes type (iOS 17.2+); a start event goes to these.';
COMMENT ON COLUMN push_to_start_tokens.attributes_type IS 'ActivityAttributes type name the token can start; matches the job''s live_activity.attributes_type.';
COMMENT ON COLUMN push_to_start_tokens.invalidated_at IS 'Set on an unregistered answer; such tokens are skipped.';
