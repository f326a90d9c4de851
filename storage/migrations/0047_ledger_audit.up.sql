-- The continuous ledger audit (storage/ledgeraudit.go). Every ledger entry up to
-- through_entry_id has been summed into ledger_audit_currencies and
-- ledger_audit_wallets, so a run reads only the entries after it instead of the
-- whole ledger. The sums are what the entries add up to, not what they should: a
-- corrupt entry stays in them, and keeps the audit failing, until an entry that
-- corrects it is written. A full run rebuilds all three from the entries.
CREATE TABLE ledger_audit_checkpoint (
    -- One row per schema: a single audit owns the checkpoint (advisory lock).
    id                boolean PRIMARY KEY DEFAULT true CHECK (id),
    through_entry_id  bigint NOT NULL,
    full_at           timestamptz NOT NULL, -- the last full recount
    updated_at        timestamptz NOT NULL
);

CREATE TABLE ledger_audit_currencies (
    currency  text PRIMARY KEY,
    total     numeric NOT NULL,
    entries   bigint NOT NULL
);

CREATE TABLE ledger_audit_wallets (
    wallet_id  text PRIMARY KEY,
    total      numeric NOT NULL
);

-- The rails role's watch of collections waiting in PROCESSING (storage.ProcessingCollections):
-- a few rows of a large table, read every minute.
CREATE INDEX invoices_processing ON invoices (updated_at) WHERE state = 'PROCESSING';
