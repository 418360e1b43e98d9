-- +goose Up
-- The key a run was submitted with: a run whose submitting key has been
-- revoked cannot be approved (it can still be rejected or cancelled).
ALTER TABLE runs ADD COLUMN submitted_key TEXT;
-- The pending cap counts a tenant's runs in two states inside the
-- submission's write transaction.
CREATE INDEX runs_tenant_state ON runs (tenant_id, state);

-- +goose Down
DROP INDEX runs_tenant_state;
ALTER TABLE runs DROP COLUMN submitted_key;
