-- +goose Up
-- Who last wrote a project (its author), and the author of a run's
-- snapshot, copied at submission: the author may not approve it.
ALTER TABLE projects ADD COLUMN updated_by TEXT;
ALTER TABLE runs ADD COLUMN authored_by TEXT;

-- +goose Down
ALTER TABLE runs DROP COLUMN authored_by;
ALTER TABLE projects DROP COLUMN updated_by;
