-- +goose Up
-- The queue job that claimed a run: a rescued job fails only the run it
-- claimed itself, never one another job is executing.
ALTER TABLE runs ADD COLUMN job BIGINT;

-- +goose Down
ALTER TABLE runs DROP COLUMN job;
