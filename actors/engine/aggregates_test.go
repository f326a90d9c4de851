package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/jmoiron/sqlx"

	"paysvc/actors/aggregates/wallet"
	"paysvc/actors/engine"
	"paysvc/actors/values/ledger"
	"paysvc/actors/values/money"
	"paysvc/topics"
)

// A registered kind that exists only in these tests: a "jar" holds money set aside
// from a wallet (testjar.put) and pays it out through the ledger (testjar.pay). The
// engine knows it only through Config.Kinds; its table and batch function are made
// here, as its own migration would.
const jarKind = "testjar"

type jar struct {
	ID     string       `json:"id"`
	Wallet string       `json:"wallet"`
	Held   money.Amount `json:"held"`
	Puts   int          `json:"puts"`
	Note   string       `json:"note"`
}

type jarPut struct {
	Jar, Wallet, Note string
	Amount            money.Amount
	RefuseAfterHold   bool
}

type jarPay struct{ Jar string }

// jarSkew takes Amount into the jar's wallet from the jar's clearing account
// (balanced, as every wallet command), then adds Stray to that account alone: the
// command's entries no longer balance.
type jarSkew struct {
	Jar, Wallet   string
	Amount, Stray money.Amount
}

// jarAggregate is the test-only kind, added to a bundle's kinds (b.kinds) as the
// service's list adds a real one, and declared as every aggregate is (Define):
// a hosted pure step, a wallet it refers to, money through the Tx money API.
func jarAggregate() engine.Kind {
	// What a jar's commands need in memory besides the jar: the wallet a put or
	// skew names, and the wallet a stored jar holds its money in (Refs).
	walletRef := func(id string) []engine.Ref { return []engine.Ref{{Kind: engine.MoneyKind, ID: id}} }
	return engine.Define[jar](jars{},
		engine.On[jar]("testjar.put", engine.Guard{}, func(p *jarPut) []string { return []string{p.Jar} }, putJar,
			engine.Needs(func(p *jarPut) []engine.Ref { return walletRef(p.Wallet) })),
		engine.On[jar]("testjar.pay", engine.Guard{}, func(p *jarPay) []string { return []string{p.Jar} }, payJar),
		engine.On[jar]("testjar.skew", engine.Guard{}, func(p *jarSkew) []string { return []string{p.Jar} }, skewJar,
			engine.Needs(func(p *jarSkew) []engine.Ref { return walletRef(p.Wallet) })),
	)
}

// jars is the jar's definition.
type jars struct{}

// theJars is the jar kind as its commands use it through a Tx.
const theJars = engine.Of[jar](jarKind)

func (jars) Name() string { return jarKind }

func (jars) New(id string) jar { return jar{ID: id, Held: money.Zero()} }

// Step is the jar's transition: a put adds to it (the first names its wallet), a
// pay empties it, a skew marks it.
func (jars) Step(j jar, msg any) (jar, any, error) {
	switch m := msg.(type) {
	case jarPut:
		if j.Wallet == "" {
			j.Wallet = m.Wallet
		}
		j.Held, j.Puts, j.Note = j.Held.Add(m.Amount), j.Puts+1, m.Note
	case jarPay:
		j.Held = money.Zero()
	case jarSkew:
		if j.Wallet == "" {
			j.Wallet = m.Wallet
		}
		j.Note = "skewed"
	default:
		return j, nil, errors.New("testjar: unknown message")
	}
	return j, nil, nil
}

func (jars) Refs(j jar) []engine.Ref {
	if j.Wallet == "" {
		return nil
	}
	return []engine.Ref{{Kind: engine.MoneyKind, ID: j.Wallet}}
}

func (jars) Load(ctx context.Context, q sqlx.QueryerContext, merchant string, ids []string) ([]engine.Stored[jar], error) {
	rows, err := q.QueryxContext(ctx, `SELECT id, version, state FROM testjars WHERE merchant_id = $1 AND id = ANY($2)`,
		merchant, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []engine.Stored[jar]
	for rows.Next() {
		var s engine.Stored[jar]
		var raw []byte
		if err := rows.Scan(&s.ID, &s.Version, &raw); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(raw, &s.State); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

func putJar(tx *engine.Tx, _ *topics.Command, in *jarPut) (topics.Reply, error) {
	r, err := theJars.Create(tx, in.Jar, *in)
	if err != nil {
		return topics.Reply{}, err
	}
	if err := tx.Hold(r.After.Wallet, in.Amount); err != nil {
		var we engine.WalletError
		if errors.As(err, &we) {
			return engine.WalletRefusal(we.Err), nil
		}
		return topics.Reply{}, err
	}
	if in.RefuseAfterHold {
		return engine.Refuse(engine.CodeInvalid, "refused after the hold", ""), nil
	}
	return jarChanged(tx, r.After), nil
}

func payJar(tx *engine.Tx, _ *topics.Command, in *jarPay) (topics.Reply, error) {
	j, ok := theJars.Find(tx, in.Jar)
	if !ok {
		return engine.Refuse(engine.CodeNotFound, "no such jar", ""), nil
	}
	err := tx.Debit(j.Wallet, "system:test_jar", "JAR", []wallet.Disbursement{{TransactionID: tx.TransactionID(), Amount: j.Held,
		Charge: money.Zero(), Narrative: "jar"}})
	if err != nil {
		return topics.Reply{}, err
	}
	r, err := theJars.Ask(tx, in.Jar, *in)
	if err != nil {
		return topics.Reply{}, err
	}
	return jarChanged(tx, r.After), nil
}

func skewJar(tx *engine.Tx, c *topics.Command, in *jarSkew) (topics.Reply, error) {
	r, err := theJars.Create(tx, in.Jar, *in)
	if err != nil {
		return topics.Reply{}, err
	}
	if err := tx.Credit(r.After.Wallet, wallet.Collect{TransactionID: tx.TransactionID(), Value: in.Amount,
		NetAmount: in.Amount, Charges: money.Zero(), Clearing: "system:test_jar", Narrative: "skew"}); err != nil {
		return topics.Reply{}, err
	}
	tx.AddEntryForTest(ledger.Entry{TransactionID: tx.TransactionID(), Account: "system:test_jar",
		MerchantID: c.MerchantID, Currency: "KES", Amount: in.Stray, TransType: "JAR", Narrative: "stray"})
	return jarChanged(tx, r.After), nil
}

// jarChanged emits the jar's event and answers its new state.
func jarChanged(tx *engine.Tx, j jar) topics.Reply {
	tx.Event(topics.ReversalEvent, j.ID, j)
	b, _ := json.Marshal(j)
	return topics.Reply{Result: b}
}

const jarSchema = `
CREATE TABLE testjars (merchant_id text NOT NULL, id text NOT NULL, version bigint NOT NULL, state jsonb NOT NULL,
                       PRIMARY KEY (merchant_id, id));
CREATE FUNCTION paysvc_apply_testjar(p_rows jsonb, p_at timestamptz) RETURNS void LANGUAGE plpgsql AS $$
DECLARE n bigint; r record;
BEGIN
    FOR r IN SELECT * FROM jsonb_to_recordset(p_rows) AS x(id text, merchant_id text, prev bigint, version bigint, state jsonb) LOOP
        IF r.prev = 0 THEN
            INSERT INTO testjars VALUES (r.merchant_id, r.id, r.version, r.state);
        ELSE
            UPDATE testjars SET version = r.version, state = r.state WHERE merchant_id = r.merchant_id AND id = r.id AND version = r.prev;
            GET DIAGNOSTICS n = ROW_COUNT;
            IF n <> 1 THEN RAISE EXCEPTION 'stale jar' USING ERRCODE = 'PS002'; END IF;
        END IF;
    END LOOP;
END $$;
INSERT INTO batch_aggregates (kind, description) VALUES ('testjar', 'engine tests');`

func (b *engineBundle) jar(t *testing.T, id string) (held string, puts int, version int64) {
	t.Helper()
	var raw []byte
	if err := b.db.QueryRowContext(b.ctx, `SELECT version, state FROM testjars WHERE merchant_id = $1 AND id = $2`, b.merchant, id).
		Scan(&version, &raw); err != nil {
		t.Fatalf("jar %s: %v", id, err)
	}
	var j jar
	if err := json.Unmarshal(raw, &j); err != nil {
		t.Fatal(err)
	}
	return j.Held.String(), j.Puts, version
}

func (b *engineBundle) balances(t *testing.T, walletID string) (cur, avail string) {
	t.Helper()
	if err := b.db.QueryRowContext(b.ctx, `SELECT current_balance::text, available_balance::text FROM wallets WHERE wallet_id = $1`,
		walletID).Scan(&cur, &avail); err != nil {
		t.Fatal(err)
	}
	return cur, avail
}

// A registered kind gets what built-in aggregates get: hydration, replies, exactly
// once, undo of a refused command's wallet moves, quarantine of a poison command,
// rehydration after a restart and after a stale snapshot, balanced ledger entries.
func TestRegisteredAggregate(t *testing.T) {
	b := setup(t)
	b.kinds = append(b.kinds, jarAggregate())
	if _, err := b.db.ExecContext(b.ctx, jarSchema); err != nil {
		t.Fatal(err)
	}
	stop := b.startEngine(t, "r1")
	ok(t, b.send(t, depositCmd(b, t, b.merchant, b.settle, "100.00")))
	put := func(jarID, amount, note string) topics.Command {
		return b.command(t, "testjar.put", b.merchant, jarPut{Jar: jarID, Wallet: b.settle, Amount: money.MustParse(amount), Note: note})
	}

	first := put("j1", "10.00", "a")
	r1 := b.send(t, first)
	ok(t, r1)
	ok(t, b.send(t, put("j1", "5.00", "b")))
	if held, puts, v := b.jar(t, "j1"); held != "15.00" || puts != 2 || v != 2 {
		t.Fatalf("jar after two puts: held %s, puts %d, version %d", held, puts, v)
	}
	if cur, avail := b.balances(t, b.settle); cur != "100.00" || avail != "85.00" {
		t.Fatalf("wallet %s/%s, want 100.00/85.00", cur, avail)
	}

	// Exactly once: the same command again gets the same reply and changes nothing.
	again := b.send(t, first)
	if string(encoded(t, again)) != string(encoded(t, r1)) {
		t.Fatalf("redelivered command answered %s, first answer %s", encoded(t, again), encoded(t, r1))
	}
	// A refusal after a wallet move undoes the move.
	refused := b.command(t, "testjar.put", b.merchant, jarPut{Jar: "j1", Wallet: b.settle, Amount: money.MustParse("1.00"), RefuseAfterHold: true})
	wantCode(t, b.send(t, refused), "invalid")
	wantCode(t, b.send(t, put("j1", "1000.00", "")), "insufficient_funds")
	if held, puts, _ := b.jar(t, "j1"); held != "15.00" || puts != 2 {
		t.Fatalf("jar changed by refused commands: held %s puts %d", held, puts)
	}
	if _, avail := b.balances(t, b.settle); avail != "85.00" {
		t.Fatalf("refused commands left available %s, want 85.00", avail)
	}
	// A malformed payload of a registered type is refused; an unknown type stays unknown.
	bad := topics.Command{ID: first.ID + "-bad", Type: "testjar.put", MerchantID: b.merchant, ReplyTo: b.hub.Instance(),
		Environment: topics.Sandbox, Payload: json.RawMessage(`{"Amount": "x"}`)}
	wantCode(t, b.send(t, bad), "invalid")
	wantCode(t, b.send(t, b.command(t, "testjar.nothing", b.merchant, jarPay{Jar: "j1"})), "unknown_command")

	// A poison command (a NUL the jsonb column refuses) among good ones: only it is
	// quarantined; the others apply once.
	good1, poison, good2 := put("j1", "1.00", "c"), put("j1", "1.00", "bad\x00note"), put("j2", "2.00", "d")
	waits := b.waitFor(t, good1, poison, good2)
	b.produce(t, -1, good1, poison, good2)
	ok(t, await(t, waits[0], "good1"))
	wantCode(t, await(t, waits[1], "poison"), "unprocessable_command")
	ok(t, await(t, waits[2], "good2"))
	if held, puts, _ := b.jar(t, "j1"); held != "16.00" || puts != 3 {
		t.Fatalf("jar j1 after the poison batch: held %s puts %d, want 16.00 / 3", held, puts)
	}
	if n := b.count(t, `SELECT count(*) FROM command_quarantine WHERE command_id = $1`, poison.ID); n != 1 {
		t.Fatalf("poison quarantined %d times", n)
	}

	// A restart rehydrates the jar from its row (not a new jar: that insert would
	// collide).
	stop()
	stop = b.startEngine(t, "r2")
	ok(t, b.send(t, put("j1", "4.00", "e")))
	if held, puts, _ := b.jar(t, "j1"); held != "20.00" || puts != 4 {
		t.Fatalf("after restart: held %s puts %d, want 20.00 / 4", held, puts)
	}

	// A snapshot changed behind the engine's back: the commit is stale, the jar is
	// loaded again and the command applies on top of the stored state.
	if _, err := b.db.ExecContext(b.ctx, `UPDATE testjars SET version = version + 1, state = jsonb_set(state, '{puts}', '100')
		WHERE id = 'j1'`); err != nil {
		t.Fatal(err)
	}
	ok(t, b.send(t, put("j1", "1.00", "f")))
	if _, puts, _ := b.jar(t, "j1"); puts != 101 {
		t.Fatalf("after a stale snapshot the jar has %d puts, want 101 (rehydrated)", puts)
	}
	// Paying out moves held money through balanced ledger entries.
	ok(t, b.send(t, b.command(t, "testjar.pay", b.merchant, jarPay{Jar: "j1"})))
	if cur, avail := b.balances(t, b.settle); cur != "79.00" || avail != "77.00" {
		t.Fatalf("after paying j1 (21.00) the wallet is %s/%s, want 79.00/77.00 (j2 still holds 2.00)", cur, avail)
	}
	// The ledger check accounts for the holds of the service's own kinds only
	// (storage.CheckLedger): j2's would be reported as a hold nothing open explains.
	ok(t, b.send(t, b.command(t, "testjar.pay", b.merchant, jarPay{Jar: "j2"})))
	if cur, avail := b.balances(t, b.settle); cur != "77.00" || avail != "77.00" {
		t.Fatalf("after paying j2 (2.00) the wallet is %s/%s, want 77.00/77.00", cur, avail)
	}
	b.ledgerOK(t)
	_ = stop
}

// A command whose entries do not balance is refused (internal), whatever its
// wallets did: nothing of it is written (no entry, no wallet change, no instance,
// no event), and the partition goes on with the next command.
func TestRegisteredAggregate_UnbalancedCommandRefused(t *testing.T) {
	b := setup(t)
	b.kinds = append(b.kinds, jarAggregate())
	if _, err := b.db.ExecContext(b.ctx, jarSchema); err != nil {
		t.Fatal(err)
	}
	b.startEngine(t, "u1")
	ok(t, b.send(t, depositCmd(b, t, b.merchant, b.settle, "100.00")))
	entries := b.count(t, `SELECT count(*) FROM ledger_entries`)
	outbox := b.count(t, `SELECT count(*) FROM outbox`)
	var version int64
	if err := b.db.QueryRowContext(b.ctx, `SELECT version FROM wallets WHERE wallet_id = $1`, b.settle).Scan(&version); err != nil {
		t.Fatal(err)
	}

	skew := b.command(t, "testjar.skew", b.merchant, jarSkew{Jar: "j1", Wallet: b.settle,
		Amount: money.MustParse("10.00"), Stray: money.MustParse("0.01")})
	wantCode(t, b.send(t, skew), "internal")
	if n := b.count(t, `SELECT count(*) FROM ledger_entries`); n != entries {
		t.Fatalf("%d ledger entries after the refused command, want %d (none of its own)", n, entries)
	}
	if n := b.count(t, `SELECT count(*) FROM ledger_entries WHERE command_id = $1`, skew.ID); n != 0 {
		t.Fatalf("the refused command wrote %d entries", n)
	}
	if cur, avail := b.balances(t, b.settle); cur != "100.00" || avail != "100.00" {
		t.Fatalf("wallet %s/%s after the refused command, want 100.00/100.00 (its credit undone)", cur, avail)
	}
	if n := b.count(t, `SELECT count(*) FROM testjars`); n != 0 {
		t.Fatalf("the refused command stored %d jars", n)
	}
	if n := b.count(t, `SELECT count(*) FROM outbox`); n != outbox {
		t.Fatalf("the refused command queued %d events", n-outbox)
	}
	b.ledgerOK(t)

	// The partition goes on: the next command applies on the wallet as it was.
	ok(t, b.send(t, b.command(t, "testjar.skew", b.merchant, jarSkew{Jar: "j1", Wallet: b.settle,
		Amount: money.MustParse("10.00"), Stray: money.Zero()})))
	if cur, avail := b.balances(t, b.settle); cur != "110.00" || avail != "110.00" {
		t.Fatalf("wallet %s/%s after the balanced command, want 110.00/110.00", cur, avail)
	}
	var after int64
	if err := b.db.QueryRowContext(b.ctx, `SELECT version FROM wallets WHERE wallet_id = $1`, b.settle).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if after != version+1 {
		t.Fatalf("wallet version %d, want %d: the refused command's change was kept", after, version+1)
	}
	b.ledgerOK(t)
}
