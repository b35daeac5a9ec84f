-- Device events counted per job (DESIGN §1: the device-event consumer "counts per job").
-- Incremented in the same transaction that records the event in device_event_seen, so a
-- redelivered event is neither forwarded nor counted twice.

ALTER TABLE jobs
    ADD COLUMN received   bigint NOT NULL DEFAULT 0,
    ADD COLUMN confirmed  bigint NOT NULL DEFAULT 0,
    ADD COLUMN clicked    bigint NOT NULL DEFAULT 0,
    ADD CONSTRAINT jobs_device_event_counts_check CHECK (received >= 0 AND confirmed >= 0 AND clicked >= 0);

COMMENT ON COLUMN jobs.received IS 'Distinct received device events for this job (one per subscription).';
COMMENT ON COLUMN jobs.confirmed IS 'Distinct confirmed (displayed) device events for this job.';
COMMENT ON COLUMN jobs.clicked IS 'Distinct clicked device events for this job (one per subscription and button).';
