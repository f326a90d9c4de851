package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/actors/aggregates/refund"
	"paysvc/actors/aggregates/refund/refundkind"
	"paysvc/actors/aggregates/refund/refundstore"
	"paysvc/actors/rails"
	"paysvc/actors/rails/mpesa"
	"paysvc/actors/values/ids"
	"paysvc/actors/values/money"
	"paysvc/actors/values/waittest"
	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
	"paysvc/storage"
	"paysvc/topics"
)

// railStub plays a payer's refund rail (or any other producer) on the command
// log: it sends commands and waits until the engine has processed them.
type railStub struct {
	env *servicetest.Env
	cl  *kgo.Client
}

func newRailStub(t *testing.T, env *servicetest.Env) *railStub {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.Svc.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &railStub{env: env, cl: cl}
}

// send produces c under a fresh id (so that a repeated command is really tried
// again, not deduplicated), stamped with environment and simulated as given, and
// returns the engine's stored reply.
func (r *railStub) send(t *testing.T, c topics.Command, environment string, simulated bool) topics.Reply {
	t.Helper()
	c.ID, c.Environment, c.Simulated = ids.UUID(), environment, simulated
	value, err := topics.EncodeCommand(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.cl.ProduceSync(context.Background(), &kgo.Record{Topic: r.env.Topic(topics.CommandsTopic),
		Key: topics.CommandKey(c.MerchantID), Value: value}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var stored []byte
	waittest.Eventually(t, 15*time.Second, func() (bool, string) {
		_, s, ok, err := storage.ProcessedCommand(context.Background(), r.env.Schema.DB, c.MerchantID, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		stored = s
		return ok, fmt.Sprintf("%s %s not processed", c.Type, c.Payload)
	})
	reply, err := topics.DecodeReply(stored)
	if err != nil {
		t.Fatal(err)
	}
	return reply
}

// rail sends a sandbox rail's command, as the sandbox simulator would.
func (r *railStub) rail(t *testing.T, c topics.Command) topics.Reply {
	t.Helper()
	return r.send(t, c, topics.Sandbox, true)
}

func replyOK(t *testing.T, r topics.Reply, what string) {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("%s refused: %+v", what, r.Error)
	}
}

func replyRefused(t *testing.T, r topics.Reply, what string) {
	t.Helper()
	if r.Error == nil {
		t.Fatalf("%s applied: %s", what, r.Result)
	}
}

// stored reads the merchant's refund as stored (with the rail's taken flag,
// which the resource does not show).
func (b *bundle) stored(t *testing.T, id string) refund.Refund {
	t.Helper()
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	r, err := refundstore.Get(context.Background(), b.env.Schema.DB, b.merchant, n)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (b *bundle) wantWallet(t *testing.T, cur, avail, why string) {
	t.Helper()
	if c, a := b.balance(t, b.settlement); c != cur || a != avail {
		t.Fatalf("%s: wallet %s/%s, want %s/%s", why, c, a, cur, avail)
	}
}

func (b *bundle) cancelRefund(id string) servicetest.Response {
	return b.post("/api/v1/chargebacks/"+id+"/cancel/", nil)
}

// The rail's word wins over the merchant's. Here the test is
// the payer's rail (the sandbox simulator waits an hour), so each step happens
// exactly when the test says.
func TestRefunds_RailWinsOverMerchantCancel(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, func(c *service.Config) { c.SimAggregateDelay = time.Hour })
	b := newBundle(t, env, "Acme")
	rail := newRailStub(t, env)
	inv := b.collected(t, "1000")
	b.wantWallet(t, "985.00", "985.00", "collected")

	t.Run("TakenOverdueThenLateConfirmation", func(t *testing.T) {
		id := refundID(t, b.refund(inv, "100.00", ""))
		b.wantWallet(t, "985.00", "885.00", "held")
		replyOK(t, rail.rail(t, refundkind.TakeCommand(b.stored(t, id))), "take")
		if s := b.stored(t, id); s.State() != refund.StateTaken || b.get("/api/v1/chargebacks/" + id + "/").Map(t)["status"] != "PENDING" {
			t.Fatalf("after the take: %s", s.State())
		}
		r := b.cancelRefund(id)
		wantRefusal(t, r, 400, "not_cancellable")
		if d, _, _ := errorBody(t, r); !strings.Contains(d, "with the payer's rail") {
			t.Fatalf("cancel of a taken refund says %q", d)
		}
		b.wantWallet(t, "985.00", "885.00", "refused cancel of a taken refund")

		replyOK(t, rail.rail(t, refundkind.SettleCommand(b.stored(t, id), refund.StatusOverdue, "not confirmed")), "overdue")
		wantRefusal(t, b.cancelRefund(id), 400, "not_cancellable")
		b.wantWallet(t, "985.00", "885.00", "refused cancel of an OVERDUE refund")
		// The API's cancel before refund.cancel existed: a refund.settle to
		// CANCELLED carrying reply_to. It is the merchant's, so refused too.
		legacy := refundkind.SettleCommand(b.stored(t, id), refund.StatusCancelled, "Cancelled by the merchant")
		legacy.ReplyTo = "old-api-instance"
		replyRefused(t, rail.send(t, legacy, topics.Sandbox, false), "the old API cancel of an OVERDUE refund")
		if s := b.stored(t, id); s.Status != refund.StatusOverdue {
			t.Fatalf("refund %s after refused cancels", s.Status)
		}
		b.wantWallet(t, "985.00", "885.00", "refused old-style cancel")

		// The late confirmation is applied and debited, whatever the merchant asked.
		replyOK(t, rail.rail(t, refundkind.SettleCommand(b.stored(t, id), refund.StatusCompleted, "confirmed late")), "late confirmation")
		if s := b.stored(t, id); s.Status != refund.StatusCompleted || s.TransactionID == "" {
			t.Fatalf("after the late confirmation: %s %q", s.Status, s.TransactionID)
		}
		b.wantWallet(t, "885.00", "885.00", "late confirmation debits the held amount")
		var out string
		if err := env.Schema.DB.Get(&out, `SELECT coalesce(sum(amount), 0)::text FROM ledger_entries
			WHERE account = 'system:refunds_clearing'`); err != nil || out != "100.00" {
			t.Fatalf("refunds clearing %q (%v), want 100.00", out, err)
		}
		ledgerOK(t, b)
	})

	t.Run("DisputedIsTheRails", func(t *testing.T) {
		id := refundID(t, b.refund(inv, "50.00", ""))
		replyOK(t, rail.rail(t, refundkind.TakeCommand(b.stored(t, id))), "take")
		replyOK(t, rail.rail(t, refundkind.SettleCommand(b.stored(t, id), refund.StatusDisputed, "disputed")), "dispute")
		wantRefusal(t, b.cancelRefund(id), 400, "not_cancellable")
		b.wantWallet(t, "885.00", "835.00", "refused cancel of a DISPUTED refund")
		replyOK(t, rail.rail(t, refundkind.SettleCommand(b.stored(t, id), refund.StatusCancelled, "closed")), "dispute closed")
		b.wantWallet(t, "885.00", "885.00", "the rail closed the dispute")
	})

	t.Run("CancelBeforeTheTakeWins", func(t *testing.T) {
		id := refundID(t, b.refund(inv, "25.00", ""))
		if r := b.cancelRefund(id); r.Status != 200 || r.Map(t)["status"] != "CANCELLED" {
			t.Fatalf("cancel of an untaken PENDING refund: %d %s", r.Status, r.Body)
		}
		b.wantWallet(t, "885.00", "885.00", "cancelled before the take")
		// The rail comes too late: it may not take the refund, so it never pays.
		replyRefused(t, rail.rail(t, refundkind.TakeCommand(b.stored(t, id))), "take after the cancel")
		replyRefused(t, rail.rail(t, refundkind.SettleCommand(b.stored(t, id), refund.StatusCompleted, "")), "outcome after the cancel")
		if s := b.stored(t, id); s.Status != refund.StatusCancelled || !s.TakenAt.IsZero() {
			t.Fatalf("cancelled refund became %s (taken %v)", s.State(), s.TakenAt)
		}
		b.wantWallet(t, "885.00", "885.00", "refused rail commands")
		ledgerOK(t, b)
	})
}

// TestRefunds_EveryTripleThroughTheEngine sends every (state, command) through
// the running service, each command by its one principal (the merchant's through
// the API, the rail's on the command log), and compares the refund's state and
// the wallet with the code's table (refund.RuleFor), which TestRefundTable pins
// to docs/state-machines.md. The engine takes the principal from the command's
// type, so a command of another principal cannot be expressed here: the pure
// test tries those.
func TestRefunds_EveryTripleThroughTheEngine(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, func(c *service.Config) { c.SimAggregateDelay = time.Hour })
	b := newBundle(t, env, "Acme")
	rail := newRailStub(t, env)
	one := money.MustParse("1.00")

	// reach makes a 1.00 refund of inv and drives it into state.
	reach := func(inv, state string) string {
		t.Helper()
		id := refundID(t, b.refund(inv, "1.00", ""))
		switch state {
		case refund.StatusCancelled:
			if r := b.cancelRefund(id); r.Status != 200 {
				t.Fatalf("cancel: %d %s", r.Status, r.Body)
			}
		case refund.StateTaken, refund.StatusDisputed, refund.StatusOverdue, refund.StatusCompleted:
			replyOK(t, rail.rail(t, refundkind.TakeCommand(b.stored(t, id))), "take")
			if state != refund.StateTaken {
				replyOK(t, rail.rail(t, refundkind.SettleCommand(b.stored(t, id), state, "")), "settle "+state)
			}
		}
		if got := b.stored(t, id).State(); got != state {
			t.Fatalf("reached %s, want %s", got, state)
		}
		return id
	}
	wallet := func() (money.Amount, money.Amount) {
		c, a := b.balance(t, b.settlement)
		return money.MustParse(c), money.MustParse(a)
	}
	check := func(what, state, cmd, report string, applied bool, before, after string, c0, a0 money.Amount) {
		t.Helper()
		rule, ok := refund.RuleFor(state, cmd, report)
		ok = ok && rule.By == refund.PrincipalOf(cmd)
		c1, a1 := wallet()
		wantC, wantA := c0, a0
		switch rule.Money {
		case refund.MoneyHold:
			wantA = a0.Sub(one)
		case refund.MoneyRelease:
			wantA = a0.Add(one)
		case refund.MoneyDebit:
			wantC = c0.Sub(one)
		}
		switch {
		case !ok && applied:
			t.Errorf("%s: applied (%s -> %s), the table refuses it", what, before, after)
		case !ok && (after != before || !c1.Equal(c0) || !a1.Equal(a0)):
			t.Errorf("%s: refused, but %s -> %s, wallet %s/%s -> %s/%s", what, before, after, c0, a0, c1, a1)
		case ok && !applied:
			t.Errorf("%s: refused, the table says %s", what, rule.To)
		case ok && (after != rule.To || !c1.Equal(wantC) || !a1.Equal(wantA)):
			t.Errorf("%s: %s, wallet %s/%s -> %s/%s; the table says %s with %q", what, after, c0, a0, c1, a1, rule.To, rule.Money)
		}
	}

	// From no refund: the merchant's create.
	inv := b.collected(t, "100")
	c0, a0 := wallet()
	id := refundID(t, b.refund(inv, "1.00", ""))
	check("(none) + refund.create", refund.StateNone, refund.CmdCreate, "", true, refund.StateNone, b.stored(t, id).State(), c0, a0)

	type command struct{ typ, report string }
	commands := []command{{refund.CmdCreate, ""}, {refund.CmdCancel, ""}, {refund.CmdTake, ""}}
	for _, s := range refund.Statuses {
		commands = append(commands, command{refund.CmdSettle, s})
	}
	tried := 0
	for _, state := range refund.States {
		if state == refund.StateNone {
			continue
		}
		inv := b.collected(t, "100") // at most refund.MaxPerInvoice refunds each
		for _, c := range commands {
			id := reach(inv, state)
			cur := b.stored(t, id)
			c0, a0 := wallet()
			var applied bool
			switch c.typ {
			case refund.CmdCancel:
				r := b.cancelRefund(id)
				applied = r.Status == 200
				if !applied {
					wantRefusal(t, r, 400, "not_cancellable")
				}
			case refund.CmdCreate:
				// The merchant's create of an id that exists: only a producer
				// bypassing the API's sequence could send it.
				p := refund.Create{RefundID: cur.ID, InvoiceID: inv, Amount: one, Reason: "Other"}
				cmd := topics.Command{Type: refund.CmdCreate, Version: 1, MerchantID: b.merchant, IssuedAt: time.Now().UTC()}
				cmd.Payload = mustMarshal(t, p)
				applied = rail.send(t, cmd, topics.Sandbox, false).Error == nil
			case refund.CmdTake:
				applied = rail.rail(t, refundkind.TakeCommand(cur)).Error == nil
			case refund.CmdSettle:
				applied = rail.rail(t, refundkind.SettleCommand(cur, c.report, "")).Error == nil
			}
			name := state + " + " + c.typ + " " + c.report
			check(name, state, c.typ, c.report, applied, state, b.stored(t, id).State(), c0, a0)
			tried++
		}
	}
	if want := (len(refund.States) - 1) * len(commands); tried != want {
		t.Fatalf("tried %d, want %d", tried, want)
	}
	ledgerOK(t, b)
}

// The sandbox refund rail never touches a live merchant's
// refund, on a deployment where a sandbox process (with the simulator) and a
// live API process share one database and one command log.
func TestRefunds_SandboxRailNeverSettlesLive(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, func(c *service.Config) { c.SimAggregateDelay = 50 * time.Millisecond })
	live := servicetest.StartPeer(t, env, topics.Live, "api")
	sb := newBundle(t, env, "Sandbox Co")
	lb := newBundle(t, live, "Live Co")

	// A COMPLETE live collection. A live server has no M-Pesa simulator; the
	// test plays Daraja's final callback as the live rails role would send it
	// (the result's id is derived from the invoice and stage, so if anything
	// else answered the same prompt, one result applies).
	r := lb.post("/api/v1/payment/mpesa-stk-push/", map[string]any{"phone_number": "254708374149", "amount": "1000", "api_ref": "live"})
	if r.Status != 200 {
		t.Fatalf("live stk push: %d %s", r.Status, r.Body)
	}
	liveInv := r.Map(t)["invoice"].(map[string]any)["invoice_id"].(string)
	result, err := rails.ResultCommand(mpesa.Result{InvoiceID: liveInv, MerchantID: lb.merchant, Stage: mpesa.StageFinal,
		Code: 0, Receipt: "LIVEREF001", Amount: money.MustParse("1000")}, rails.Origin{Environment: topics.Live})
	if err != nil {
		t.Fatal(err)
	}
	stub := newRailStub(t, env)
	value, _ := topics.EncodeCommand(result)
	if err := stub.cl.ProduceSync(context.Background(), &kgo.Record{Topic: stub.env.Topic(topics.CommandsTopic),
		Key: topics.CommandKey(lb.merchant), Value: value}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if inv := lb.waitInvoice(t, liveInv); inv["state"] != "COMPLETE" {
		t.Fatalf("live invoice: %v", inv)
	}
	liveID := refundID(t, lb.refund(liveInv, "100.00", ""))
	liveCur, liveAvail := lb.balance(t, lb.settlement)

	// The control: sandbox refunds on the same server, made one after another
	// after the live one, are each taken and completed, so the rail's passes
	// that took them went by the live refund (several, not one that raced it).
	for range 3 {
		sbInv := sb.collected(t, "1000")
		sbID := refundID(t, sb.refund(sbInv, "100.00", ""))
		waittest.Eventually(t, 20*time.Second, func() (bool, string) {
			s := sb.stored(t, sbID)
			return s.Status == refund.StatusCompleted, fmt.Sprintf("the sandbox rail did not complete its own refund: %s", s.State())
		})
	}

	if s := lb.stored(t, liveID); s.State() != refund.StatusPending || !s.TakenAt.IsZero() {
		t.Fatalf("the sandbox rail acted on a live refund: %s (taken %v)", s.State(), s.TakenAt)
	}
	if c, a := lb.balance(t, lb.settlement); c != liveCur || a != liveAvail {
		t.Fatalf("live wallet %s/%s, was %s/%s", c, a, liveCur, liveAvail)
	}
	var railCmds int
	if err := env.Schema.DB.Get(&railCmds, `SELECT count(*) FROM processed_commands WHERE merchant_id = $1
		AND command_type IN ('refund.take', 'refund.settle')`, lb.merchant); err != nil || railCmds != 0 {
		t.Fatalf("%d rail commands processed for the live merchant (%v)", railCmds, err)
	}
	// A live refund has no rail yet: no money left, so its merchant may cancel it.
	if r := lb.cancelRefund(liveID); r.Status != 200 || r.Map(t)["status"] != "CANCELLED" {
		t.Fatalf("live cancel: %d %s", r.Status, r.Body)
	}
	if c, a := lb.balance(t, lb.settlement); c != liveCur || a != c {
		t.Fatalf("live wallet after cancel %s/%s, want %s/%s", c, a, liveCur, liveCur)
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
