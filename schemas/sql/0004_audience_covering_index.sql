-- 0004_audience_covering_index: stream audiences from the index alone.
--
-- Audience pages (`app_id = $1 AND opted_in AND invalidated_at IS NULL AND id > $cursor ORDER BY id
-- LIMIT n`) read every targetable subscription of a campaign. Subscription ids are random UUIDs, so
-- the heap is in no particular id order and a page that reads the heap fetches one random page per
-- row: about 200,000 rows/s on the benchmark machine, for psql's COPY as much as for Herald. With
-- the columns a page returns INCLUDEd in the keyset index, PostgreSQL answers from the index alone
-- (an index-only scan, once VACUUM has marked the pages all-visible), in id order.
--
-- The cost: a larger index (the tokens are in it) and more work per token update. The index
-- replaces subscriptions_subscribable_idx, which had the same key and predicate.

DROP INDEX subscriptions_subscribable_idx;

CREATE INDEX subscriptions_subscribable_idx
    ON subscriptions (app_id, id)
    INCLUDE (platform, token, sandbox, sdk, language, time_zone, voip_token)
    WHERE opted_in AND invalidated_at IS NULL;
COMMENT ON INDEX subscriptions_subscribable_idx IS
    'Keyset scan of targetable subscriptions, covering the columns an audience page returns (index-only scans).';
