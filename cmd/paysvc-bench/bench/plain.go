package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/lib/pq"

	"paysvc/actors/values/money"
)

// The plain baseline is what a straightforward service would do for each transfer:
// one Postgres transaction that locks both rows, checks the balance, moves the
// money and records it. It runs on the same server as paysvc's database, with the
// same shapes of load, so the ratio says what batching buys on this machine.

// plainShape mirrors a scenario on the baseline's account ids.
type plainShape struct {
	Name    string
	Groups  [][]int64 // spread: each merchant's accounts
	Hot     int64     // hot: the account every transfer credits (0: spread)
	Sources []int64
}

func (s plainShape) pick(rng *rand.Rand) (src, dst int64) {
	if s.Hot != 0 {
		return s.Sources[rng.IntN(len(s.Sources))], s.Hot
	}
	g := s.Groups[rng.IntN(len(s.Groups))]
	a := rng.IntN(len(g))
	b := rng.IntN(len(g) - 1)
	if b >= a {
		b++
	}
	return g[a], g[b]
}

type plainTables struct {
	Accounts, Transfers string
	N                   int64 // accounts, ids 1..N
	Initial             int64 // cents in each account
}

// setupPlain creates the baseline's own two tables (never paysvc's) with one
// account per bench wallet, each funded like the bench wallets.
func (r *runner) setupPlain(ctx context.Context, db *sql.DB, scenarios []*scenarioSetup) (plainTables, []plainShape, error) {
	t := plainTables{Accounts: "bench_accounts", Transfers: "bench_transfers"}
	if r.o.URL != "" {
		// A shared database: suffixed names, dropped at the end.
		t.Accounts += "_" + r.runID
		t.Transfers += "_" + r.runID
	}
	deposit, err := parseCents(r.o.Deposit)
	if err != nil {
		return t, nil, err
	}
	t.Initial = deposit
	var shapes []plainShape
	next := int64(1)
	for _, s := range scenarios {
		sh := plainShape{Name: s.Name}
		if s.Hot >= 0 {
			sh.Hot = next
			next++
			for range s.Sources {
				sh.Sources = append(sh.Sources, next)
				next++
			}
		} else {
			for _, m := range s.Merchants {
				var g []int64
				for range m.Wallets {
					g = append(g, next)
					next++
				}
				sh.Groups = append(sh.Groups, g)
			}
		}
		shapes = append(shapes, sh)
	}
	t.N = next - 1
	stmts := []string{
		`CREATE TABLE ` + t.Accounts + ` (id bigint PRIMARY KEY, balance numeric(20, 2) NOT NULL CHECK (balance >= 0))`,
		`CREATE TABLE ` + t.Transfers + ` (id bigserial PRIMARY KEY, src bigint NOT NULL, dst bigint NOT NULL,
			amount numeric(20, 2) NOT NULL, created_at timestamptz NOT NULL DEFAULT now())`,
	}
	for _, q := range stmts {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return t, nil, fmt.Errorf("baseline tables: %w", err)
		}
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO `+t.Accounts+` (id, balance) SELECT g, $2::numeric FROM generate_series(1, $1::bigint) g`,
		t.N, centsString(t.Initial)); err != nil {
		return t, nil, fmt.Errorf("baseline accounts: %w", err)
	}
	return t, shapes, nil
}

func (r *runner) dropPlain(ctx context.Context, db *sql.DB, t plainTables) {
	_, _ = db.ExecContext(ctx, `DROP TABLE IF EXISTS `+t.Accounts+`, `+t.Transfers)
}

var errPlainInsufficient = errors.New("insufficient funds")

// plainTransfer is the one transaction per transfer: rows locked in id order so
// two transfers between the same pair cannot deadlock.
func plainTransfer(ctx context.Context, conn *sql.Conn, t plainTables, src, dst int64, cents int64) error {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	rows, err := tx.QueryContext(ctx, `SELECT id, balance FROM `+t.Accounts+` WHERE id = ANY($1) ORDER BY id FOR UPDATE`,
		pq.Int64Array{src, dst})
	if err != nil {
		return err
	}
	var srcBal int64 = -1
	for rows.Next() {
		var id int64
		var bal money.Amount
		if err := rows.Scan(&id, &bal); err != nil {
			rows.Close()
			return err
		}
		if id == src {
			if srcBal, err = bal.Cents(); err != nil {
				rows.Close()
				return err
			}
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if srcBal < cents {
		return errPlainInsufficient
	}
	amount := centsString(cents)
	if _, err := tx.ExecContext(ctx, `UPDATE `+t.Accounts+` SET balance = balance + CASE WHEN id = $1 THEN -$3::numeric ELSE $3::numeric END
		WHERE id IN ($1, $2)`, src, dst, amount); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO `+t.Transfers+` (src, dst, amount) VALUES ($1, $2, $3::numeric)`, src, dst, amount); err != nil {
		return err
	}
	return tx.Commit()
}

// plainLoop is closedLoop for the baseline: conns workers, each on its own
// connection, one transaction per transfer.
func (r *runner) plainLoop(ctx context.Context, db *sql.DB, t plainTables, sh plainShape, conns int, warmup, dur time.Duration, requests int) (phaseResult, error) {
	p := phaseResult{Name: sh.Name, Mode: "plain", Concurrency: conns}
	cs := make([]*sql.Conn, conns)
	for i := range cs {
		c, err := db.Conn(ctx)
		if err != nil {
			return p, fmt.Errorf("baseline connection: %w", err)
		}
		defer c.Close()
		cs[i] = c
	}
	start := time.Now()
	measureFrom := start.Add(warmup)
	b := newBudget(measureFrom, measureFrom.Add(dur), requests)
	c := r.startCrew(conns, newCounter, func(i int, w *worker, rng *rand.Rand) {
		for ctx.Err() == nil {
			t0 := time.Now()
			measured, ok := b.next(t0)
			if !ok {
				return
			}
			src, dst := sh.pick(rng)
			err := plainTransfer(ctx, cs[i], t, src, dst, 1+rng.Int64N(100))
			lat := time.Since(t0)
			switch {
			case err == nil && measured:
				w.ok++
				w.lat = append(w.lat, lat)
			case err == nil:
				w.warmOK++
			case measured:
				w.errs.add(plainErrKey(err), err.Error())
			default:
				w.warmErrs.add(plainErrKey(err), err.Error())
			}
		}
	})
	r.finish(c, &p, measureFrom)
	return p, nil
}

func plainErrKey(err error) string {
	var pe *pq.Error
	switch {
	case errors.Is(err, errPlainInsufficient):
		return "insufficient_funds"
	case errors.As(err, &pe):
		return "sqlstate " + string(pe.Code)
	default:
		return "error"
	}
}

// checkPlain is the baseline's own conservation check: the accounts still hold
// what they were given, none is negative, and every committed transfer is recorded.
func checkPlain(ctx context.Context, db *sql.DB, t plainTables, committed int) (string, bool, error) {
	var sum money.Amount
	var negative, transfers int64
	if err := db.QueryRowContext(ctx, `SELECT sum(balance), count(*) FILTER (WHERE balance < 0), (SELECT count(*) FROM `+t.Transfers+`)
		FROM `+t.Accounts).Scan(&sum, &negative, &transfers); err != nil {
		return "", false, err
	}
	got, err := sum.Cents()
	if err != nil {
		return "", false, err
	}
	want := t.Initial * t.N
	ok := got == want && negative == 0 && transfers == int64(committed)
	return fmt.Sprintf("sum %s (expected %s), negative accounts %d, transfer rows %s (committed %s)",
		centsString(got), centsString(want), negative, strconv.FormatInt(transfers, 10), strconv.Itoa(committed)), ok, nil
}
