-- 0010_scheduled_claims: the scheduler claims due releases for a while instead of holding their
-- row locks in a transaction while it waits for the broker. A claim is a token and an expiry:
-- the release is produced with no transaction open, then deleted only if the claim is still the
-- same (a retry wait stored meanwhile clears it, so it is produced again, never swallowed). A
-- scheduler that dies leaves its claim to expire, after which another produces the rows.
--
-- Applied by `herald migrate` inside one transaction; forward-only.

ALTER TABLE scheduled_jobs
    ADD COLUMN claim text,
    ADD COLUMN claimed_until timestamptz,
    ADD CONSTRAINT scheduled_jobs_claim_check CHECK ((claim IS NULL) = (claimed_until IS NULL));

COMMENT ON COLUMN scheduled_jobs.claim IS 'The token of the scheduler round producing this row right now, NULL when none; see claimed_until.';
COMMENT ON COLUMN scheduled_jobs.claimed_until IS 'Until when the claim holds; a row whose claim expired is claimed again.';
