-- 0011_payload_profiles_and_providers: the SDKs Herald serves as they are (issue 18).
-- - apps.payload_profile gains 'openpush' and 'pushbib' beside 'sdk' and 'plain'
--   (schemas/payloads.md, "Payload profiles").
-- - subscriptions.provider: which provider holds the token. An iOS app built on Firebase (BV
--   Garner) registers an FCM token, not an APNs one. NULL is the platform's own provider (APNs
--   for iOS, FCM for Android), so every existing row keeps its meaning and nothing is rewritten.
-- - The covering audience index is rebuilt with the new column, so audience pages stay
--   index-only scans. Building it reads the whole table once: on a large table, plan this
--   migration for a quiet hour (docs/operations.md, upgrade notes).
--
-- Applied by `herald migrate` inside one transaction; forward-only.

ALTER TABLE apps
    DROP CONSTRAINT apps_payload_profile_check,
    ADD CONSTRAINT apps_payload_profile_check CHECK (payload_profile IN ('sdk', 'plain', 'openpush', 'pushbib'));
COMMENT ON COLUMN apps.payload_profile IS '''sdk'': Herald''s own SDK keys; ''plain'': provider-native payloads only; ''openpush'': the OpenPush iOS SDK''s keys; ''pushbib'': the Pushbib SDK''s keys (schemas/payloads.md).';

ALTER TABLE subscriptions
    ADD COLUMN provider text,
    ADD CONSTRAINT subscriptions_provider_check CHECK (
        provider IS NULL OR provider = 'fcm' OR (provider = 'apns' AND platform = 'ios'));
COMMENT ON COLUMN subscriptions.provider IS 'Who holds token: ''apns'' or ''fcm'' (an iOS device registered through Firebase); NULL = the platform''s own (APNs for iOS, FCM for Android).';

DROP INDEX subscriptions_subscribable_idx;
CREATE INDEX subscriptions_subscribable_idx
    ON subscriptions (app_id, id)
    INCLUDE (platform, token, sandbox, sdk, language, time_zone, voip_token, provider)
    WHERE opted_in AND invalidated_at IS NULL;
COMMENT ON INDEX subscriptions_subscribable_idx IS
    'Keyset scan of targetable subscriptions, covering the columns an audience page returns (index-only scans).';

COMMENT ON COLUMN subscriptions.sdk IS 'The device runs the SDK of its app''s payload profile (schemas/payloads.md); false = provider-native payloads on either platform.';
