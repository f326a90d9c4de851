-- The money spine: merchants and keys, wallet snapshots, the double-entry ledger,
-- and the engine's bookkeeping (consumed offsets, processed commands, outbox).

CREATE TABLE merchants (
    merchant_id  text PRIMARY KEY,
    name         text NOT NULL,
    environment  text NOT NULL CHECK (environment IN ('sandbox', 'live')),
    enabled      boolean NOT NULL DEFAULT true,
    created_at   timestamptz NOT NULL DEFAULT now()
);

-- Keys are stored only as SHA-256 hashes; key_id is the non-secret prefix that is
-- shown to operators and used to revoke a key.
CREATE TABLE api_keys (
    key_id       text PRIMARY KEY,
    merchant_id  text NOT NULL REFERENCES merchants (merchant_id),
    kind         text NOT NULL CHECK (kind IN ('public', 'secret')),
    environment  text NOT NULL CHECK (environment IN ('sandbox', 'live')),
    key_hash     bytea NOT NULL UNIQUE,
    permissions  text[] NOT NULL DEFAULT '{}',
    created_at   timestamptz NOT NULL DEFAULT now(),
    revoked_at   timestamptz
);
CREATE INDEX api_keys_merchant ON api_keys (merchant_id);

-- Wallet snapshots: written only by the engine, in its batch transaction, with a
-- version check (the owning worker is the only writer).
CREATE TABLE wallets (
    wallet_id          text PRIMARY KEY,
    merchant_id        text NOT NULL REFERENCES merchants (merchant_id),
    currency           text NOT NULL,
    wallet_type        text NOT NULL CHECK (wallet_type IN ('SETTLEMENT', 'WORKING')),
    label              text NOT NULL,
    can_disburse       boolean NOT NULL DEFAULT false,
    current_balance    numeric(20, 2) NOT NULL DEFAULT 0,
    available_balance  numeric(20, 2) NOT NULL DEFAULT 0,
    version            bigint NOT NULL,
    created_at         timestamptz NOT NULL,
    updated_at         timestamptz NOT NULL,
    CHECK (available_balance >= 0 AND current_balance >= available_balance)
);
CREATE UNIQUE INDEX wallets_label ON wallets (merchant_id, currency, lower(label));
CREATE UNIQUE INDEX wallets_one_settlement ON wallets (merchant_id, currency) WHERE wallet_type = 'SETTLEMENT';
CREATE INDEX wallets_merchant ON wallets (merchant_id, created_at, wallet_id);

-- The ledger: every movement is a set of rows summing to zero per currency.
-- amount is signed from the account's point of view (+ increases its balance).
CREATE TABLE ledger_entries (
    entry_id         bigserial PRIMARY KEY,
    transaction_id   text NOT NULL,
    command_id       text NOT NULL,
    merchant_id      text NOT NULL,
    account          text NOT NULL,
    wallet_id        text,
    currency         text NOT NULL,
    amount           numeric(20, 2) NOT NULL,
    running_balance  numeric(20, 2),
    trans_type       text NOT NULL,
    narrative        text NOT NULL,
    created_at       timestamptz NOT NULL
);
CREATE INDEX ledger_entries_wallet ON ledger_entries (wallet_id, entry_id DESC) WHERE wallet_id IS NOT NULL;
CREATE INDEX ledger_entries_transaction ON ledger_entries (transaction_id);

-- One row per applied command, written in the same transaction as its effects:
-- the dedupe set, and the stored reply a redelivered command gets again.
CREATE TABLE processed_commands (
    command_id       text PRIMARY KEY,
    merchant_id      text NOT NULL,
    command_type     text NOT NULL,
    kafka_partition  integer NOT NULL,
    kafka_offset     bigint NOT NULL,
    reply            bytea NOT NULL,
    processed_at     timestamptz NOT NULL DEFAULT now()
);

-- The consumed offset of each command partition, and the owner epoch that fences a
-- worker which lost the partition: its batch UPDATE matches no row and rolls back.
CREATE TABLE partition_offsets (
    topic        text NOT NULL,
    partition    integer NOT NULL,
    epoch        bigint NOT NULL,
    next_offset  bigint NOT NULL,
    owner        text NOT NULL,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (topic, partition)
);

-- Events written in the batch transaction; the relay publishes them after commit.
-- body holds the exact bytes published, so a replay resends the same bytes.
CREATE TABLE outbox (
    outbox_id     bigserial PRIMARY KEY,
    event_id      text NOT NULL UNIQUE,
    topic         text NOT NULL,
    record_key    text NOT NULL,
    merchant_id   text NOT NULL,
    body          bytea NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    published_at  timestamptz
);
CREATE INDEX outbox_unpublished ON outbox (outbox_id) WHERE published_at IS NULL;

-- Idempotency-Key records (Stripe semantics), scoped per merchant.
CREATE TABLE idempotency_keys (
    merchant_id      text NOT NULL,
    idem_key         text NOT NULL,
    request_hash     bytea NOT NULL,
    command_id       text NOT NULL,
    locked_until     timestamptz,
    response_status  integer,
    response_body    bytea,
    created_at       timestamptz NOT NULL DEFAULT now(),
    completed_at     timestamptz,
    PRIMARY KEY (merchant_id, idem_key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);
