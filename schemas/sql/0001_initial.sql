-- 0001_initial: apps, their notification channels, and the devices (subscriptions) they send to.
--
-- Applied by `herald migrate` inside one transaction it opens itself, under an advisory lock.
-- Forward-only: never edit this file once released; add a new NNNN_*.sql instead.
-- Built-in PostgreSQL 15 features only (gen_random_uuid() is core since 13).

-- ---------------------------------------------------------------------------------------------
-- apps
-- ---------------------------------------------------------------------------------------------

CREATE TABLE apps (
    id                  text        NOT NULL,
    name                text        NOT NULL,

    apns_auth           text,
    apns_key_id         text,
    apns_team_id        text,
    apns_bundle_id      text,
    apns_environment    text,
    apns_credentials    bytea,

    fcm_project_id      text,
    fcm_credentials     bytea,

    default_time_zone   text        NOT NULL DEFAULT 'UTC',
    payload_profile     text        NOT NULL DEFAULT 'sdk',

    apns_halted_reason  text,
    apns_halted_at      timestamptz,
    fcm_halted_reason   text,
    fcm_halted_at       timestamptz,

    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),

    CONSTRAINT apps_pkey PRIMARY KEY (id),
    CONSTRAINT apps_id_check CHECK (id ~ '^[a-z0-9_-]{1,64}$'),
    CONSTRAINT apps_name_check CHECK (char_length(name) BETWEEN 1 AND 200),

    CONSTRAINT apps_apns_auth_check CHECK (apns_auth IN ('token', 'certificate')),
    CONSTRAINT apps_apns_environment_check CHECK (apns_environment IN ('production', 'sandbox')),
    -- Apple key ids and team ids are 10 upper-case alphanumerics.
    CONSTRAINT apps_apns_key_id_check CHECK (apns_key_id ~ '^[A-Z0-9]{10}$'),
    CONSTRAINT apps_apns_team_id_check CHECK (apns_team_id ~ '^[A-Z0-9]{10}$'),
    CONSTRAINT apps_apns_bundle_id_check CHECK (apns_bundle_id ~ '^[A-Za-z0-9][A-Za-z0-9.-]{0,154}$'),
    -- No APNs at all, or token auth (key id + team id), or certificate auth (no key/team id);
    -- both auth kinds need a bundle id (the topic), an environment and the encrypted secret.
    CONSTRAINT apps_apns_settings_check CHECK (
        (apns_auth IS NULL
            AND apns_key_id IS NULL AND apns_team_id IS NULL AND apns_bundle_id IS NULL
            AND apns_environment IS NULL AND apns_credentials IS NULL)
        OR (apns_auth = 'token'
            AND apns_key_id IS NOT NULL AND apns_team_id IS NOT NULL AND apns_bundle_id IS NOT NULL
            AND apns_environment IS NOT NULL AND apns_credentials IS NOT NULL)
        OR (apns_auth = 'certificate'
            AND apns_key_id IS NULL AND apns_team_id IS NULL AND apns_bundle_id IS NOT NULL
            AND apns_environment IS NOT NULL AND apns_credentials IS NOT NULL)
    ),
    -- AES-256-GCM output is at least 12-byte nonce + 16-byte tag + 1 byte of ciphertext.
    -- A value starting with "-----BEGIN" is a plaintext PEM key or certificate: refuse it.
    CONSTRAINT apps_apns_credentials_check CHECK (
        octet_length(apns_credentials) >= 29
        AND position('\x2d2d2d2d2d424547494e'::bytea IN apns_credentials) <> 1
    ),

    CONSTRAINT apps_fcm_project_id_check CHECK (fcm_project_id ~ '^[a-z0-9][a-z0-9.:-]{0,99}$'),
    CONSTRAINT apps_fcm_settings_check CHECK ((fcm_project_id IS NULL) = (fcm_credentials IS NULL)),
    CONSTRAINT apps_fcm_credentials_check CHECK (octet_length(fcm_credentials) >= 29),

    -- IANA zone names ("UTC", "Europe/Paris", "America/Argentina/Buenos_Aires", "Etc/GMT+5").
    -- Whether the zone exists is checked by Herald, not here: the tz database changes.
    CONSTRAINT apps_default_time_zone_check CHECK (default_time_zone ~ '^[A-Za-z][A-Za-z0-9_+/-]{0,63}$'),
    CONSTRAINT apps_payload_profile_check CHECK (payload_profile IN ('sdk', 'plain')),

    CONSTRAINT apps_apns_halted_check CHECK (
        (apns_halted_reason IS NULL) = (apns_halted_at IS NULL) AND apns_halted_reason <> ''
    ),
    CONSTRAINT apps_fcm_halted_check CHECK (
        (fcm_halted_reason IS NULL) = (fcm_halted_at IS NULL) AND fcm_halted_reason <> ''
    )
);

COMMENT ON TABLE apps IS
    'One tenant of Herald: provider credentials (encrypted), payload profile, and per-provider halt state shared by every worker.';
COMMENT ON COLUMN apps.id IS 'Slug used as app_id in every message, [a-z0-9_-]{1,64}.';
COMMENT ON COLUMN apps.apns_auth IS '''token'' (.p8 key, ES256 JWT), ''certificate'' (TLS client certificate), or NULL when the app has no APNs.';
COMMENT ON COLUMN apps.apns_key_id IS 'APNs auth key id (kid of the provider JWT); token auth only.';
COMMENT ON COLUMN apps.apns_team_id IS 'Apple developer team id (iss of the provider JWT); token auth only.';
COMMENT ON COLUMN apps.apns_bundle_id IS 'Bundle id, the base apns-topic; push-type suffixes (.voip, .push-type.liveactivity) are added by Herald.';
COMMENT ON COLUMN apps.apns_environment IS 'Environment of the credential (''production'' or ''sandbox''); the host per send follows subscriptions.sandbox.';
COMMENT ON COLUMN apps.apns_credentials IS 'AES-256-GCM ciphertext (key HERALD_CREDENTIALS_KEY) of the .p8 key or of the certificate + private key. Never plaintext.';
COMMENT ON COLUMN apps.fcm_project_id IS 'Firebase project id used in the FCM HTTP v1 URL.';
COMMENT ON COLUMN apps.fcm_credentials IS 'AES-256-GCM ciphertext (key HERALD_CREDENTIALS_KEY) of the service-account JSON. Never plaintext.';
COMMENT ON COLUMN apps.default_time_zone IS 'IANA zone used for local-time and quiet-hours delivery when a subscription has no time_zone.';
COMMENT ON COLUMN apps.payload_profile IS '''sdk'': payloads carry the keys the Herald-compatible SDKs read (schemas/payloads.md); ''plain'': provider-native payloads only.';
COMMENT ON COLUMN apps.apns_halted_reason IS 'Why APNs sends of this app are halted (e.g. credentials, suspected-misconfiguration); NULL = sending. Cleared when the credential is fixed.';
COMMENT ON COLUMN apps.apns_halted_at IS 'When APNs sends were halted; set together with apns_halted_reason.';
COMMENT ON COLUMN apps.fcm_halted_reason IS 'Why FCM sends of this app are halted; NULL = sending. The other provider keeps going.';
COMMENT ON COLUMN apps.fcm_halted_at IS 'When FCM sends were halted; set together with fcm_halted_reason.';

-- ---------------------------------------------------------------------------------------------
-- channels
-- ---------------------------------------------------------------------------------------------

CREATE TABLE channels (
    app_id      text        NOT NULL,
    id          text        NOT NULL,
    name        text        NOT NULL,
    description text,
    importance  text        NOT NULL DEFAULT 'default',
    sound       text,
    vibration   boolean     NOT NULL DEFAULT true,
    lights      boolean     NOT NULL DEFAULT false,
    badge       boolean     NOT NULL DEFAULT true,
    created_at  timestamptz NOT NULL DEFAULT now(),

    CONSTRAINT channels_pkey PRIMARY KEY (app_id, id),
    CONSTRAINT channels_app_id_fkey FOREIGN KEY (app_id) REFERENCES apps (id) ON DELETE CASCADE,
    CONSTRAINT channels_id_check CHECK (id ~ '^[a-z0-9_-]{1,64}$'),
    CONSTRAINT channels_name_check CHECK (char_length(name) BETWEEN 1 AND 200),
    CONSTRAINT channels_importance_check CHECK (importance IN ('min', 'low', 'default', 'high', 'max')),
    CONSTRAINT channels_sound_check CHECK (sound <> '')
);

COMMENT ON TABLE channels IS
    'Notification channels of an app (Android channels; on iOS the channel maps to category/sound). content.channel names one by id.';
COMMENT ON COLUMN channels.importance IS 'Android NotificationChannel importance: min, low, default, high, max.';
COMMENT ON COLUMN channels.sound IS 'Sound resource name; NULL = platform default sound.';

-- ---------------------------------------------------------------------------------------------
-- subscriptions
-- ---------------------------------------------------------------------------------------------

CREATE TABLE subscriptions (
    id                  uuid             NOT NULL DEFAULT gen_random_uuid(),
    app_id              text             NOT NULL,
    platform            text             NOT NULL,
    token               text             NOT NULL,
    sandbox             boolean          NOT NULL DEFAULT false,
    sdk                 boolean          NOT NULL DEFAULT true,
    external_id         text,
    tags                jsonb            NOT NULL DEFAULT '{}',
    language            text,
    lat                 double precision,
    long                double precision,
    time_zone           text,
    quiet_start         time,
    quiet_end           time,
    opted_in            boolean          NOT NULL DEFAULT true,
    invalidated_at      timestamptz,
    invalidated_reason  text,
    token_updated_at    timestamptz      NOT NULL DEFAULT now(),
    last_session_at     timestamptz,
    session_count       integer          NOT NULL DEFAULT 0,
    voip_token          text,
    activity_histogram  integer[],
    created_at          timestamptz      NOT NULL DEFAULT now(),
    updated_at          timestamptz      NOT NULL DEFAULT now(),

    -- (app_id, id) is the keyset every audience is paged by:
    --   WHERE app_id = $1 AND id > $cursor ORDER BY id LIMIT n
    CONSTRAINT subscriptions_pkey PRIMARY KEY (app_id, id),
    -- Receipts, device events and shard retries name a subscription by id alone.
    CONSTRAINT subscriptions_id_key UNIQUE (id),
    CONSTRAINT subscriptions_app_id_fkey FOREIGN KEY (app_id) REFERENCES apps (id) ON DELETE CASCADE,

    CONSTRAINT subscriptions_platform_check CHECK (platform IN ('ios', 'android')),
    CONSTRAINT subscriptions_token_check CHECK (token <> ''),
    CONSTRAINT subscriptions_sandbox_check CHECK (platform = 'ios' OR NOT sandbox),
    CONSTRAINT subscriptions_voip_token_check CHECK (voip_token IS NULL OR (voip_token <> '' AND platform = 'ios')),
    CONSTRAINT subscriptions_external_id_check CHECK (char_length(external_id) BETWEEN 1 AND 256),
    -- Tags are an object whose values are strings or arrays of strings: the job filter compares
    -- string values (`tags @> '{"k":"v"}'`), so a number stored as 1 would silently never match "1".
    CONSTRAINT subscriptions_tags_check CHECK (
        jsonb_typeof(tags) = 'object'
        AND NOT jsonb_path_exists(tags,
            'strict $.* ? (@.type() != "string" && (@.type() != "array" || exists (@[*] ? (@.type() != "string"))))')
    ),
    CONSTRAINT subscriptions_language_check CHECK (
        language ~ '^[a-z]{2,3}(-[a-z0-9]{1,8})*$' AND char_length(language) <= 35
    ),
    CONSTRAINT subscriptions_location_check CHECK ((lat IS NULL) = (long IS NULL)),
    -- NaN and ±Infinity fail these too.
    CONSTRAINT subscriptions_lat_check CHECK (lat BETWEEN -90 AND 90),
    CONSTRAINT subscriptions_long_check CHECK (long BETWEEN -180 AND 180),
    CONSTRAINT subscriptions_time_zone_check CHECK (time_zone ~ '^[A-Za-z][A-Za-z0-9_+/-]{0,63}$'),
    CONSTRAINT subscriptions_quiet_hours_check CHECK ((quiet_start IS NULL) = (quiet_end IS NULL)),
    CONSTRAINT subscriptions_invalidated_check CHECK (invalidated_reason IS NULL OR invalidated_at IS NOT NULL),
    CONSTRAINT subscriptions_session_count_check CHECK (session_count >= 0),
    -- Exactly 24 non-negative counts, indexed 1..24 (hour h of the local day is element h + 1).
    CONSTRAINT subscriptions_activity_histogram_check CHECK (
        activity_histogram IS NULL
        OR (array_ndims(activity_histogram) = 1
            AND array_lower(activity_histogram, 1) = 1
            AND array_length(activity_histogram, 1) = 24
            AND array_position(activity_histogram, NULL) IS NULL
            AND 0 <= ALL (activity_histogram))
    )
);

COMMENT ON TABLE subscriptions IS
    'One device registration of an app. Written by the upstream API; Herald reads it for audiences and marks it invalid (never deletes it) on unregistered answers.';
COMMENT ON COLUMN subscriptions.id IS 'Subscription id (UUID) used everywhere in Herald. Shards are uuid ranges: uuid order is byte order, i.e. lower-case hex string order.';
COMMENT ON COLUMN subscriptions.token IS 'APNs device token (hex) or FCM registration token. Redacted in logs.';
COMMENT ON COLUMN subscriptions.sandbox IS 'iOS only: the token belongs to the APNs sandbox (development build), so sends go to the sandbox host.';
COMMENT ON COLUMN subscriptions.sdk IS 'The device runs a Herald-compatible SDK: FCM gets data-only messages the SDK renders; false = FCM notification messages.';
COMMENT ON COLUMN subscriptions.external_id IS 'The app''s own user id; several subscriptions may share one. NULL = anonymous.';
COMMENT ON COLUMN subscriptions.tags IS 'Object of string or string-array values; filters use tags @> $json (see subscriptions_tags_gin).';
COMMENT ON COLUMN subscriptions.language IS 'Lower-case BCP-47-ish tag (''en'', ''pt-br'') choosing content.localized; NULL = job defaults.';
COMMENT ON COLUMN subscriptions.lat IS 'Last known latitude in degrees, -90..90; set together with long.';
COMMENT ON COLUMN subscriptions.long IS 'Last known longitude in degrees, -180..180; set together with lat.';
COMMENT ON COLUMN subscriptions.time_zone IS 'IANA zone of the device for local_time / quiet hours / best hour; NULL = apps.default_time_zone.';
COMMENT ON COLUMN subscriptions.quiet_start IS 'Local start of quiet hours; NULL (with quiet_end) = the app default 20:00-08:00. May be later than quiet_end (wraps midnight).';
COMMENT ON COLUMN subscriptions.quiet_end IS 'Local end of quiet hours (exclusive); see quiet_start.';
COMMENT ON COLUMN subscriptions.opted_in IS 'false = the user opted out; never targeted, whatever a job''s filter says.';
COMMENT ON COLUMN subscriptions.invalidated_at IS 'Set when a provider reported the token unregistered; never targeted again until the token is re-registered (which clears it).';
COMMENT ON COLUMN subscriptions.invalidated_reason IS 'Provider reason that invalidated the token (e.g. Unregistered, BadDeviceToken, UNREGISTERED).';
COMMENT ON COLUMN subscriptions.token_updated_at IS 'When the token was last registered. An APNs 410 whose timestamp is older than this does not invalidate the subscription.';
COMMENT ON COLUMN subscriptions.session_count IS 'Number of app sessions reported by the SDK.';
COMMENT ON COLUMN subscriptions.voip_token IS 'iOS PushKit token for voip jobs; NULL = voip sends are dropped with no-voip-token.';
COMMENT ON COLUMN subscriptions.activity_histogram IS 'Sessions per local hour of day, 24 elements (element h+1 = hour h); drives best_hour delivery. NULL = no data.';

-- Audience resolution always adds `opted_in AND invalidated_at IS NULL` (DESIGN §3), so the
-- audience indexes below are partial on exactly that predicate: rows that can never be
-- targeted (opted out, uninstalled) cost nothing in them. Queries must spell the predicate
-- the same way (`opted_in AND invalidated_at IS NULL`) for the planner to use them.

CREATE INDEX subscriptions_subscribable_idx
    ON subscriptions (app_id, id)
    WHERE opted_in AND invalidated_at IS NULL;
COMMENT ON INDEX subscriptions_subscribable_idx IS
    'Keyset scan of targetable subscriptions (audience all / filters without a selective indexed predicate).';

CREATE INDEX subscriptions_tags_gin
    ON subscriptions USING gin (tags jsonb_path_ops)
    WHERE opted_in AND invalidated_at IS NULL;
COMMENT ON INDEX subscriptions_tags_gin IS
    'Tag eq/contains as tags @> $json. jsonb_path_ops, not jsonb_ops: smaller and cheaper to update; `?` (exists) is evaluated on the keyset scan instead.';

CREATE INDEX subscriptions_language_idx
    ON subscriptions (app_id, language, id)
    WHERE opted_in AND invalidated_at IS NULL;

CREATE INDEX subscriptions_platform_idx
    ON subscriptions (app_id, platform, id)
    WHERE opted_in AND invalidated_at IS NULL;

-- Not partial on the subscribable predicate: the upstream API also looks devices up by user.
CREATE INDEX subscriptions_external_id_idx
    ON subscriptions (app_id, external_id)
    WHERE external_id IS NOT NULL;

CREATE INDEX subscriptions_location_idx
    ON subscriptions (app_id, lat, long)
    WHERE lat IS NOT NULL AND opted_in AND invalidated_at IS NULL;
COMMENT ON INDEX subscriptions_location_idx IS
    'Bounding-box prefilter for near filters (lat BETWEEN .. AND long BETWEEN ..); the exact distance is checked per row.';

CREATE INDEX subscriptions_last_session_idx
    ON subscriptions (app_id, last_session_at)
    WHERE opted_in AND invalidated_at IS NULL;
