-- 0006_channels_v2: notification channels with their Android and iOS sides and a version
-- (issue 9), and what live-activity delivery records (the numbering decision of each job).
--
-- Applied by `herald migrate` inside one transaction; forward-only. One file for both because
-- issue 9 owns one migration number.

-- ---------------------------------------------------------------------------------------------
-- channels: Android side (versioned) and iOS side
-- ---------------------------------------------------------------------------------------------

-- 0001's importance scale was Android's own (min … max); the job contract speaks of
-- low | medium | high | urgent. Existing rows move to the nearest value.
ALTER TABLE channels DROP CONSTRAINT channels_importance_check;
UPDATE channels SET importance = CASE importance
    WHEN 'min' THEN 'low' WHEN 'low' THEN 'low' WHEN 'default' THEN 'medium' WHEN 'high' THEN 'high' ELSE 'urgent' END;
ALTER TABLE channels ALTER COLUMN importance SET DEFAULT 'medium';
ALTER TABLE channels ADD CONSTRAINT channels_importance_check CHECK (importance IN ('low', 'medium', 'high', 'urgent'));

ALTER TABLE channels
    ADD COLUMN sound_mode             text             NOT NULL DEFAULT 'default',
    ADD COLUMN vibration_mode         text             NOT NULL DEFAULT 'default',
    ADD COLUMN vibration_pattern      integer[],
    ADD COLUMN light_mode             text             NOT NULL DEFAULT 'off',
    ADD COLUMN light_colour           text,
    ADD COLUMN lockscreen_visibility  text             NOT NULL DEFAULT 'private',
    ADD COLUMN bypass_dnd             boolean          NOT NULL DEFAULT false,
    ADD COLUMN group_id               text,
    ADD COLUMN android_channel_id     text,
    ADD COLUMN version                integer          NOT NULL DEFAULT 1,
    ADD COLUMN ios_sound              text,
    ADD COLUMN ios_interruption_level text,
    ADD COLUMN ios_relevance_score    double precision,
    ADD COLUMN ios_thread_id          text,
    ADD COLUMN updated_at             timestamptz      NOT NULL DEFAULT now();

UPDATE channels SET
    sound_mode = CASE WHEN sound IS NULL THEN 'default' ELSE 'custom' END,
    vibration_mode = CASE WHEN vibration THEN 'default' ELSE 'off' END,
    light_mode = CASE WHEN lights THEN 'default' ELSE 'off' END;
ALTER TABLE channels DROP COLUMN vibration, DROP COLUMN lights;

ALTER TABLE channels
    ADD CONSTRAINT channels_sound_mode_check CHECK (sound_mode IN ('off', 'default', 'custom')),
    ADD CONSTRAINT channels_sound_custom_check CHECK ((sound_mode = 'custom') = (sound IS NOT NULL)),
    ADD CONSTRAINT channels_vibration_mode_check CHECK (vibration_mode IN ('off', 'default', 'pattern')),
    ADD CONSTRAINT channels_vibration_pattern_check CHECK (
        (vibration_mode = 'pattern') = (vibration_pattern IS NOT NULL)
        AND (vibration_pattern IS NULL OR cardinality(vibration_pattern) BETWEEN 1 AND 64)),
    ADD CONSTRAINT channels_light_mode_check CHECK (light_mode IN ('off', 'default', 'colour')),
    ADD CONSTRAINT channels_light_colour_check CHECK (
        (light_mode = 'colour') = (light_colour IS NOT NULL) AND (light_colour IS NULL OR light_colour ~ '^#[0-9a-f]{6}$')),
    ADD CONSTRAINT channels_lockscreen_visibility_check CHECK (lockscreen_visibility IN ('public', 'private', 'secret')),
    ADD CONSTRAINT channels_group_id_check CHECK (char_length(group_id) BETWEEN 1 AND 64),
    ADD CONSTRAINT channels_android_channel_id_check CHECK (char_length(android_channel_id) BETWEEN 1 AND 128),
    ADD CONSTRAINT channels_version_check CHECK (version >= 1),
    ADD CONSTRAINT channels_ios_sound_check CHECK (char_length(ios_sound) BETWEEN 1 AND 256),
    ADD CONSTRAINT channels_ios_interruption_level_check CHECK (ios_interruption_level IN ('passive', 'active', 'time-sensitive', 'critical')),
    ADD CONSTRAINT channels_ios_relevance_score_check CHECK (ios_relevance_score BETWEEN 0 AND 1),
    ADD CONSTRAINT channels_ios_thread_id_check CHECK (char_length(ios_thread_id) BETWEEN 1 AND 256);

-- Android fixes a channel's settings when the app first creates it: a changed setting needs a
-- new channel id. The version moves with every change of an Android setting, whoever writes
-- the row (Herald's AppRepository or the upstream API), so the id nf_<key>_v<version> moves too.
-- Name and description are left out: Android lets an app rename an existing channel.
CREATE FUNCTION channels_bump_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (NEW.importance, NEW.sound_mode, NEW.sound, NEW.vibration_mode, NEW.vibration_pattern, NEW.light_mode, NEW.light_colour,
        NEW.lockscreen_visibility, NEW.badge, NEW.bypass_dnd, NEW.group_id)
       IS DISTINCT FROM
       (OLD.importance, OLD.sound_mode, OLD.sound, OLD.vibration_mode, OLD.vibration_pattern, OLD.light_mode, OLD.light_colour,
        OLD.lockscreen_visibility, OLD.badge, OLD.bypass_dnd, OLD.group_id) THEN
        NEW.version := OLD.version + 1;
    ELSE
        NEW.version := OLD.version;
    END IF;
    NEW.updated_at := now();
    RETURN NEW;
END;
$$;

CREATE TRIGGER channels_bump_version BEFORE UPDATE ON channels
    FOR EACH ROW EXECUTE FUNCTION channels_bump_version();

COMMENT ON TABLE channels IS
    'Notification channels of an app, named by content.channel (the key, column id). Android side: versioned settings, channel id nf_<key>_v<version> unless android_channel_id pins one. iOS side: applied to the APNs payload.';
COMMENT ON COLUMN channels.importance IS 'Android importance: low, medium, high, urgent (IMPORTANCE_LOW, _DEFAULT, _HIGH, _MAX).';
COMMENT ON COLUMN channels.sound IS 'Android custom sound resource name when sound_mode = custom.';
COMMENT ON COLUMN channels.sound_mode IS 'Android sound: off, default (the platform''s), custom (sound).';
COMMENT ON COLUMN channels.vibration_mode IS 'Android vibration: off, default, pattern (vibration_pattern, milliseconds off/on/off/…).';
COMMENT ON COLUMN channels.light_mode IS 'Android notification LED: off, default, colour (light_colour, #rrggbb).';
COMMENT ON COLUMN channels.lockscreen_visibility IS 'Android lock-screen visibility: public, private, secret.';
COMMENT ON COLUMN channels.badge IS 'Android: show a badge on the launcher icon.';
COMMENT ON COLUMN channels.bypass_dnd IS 'Android: the channel may bypass Do Not Disturb.';
COMMENT ON COLUMN channels.group_id IS 'Android channel group id, if any.';
COMMENT ON COLUMN channels.android_channel_id IS 'An Android channel id the app pinned; NULL = nf_<key>_v<version>.';
COMMENT ON COLUMN channels.version IS 'Starts at 1; a trigger adds 1 whenever an Android setting changes.';
COMMENT ON COLUMN channels.ios_sound IS 'iOS: aps.sound when the job sets no sound.';
COMMENT ON COLUMN channels.ios_interruption_level IS 'iOS: aps.interruption-level when the job sets none.';
COMMENT ON COLUMN channels.ios_relevance_score IS 'iOS: aps.relevance-score (0–1) when the job sets none.';
COMMENT ON COLUMN channels.ios_thread_id IS 'iOS: aps.thread-id when the job sets none.';

-- ---------------------------------------------------------------------------------------------
-- live activities: the numbering decision per job (DESIGN §4)
-- ---------------------------------------------------------------------------------------------

ALTER TABLE live_activities ADD COLUMN last_job_id text;
COMMENT ON COLUMN live_activities.last_job_id IS
    'Job whose update set the mark. The same job checked again (a redelivery after a crash) gets its own decision back instead of stale-sequence.';

ALTER TABLE jobs
    ADD COLUMN live_activity_verdict    text,
    ADD COLUMN live_activity_timestamp  bigint,
    ADD CONSTRAINT jobs_live_activity_verdict_check CHECK (live_activity_verdict IN ('accepted', 'stale-sequence', 'ended')),
    ADD CONSTRAINT jobs_live_activity_timestamp_check CHECK ((live_activity_verdict = 'accepted') = (live_activity_timestamp IS NOT NULL));
COMMENT ON COLUMN jobs.live_activity_verdict IS
    'live_activity jobs: what the numbering check decided (accepted, stale-sequence, ended), recorded before any send so a rerun keeps it.';
COMMENT ON COLUMN jobs.live_activity_timestamp IS 'live_activity jobs: the aps.timestamp (Unix seconds) of an accepted update.';

-- Android subscriptions attach to an activity with an activity_tokens row too (token = the
-- subscription's FCM token when attached; Herald sends to the subscription's current token).
COMMENT ON TABLE activity_tokens IS
    'Subscriptions attached to a live activity. iOS: the APNs push token of the running activity. Android: the subscription''s FCM token when it attached (a start sent to it attaches it); live updates go to the subscription''s current token. Update and end events go to every valid row.';
