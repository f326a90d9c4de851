package storage

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"paysvc/actors/values/money"
)

// ConsoleSession is a console session with what every request must recheck: the
// key's permissions and revocation and its merchant's status, read live through
// key_id (never copied into the session row).
type ConsoleSession struct {
	MerchantID          string         `db:"merchant_id"`
	MerchantName        string         `db:"merchant_name"`
	KeyID               string         `db:"key_id"`
	Environment         string         `db:"environment"`
	CSRFToken           string         `db:"csrf_token"`
	CreatedAt           time.Time      `db:"created_at"`
	Permissions         pq.StringArray `db:"permissions"`
	Unrestricted        bool           `db:"unrestricted"`
	KeyKind             string         `db:"kind"`
	KeyEnvironment      string         `db:"key_environment"`
	RevokedAt           *time.Time     `db:"revoked_at"`
	MerchantEnabled     bool           `db:"merchant_enabled"`
	MerchantEnvironment string         `db:"merchant_environment"`
}

// InsertConsoleSession stores a new session under the hash of its token.
func InsertConsoleSession(ctx context.Context, ext sqlx.ExecerContext, tokenHash []byte, merchantID, keyID, env, csrf string) error {
	_, err := ext.ExecContext(ctx, `INSERT INTO console_sessions (token_hash, merchant_id, key_id, environment, csrf_token)
		VALUES ($1, $2, $3, $4, $5)`, tokenHash, merchantID, keyID, env, csrf)
	if err != nil {
		return fmt.Errorf("insert console session: %w", err)
	}
	return nil
}

// TouchConsoleSession returns the live session with that token hash and moves its
// idle deadline. A session idle longer than idle or older than maxAge is not found
// (and deleted): expiry is decided here, by the database's clock, on every request.
func TouchConsoleSession(ctx context.Context, db *sqlx.DB, tokenHash []byte, idle, maxAge time.Duration) (ConsoleSession, error) {
	var s ConsoleSession
	err := sqlx.GetContext(ctx, db, &s, `UPDATE console_sessions s SET last_seen_at = now()
		  FROM api_keys k, merchants m
		 WHERE s.token_hash = $1 AND k.key_id = s.key_id AND m.merchant_id = s.merchant_id
		   AND s.last_seen_at > now() - make_interval(secs => $2) AND s.created_at > now() - make_interval(secs => $3)
		RETURNING s.merchant_id, m.name AS merchant_name, s.key_id, s.environment, s.csrf_token, s.created_at,
		          k.permissions, k.unrestricted, k.kind, k.environment AS key_environment, k.revoked_at,
		          m.enabled AS merchant_enabled, m.environment AS merchant_environment`,
		tokenHash, idle.Seconds(), maxAge.Seconds())
	if errors.Is(err, sql.ErrNoRows) {
		// Expired or unknown: an expired row is removed so it cannot come back.
		if _, err := db.ExecContext(ctx, `DELETE FROM console_sessions WHERE token_hash = $1`, tokenHash); err != nil {
			return s, fmt.Errorf("delete expired console session: %w", err)
		}
		return s, ErrNotFound
	}
	if err != nil {
		return s, fmt.Errorf("console session: %w", err)
	}
	return s, nil
}

// DeleteConsoleSession ends a session (sign-out).
func DeleteConsoleSession(ctx context.Context, ext sqlx.ExecerContext, tokenHash []byte) error {
	if _, err := ext.ExecContext(ctx, `DELETE FROM console_sessions WHERE token_hash = $1`, tokenHash); err != nil {
		return fmt.Errorf("delete console session: %w", err)
	}
	return nil
}

// DeleteExpiredConsoleSessions removes sessions past either deadline.
func DeleteExpiredConsoleSessions(ctx context.Context, ext sqlx.ExecerContext, idle, maxAge time.Duration) error {
	_, err := ext.ExecContext(ctx, `DELETE FROM console_sessions
		WHERE last_seen_at < now() - make_interval(secs => $1) OR created_at < now() - make_interval(secs => $2)`,
		idle.Seconds(), maxAge.Seconds())
	if err != nil {
		return fmt.Errorf("delete expired console sessions: %w", err)
	}
	return nil
}

// MerchantKeys lists the merchant's keys, newest first (never their hashes).
func MerchantKeys(ctx context.Context, q sqlx.QueryerContext, merchantID string) ([]APIKey, error) {
	return selectAll[APIKey](ctx, q, "merchant keys", `SELECT k.key_id, k.merchant_id, k.kind, k.environment, k.permissions, k.unrestricted,
		k.created_at, k.revoked_at, m.enabled AS merchant_enabled, m.environment AS merchant_environment
		FROM api_keys k JOIN merchants m USING (merchant_id) WHERE k.merchant_id = $1 ORDER BY k.created_at DESC, k.key_id`, merchantID)
}

// RevokeMerchantKey revokes one secret key of the merchant by its id; it reports
// whether a live key was revoked. Scoped by merchant: another merchant's key id
// revokes nothing.
func RevokeMerchantKey(ctx context.Context, ext sqlx.ExtContext, merchantID, keyID string) (bool, error) {
	res, err := ext.ExecContext(ctx, `UPDATE api_keys SET revoked_at = now()
		WHERE merchant_id = $1 AND key_id = $2 AND kind = 'secret' AND revoked_at IS NULL`, merchantID, keyID)
	if err != nil {
		return false, fmt.Errorf("revoke key: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, err
	}
	if n == 1 {
		// Its console sessions end with it (they would be refused anyway).
		if _, err := ext.ExecContext(ctx, `DELETE FROM console_sessions WHERE key_id = $1`, keyID); err != nil {
			return true, fmt.Errorf("end revoked key's sessions: %w", err)
		}
	}
	return n == 1, nil
}

// Cursor is a keyset position: the last row of the page before, by creation time
// and id (both descending), so page N costs what page 1 does.
type Cursor struct {
	At time.Time
	ID string
}

// ParseCursor reads a cursor written by Cursor.String; ok is false for "" or junk.
func ParseCursor(s string) (Cursor, bool) {
	at, id, found := strings.Cut(s, "~")
	if !found || id == "" || len(id) > 64 {
		return Cursor{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return Cursor{}, false
	}
	return Cursor{At: t, ID: id}, true
}

func (c Cursor) String() string { return c.At.UTC().Format(time.RFC3339Nano) + "~" + c.ID }

// Row is one listed item: its stored state as JSON, and its keyset position.
type Row struct {
	Data json.RawMessage `db:"data"`
	At   time.Time       `db:"created_at"`
	ID   string          `db:"id"`
}

// pageRows reads up to limit rows after the cursor (nil: the first page) from one
// of the merchant's tables and reports whether more follow; what names the list in
// an error.
func pageRows(ctx context.Context, q sqlx.QueryerContext, what, query string, args []any, after *Cursor, limit int) ([]Row, bool, error) {
	if after == nil {
		args = append(args, nil, nil)
	} else {
		args = append(args, after.At, after.ID)
	}
	args = append(args, limit+1)
	var rows []Row
	if err := sqlx.SelectContext(ctx, q, &rows, query, args...); err != nil {
		return nil, false, fmt.Errorf("%s: %w", what, err)
	}
	rows, more := cutPage(rows, limit)
	return rows, more, nil
}

// ConsoleInvoices pages through the merchant's collections, newest first. A
// non-empty search matches the invoice id, the merchant's reference (api_ref),
// the payer's phone (phone, already normalised by the caller; "" skips it) or
// email exactly.
//
// A search is one branch per match, each read through its own index and cut at the
// page, then merged: with the matches behind one OR, the planner walked the
// merchant's collections newest first looking for a page of matches, which for a
// search that matches a few of a million collections read them all (630-870 ms
// measured at 1 M; docs/console.md).
func ConsoleInvoices(ctx context.Context, q sqlx.QueryerContext, merchantID, search, phone string, after *Cursor, limit int) ([]Row, bool, error) {
	const cols = `SELECT i.data, i.created_at, i.invoice_id AS id FROM invoices i WHERE i.merchant_id = $1 AND `
	const page = ` AND ($4::timestamptz IS NULL OR (i.created_at, i.invoice_id) < ($4, $5::text))`
	const order = ` ORDER BY created_at DESC, id DESC LIMIT $6`
	query := cols + `$2::text = '' AND $3::text = ''` + page + order
	if search != "" {
		query = `SELECT data, created_at, id FROM (
			(` + cols + `i.invoice_id = $2` + page + `)
			UNION (` + cols + `i.api_ref = $2` + page + order + `)
			UNION (` + cols + `i.data ? 'email' AND lower(i.data ->> 'email') = lower($2)` + page + order + `)
			UNION (` + cols + `$3 <> '' AND i.data ->> 'account' = $3` + page + order + `)
		) m` + order
	}
	return pageRows(ctx, q, "console invoices", query, []any{merchantID, search, phone}, after, limit)
}

// ConsolePayoutFiles pages through the merchant's payment files, newest first;
// status "" lists every status.
func ConsolePayoutFiles(ctx context.Context, q sqlx.QueryerContext, merchantID, status string, after *Cursor, limit int) ([]Row, bool, error) {
	return statusPage(ctx, q, "console payout files", "payout_files", "file_id", merchantID, status, after, limit)
}

// ConsoleRefunds pages through the merchant's refunds, newest first.
func ConsoleRefunds(ctx context.Context, q sqlx.QueryerContext, merchantID string, after *Cursor, limit int) ([]Row, bool, error) {
	query := `SELECT r.data, r.created_at, r.id::text AS id FROM refunds r
		WHERE r.merchant_id = $1 AND ($2::timestamptz IS NULL OR (r.created_at, r.id) < ($2, $3::bigint))
		ORDER BY r.created_at DESC, r.id DESC LIMIT $4`
	if after != nil && !allDigits(after.ID) {
		return nil, false, nil
	}
	return pageRows(ctx, q, "console refunds", query, []any{merchantID}, after, limit)
}

// ConsoleSubscriptions pages through the merchant's subscriptions, newest first;
// status "" lists every status.
func ConsoleSubscriptions(ctx context.Context, q sqlx.QueryerContext, merchantID, status string, after *Cursor, limit int) ([]Row, bool, error) {
	return statusPage(ctx, q, "console subscriptions", "subscriptions", "subscription_id", merchantID, status, after, limit)
}

// statusPage pages through the merchant's rows of a table that keeps each row's
// state as data with a status column beside it, newest first; status "" lists
// every status. table and id (the text key column) are this package's constants,
// never input.
func statusPage(ctx context.Context, q sqlx.QueryerContext, what, table, id, merchantID, status string, after *Cursor, limit int) ([]Row, bool, error) {
	query := `SELECT t.data, t.created_at, t.` + id + ` AS id FROM ` + table + ` t
		WHERE t.merchant_id = $1 AND ($2 = '' OR t.status = $2)
		  AND ($3::timestamptz IS NULL OR (t.created_at, t.` + id + `) < ($3, $4::text))
		ORDER BY t.created_at DESC, t.` + id + ` DESC LIMIT $5`
	return pageRows(ctx, q, what, query, []any{merchantID, status}, after, limit)
}

func allDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != "" && len(s) < 19
}

// DayFlow is one day's money into and out of the merchant's wallets in one currency.
type DayFlow struct {
	Currency string       `db:"currency"`
	Day      time.Time    `db:"day"`
	In       money.Amount `db:"money_in"`
	Out      money.Amount `db:"money_out"` // positive: the sum of the debits
}

// WalletFlows sums, per currency and day (Africa/Nairobi) since since, the money
// that came into the merchant's wallets from outside (collections, deposits, P2P
// payments from others) and that left them (payouts with their charges, refunds).
// Each movement (ledger transaction) counts once, by what it did to the merchant's
// wallets as a whole: its entries on them are netted, so a transfer between two of
// the merchant's own wallets (or a P2P payout to itself) nets to zero and is
// neither in nor out. The movements are found through the wallets' ledger index,
// their other entries through the transaction index.
func WalletFlows(ctx context.Context, q sqlx.QueryerContext, merchantID string, since time.Time) ([]DayFlow, error) {
	return selectAll[DayFlow](ctx, q, "wallet flows", `WITH moved AS (
			SELECT DISTINCT e.transaction_id FROM wallets w JOIN ledger_entries e ON e.wallet_id = w.wallet_id
			 WHERE w.merchant_id = $1 AND e.created_at >= $2),
		net AS (
			SELECT e.currency, min(e.created_at) AS at, sum(e.amount) AS amount
			  FROM moved m JOIN ledger_entries e ON e.transaction_id = m.transaction_id
			  JOIN wallets w ON w.wallet_id = e.wallet_id AND w.merchant_id = $1
			 GROUP BY e.currency, e.transaction_id)
		SELECT currency, date_trunc('day', at AT TIME ZONE 'Africa/Nairobi') AS day,
		       coalesce(sum(amount) FILTER (WHERE amount > 0), 0) AS money_in,
		       coalesce(-sum(amount) FILTER (WHERE amount < 0), 0) AS money_out
		  FROM net WHERE at >= $2 GROUP BY 1, 2 ORDER BY 1, 2`, merchantID, since)
}

// MerchantCurrencies lists the currencies the merchant holds a wallet in.
func MerchantCurrencies(ctx context.Context, q sqlx.QueryerContext, merchantID string) ([]string, error) {
	var out []string
	if err := sqlx.SelectContext(ctx, q, &out, `SELECT DISTINCT currency FROM wallets WHERE merchant_id = $1 ORDER BY 1`, merchantID); err != nil {
		return nil, fmt.Errorf("merchant currencies: %w", err)
	}
	return out, nil
}

// ConsoleWallets pages through the merchant's wallets, oldest first (the settlement
// wallet, made with the merchant, leads), with the fields the console shows.
func ConsoleWallets(ctx context.Context, q sqlx.QueryerContext, merchantID string, after *Cursor, limit int) ([]Row, bool, error) {
	query := `SELECT json_build_object('wallet_id', w.wallet_id, 'label', w.label, 'wallet_type', w.wallet_type, 'currency', w.currency,
			'current_balance', w.current_balance::text, 'available_balance', w.available_balance::text) AS data,
			w.created_at, w.wallet_id AS id
		FROM wallets w WHERE w.merchant_id = $1 AND ($2::timestamptz IS NULL OR (w.created_at, w.wallet_id) > ($2, $3::text))
		ORDER BY w.created_at, w.wallet_id LIMIT $4`
	return pageRows(ctx, q, "console wallets", query, []any{merchantID}, after, limit)
}

// ConsolePlans pages through the merchant's subscription plans, newest first (the
// caller adds each plan's public address).
func ConsolePlans(ctx context.Context, q sqlx.QueryerContext, merchantID string, after *Cursor, limit int) ([]Row, bool, error) {
	query := `SELECT json_build_object('plan_id', p.plan_id, 'name', p.name, 'amount', p.amount::text, 'currency', p.currency,
			'frequency', p.frequency, 'frequency_unit', p.frequency_unit, 'billing_cycles', p.billing_cycles) AS data,
			p.created_at, p.plan_id AS id
		FROM plans p WHERE p.merchant_id = $1 AND ($2::timestamptz IS NULL OR (p.created_at, p.plan_id) < ($2, $3::text))
		ORDER BY p.created_at DESC, p.plan_id DESC LIMIT $4`
	return pageRows(ctx, q, "console plans", query, []any{merchantID}, after, limit)
}

// ConsolePaymentLinks pages through the merchant's payment links, newest first (the
// caller adds each link's public address).
func ConsolePaymentLinks(ctx context.Context, q sqlx.QueryerContext, merchantID string, after *Cursor, limit int) ([]Row, bool, error) {
	if after != nil && !ValidCheckoutID(after.ID) {
		return nil, false, nil
	}
	query := `SELECT json_build_object('id', l.link_id, 'title', l.title, 'is_active', l.is_active, 'amount', l.amount,
			'currency', l.currency) AS data, l.created_at, l.link_id::text AS id
		FROM payment_links l WHERE l.merchant_id = $1 AND ($2::timestamptz IS NULL OR (l.created_at, l.link_id) < ($2, $3::uuid))
		ORDER BY l.created_at DESC, l.link_id DESC LIMIT $4`
	return pageRows(ctx, q, "console payment links", query, []any{merchantID}, after, limit)
}

// ConsoleDeliveries pages through the merchant's webhook deliveries (one event to
// one webhook), newest first, by the merchant's deliveries index. A delivery's
// keyset id is its event id and webhook id, "/" between (neither has one).
func ConsoleDeliveries(ctx context.Context, q sqlx.QueryerContext, merchantID string, after *Cursor, limit int) ([]Row, bool, error) {
	args := []any{merchantID, nil, nil, nil, limit + 1}
	if after != nil {
		i := strings.LastIndexByte(after.ID, '/')
		if i <= 0 || i == len(after.ID)-1 {
			return nil, false, nil
		}
		args[1], args[2], args[3] = after.At, after.ID[:i], after.ID[i+1:]
	}
	var rows []Row
	if err := sqlx.SelectContext(ctx, q, &rows, `SELECT json_build_object('id', d.event_id, 'webhook_id', d.webhook_id,
			'endpoint', w.endpoint, 'topic', d.topic, 'status', `+shownStatus+`, 'attempts', d.attempts,
			'last_http_status', d.last_status, 'last_error', d.last_error, 'created_at', d.created_at) AS data,
			d.created_at, d.event_id || '/' || d.webhook_id AS id
		FROM webhook_deliveries d JOIN webhooks w USING (webhook_id)
		WHERE d.merchant_id = $1 AND ($2::timestamptz IS NULL OR (d.created_at, d.event_id, d.webhook_id) < ($2, $3::text, $4::text))
		ORDER BY d.created_at DESC, d.event_id DESC, d.webhook_id DESC LIMIT $5`, args...); err != nil {
		return nil, false, fmt.Errorf("console deliveries: %w", err)
	}
	rows, more := cutPage(rows, limit)
	return rows, more, nil
}

// Attention is what the console's overview asks the merchant to look at.
type Attention struct {
	FilesAwaitingApproval int `db:"files"`
	FailingWebhooks       int `db:"webhooks"`
	FailedSubscriptions   int `db:"subscriptions"`
}

// ConsoleAttention counts the merchant's payment files awaiting approval, webhooks
// that are disabled or whose deliveries failed in the last week, and failed
// subscriptions. A count the caller may not see is not asked (the flags).
func ConsoleAttention(ctx context.Context, q sqlx.QueryerContext, merchantID string, files, hooks, subs bool) (Attention, error) {
	var a Attention
	err := sqlx.GetContext(ctx, q, &a, `SELECT
		CASE WHEN $2 THEN (SELECT count(*) FROM payout_files WHERE merchant_id = $1 AND status = 'PREVIEW-AND-APPROVE') ELSE 0 END AS files,
		CASE WHEN $3 THEN (SELECT count(DISTINCT w.webhook_id) FROM webhooks w WHERE w.merchant_id = $1 AND (NOT w.is_active OR EXISTS (
			SELECT 1 FROM webhook_deliveries d WHERE d.merchant_id = $1 AND d.webhook_id = w.webhook_id
			   AND d.created_at > now() - interval '7 days' AND d.status = 'FAILED'))) ELSE 0 END AS webhooks,
		CASE WHEN $4 THEN (SELECT count(*) FROM subscriptions WHERE merchant_id = $1 AND status = 'FAILED') ELSE 0 END AS subscriptions`,
		merchantID, files, hooks, subs)
	if err != nil {
		return a, fmt.Errorf("console attention: %w", err)
	}
	return a, nil
}

// StatementEntry is one line of a wallet's statement.
type StatementEntry struct {
	EntryID        int64         `db:"entry_id"`
	TransactionID  string        `db:"transaction_id"`
	TransType      string        `db:"trans_type"`
	Narrative      string        `db:"narrative"`
	Amount         money.Amount  `db:"amount"`
	RunningBalance *money.Amount `db:"running_balance"`
	CreatedAt      time.Time     `db:"created_at"`
}

// WalletStatement pages through one of the merchant's wallets' ledger entries,
// newest first, before entry before (0: from the newest), by the wallet's ledger
// index; another merchant's wallet id lists nothing.
func WalletStatement(ctx context.Context, q sqlx.QueryerContext, merchantID, walletID string, before int64, limit int) ([]StatementEntry, bool, error) {
	var out []StatementEntry
	err := sqlx.SelectContext(ctx, q, &out, `SELECT entry_id, transaction_id, trans_type, narrative, amount, running_balance, created_at
		  FROM ledger_entries WHERE wallet_id = $2 AND merchant_id = $1 AND ($3 = 0 OR entry_id < $3)
		 ORDER BY entry_id DESC LIMIT $4`, merchantID, walletID, before, limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("wallet statement: %w", err)
	}
	out, more := cutPage(out, limit)
	return out, more, nil
}

// Attempt is one try to deliver an event to a webhook, with the signature headers
// it sent ("" for attempts recorded before migration 0052).
type Attempt struct {
	WebhookID  string    `db:"webhook_id"`
	At         time.Time `db:"at"`
	HTTPStatus *int      `db:"http_status"`
	LatencyMS  int       `db:"latency_ms"`
	Error      *string   `db:"error"`
	Replay     bool      `db:"replay"`
	Signed
}

// EventAttempts lists the attempts of one of the merchant's events, newest first
// (scoped through the merchant's deliveries: another merchant's event lists none).
func EventAttempts(ctx context.Context, q sqlx.QueryerContext, merchantID, eventID string, limit int) ([]Attempt, error) {
	var out []Attempt
	err := sqlx.SelectContext(ctx, q, &out, `SELECT a.webhook_id, a.at, a.http_status, a.latency_ms, a.error, a.replay,
			coalesce(a.signed_id, '') AS signed_id, coalesce(a.signed_timestamp, '') AS signed_timestamp,
			coalesce(a.signature, '') AS signature
		  FROM webhook_attempts a JOIN webhook_deliveries d ON d.event_id = a.event_id AND d.webhook_id = a.webhook_id
		 WHERE a.event_id = $2 AND d.merchant_id = $1 ORDER BY a.at DESC, a.attempt_id DESC LIMIT $3`, merchantID, eventID, limit)
	if err != nil {
		return nil, fmt.Errorf("event attempts: %w", err)
	}
	return out, nil
}
