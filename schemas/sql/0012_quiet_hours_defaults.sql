-- 0012_quiet_hours_defaults: quiet hours as the BV Garner SDK has them (issue 18).
-- - apps.quiet_start/quiet_end: the app's window for devices without their own (default
--   20:00-08:00, what a NULL subscription window always meant).
-- - apps.respect_quiet_hours: whether a job that does not say (`delivery.respect_quiet_hours`
--   absent) is held by quiet hours. Off, so producers see no change unless the app opts in.
-- - subscriptions.quiet_hours_disabled: the device turned quiet hours off (BV Garner's
--   disableQuietHours), distinct from a NULL window, which is the app's default
--   (resetQuietHours).
-- Constant defaults: no table is rewritten.
--
-- Applied by `herald migrate` inside one transaction; forward-only.

ALTER TABLE apps
    ADD COLUMN quiet_start time NOT NULL DEFAULT '20:00',
    ADD COLUMN quiet_end time NOT NULL DEFAULT '08:00',
    ADD COLUMN respect_quiet_hours boolean NOT NULL DEFAULT false;
COMMENT ON COLUMN apps.quiet_start IS 'Local start of the quiet window of subscriptions without their own; may be later than quiet_end (wraps midnight); equal to quiet_end = no window.';
COMMENT ON COLUMN apps.quiet_end IS 'Local end (exclusive) of the app''s quiet window; see quiet_start.';
COMMENT ON COLUMN apps.respect_quiet_hours IS 'Whether jobs without delivery.respect_quiet_hours are held by quiet hours (urgent jobs and live activities never are).';

ALTER TABLE subscriptions
    ADD COLUMN quiet_hours_disabled boolean NOT NULL DEFAULT false,
    ADD CONSTRAINT subscriptions_quiet_hours_disabled_check CHECK (NOT quiet_hours_disabled OR quiet_start IS NULL);
COMMENT ON COLUMN subscriptions.quiet_hours_disabled IS 'The device turned quiet hours off: never held. False with a NULL window = the app''s window (apps.quiet_start/quiet_end).';
COMMENT ON COLUMN subscriptions.quiet_start IS 'Local start of quiet hours; NULL (with quiet_end) = the app''s window (apps.quiet_start, default 20:00-08:00). May be later than quiet_end (wraps midnight).';
