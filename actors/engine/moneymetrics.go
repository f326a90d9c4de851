package engine

import (
	"strings"

	"paysvc/actors/values/ledger"
	"paysvc/actors/values/money"
	"paysvc/storage"
)

// The money paths' metrics: what moved, counted once the batch that moved it
// committed (never when it was applied: a batch that fails is applied again).
var (
	// Minor units (cents: every currency here has two decimal places) summed
	// exactly in money.Amount per batch, then added as a whole number: the
	// counter keeps whole additions in an integer, and its float64 exposition
	// is exact below 2^53 minor units (90 trillion units of a currency).
	moneyIn = counterVec("paysvc_money_in_minor_total",
		"Value entering merchants' wallets from outside them, in minor units (cents), by currency and rail (the system account "+
			"on the other side: mpesa, card, pesalink, p2p, sandbox_funding, ...), counted once per committed ledger movement.",
		"currency", "rail")
	moneyOut = counterVec("paysvc_money_out_minor_total",
		"Value leaving merchants' wallets to outside them (payouts, refunds), in minor units (cents), by currency and rail, "+
			"counted once per committed ledger movement. Fees are not in it (paysvc_money_fees_minor_total).",
		"currency", "rail")
	moneyFees = counterVec("paysvc_money_fees_minor_total",
		"Fees charged to merchants' wallets (the service's income), in minor units (cents), by currency, counted once committed.",
		"currency")
)

// Rails of the money counters: the system accounts that are the other side of a
// movement into or out of the wallets, named without their prefix and suffix.
var moneyRails = map[string]string{
	ledger.SandboxFunding:   "sandbox_funding",
	ledger.MpesaClearing:    "mpesa",
	ledger.CardClearing:     "card",
	ledger.PesalinkClearing: "pesalink",
	ledger.AirtimeClearing:  "airtime",
	ledger.RTGSClearing:     "rtgs",
	ledger.P2PClearing:      "p2p",
	ledger.RefundsClearing:  "refunds",
}

func init() {
	// Every series a dashboard shows exists from the start, at 0, so an idle
	// service's panels read 0 rather than "No data".
	for cur := range money.Currencies {
		for _, rail := range moneyRails {
			moneyIn.WithLabelValues(cur, rail)
			moneyOut.WithLabelValues(cur, rail)
		}
		moneyFees.WithLabelValues(cur)
	}
	for _, r := range []string{"fenced", "stale", "error", "permanent"} {
		batchFailures.WithLabelValues(r)
	}
	repliesSent.WithLabelValues("local")
	repliesSent.WithLabelValues("kafka")
	dedupeIDs.WithLabelValues("read")
	dedupeIDs.WithLabelValues("fresh")
	// Command types are open-ended (registered kinds add theirs): panels of
	// paysvc_engine_commands_applied_total sum by outcome with `or vector(0)`.
}

// moneyKey is one money counter's series.
type moneyKey struct{ dir, currency, rail string }

// countMoney adds a committed batch's ledger movements across the wallets'
// boundary to the money counters: every entry on a system account is the other
// side of a wallet's movement. Sums are exact (money.Amount) before they become
// whole minor units.
func countMoney(entries []storage.EntryWrite) {
	var sums map[moneyKey]money.Amount
	for _, e := range entries {
		if !strings.HasPrefix(e.Account, "system:") || e.Amount.IsZero() {
			continue
		}
		var k moneyKey
		switch {
		case e.Account == ledger.Fees:
			if e.Amount.Sign() < 0 { // fees are charged, never given back, today
				continue
			}
			k = moneyKey{"fees", e.Currency, ""}
		case e.Amount.Sign() < 0: // the outside gave: the wallet side was credited
			k = moneyKey{"in", e.Currency, moneyRail(e.Account)}
		default:
			k = moneyKey{"out", e.Currency, moneyRail(e.Account)}
		}
		if sums == nil {
			sums = map[moneyKey]money.Amount{}
		}
		a := e.Amount
		if a.Sign() < 0 {
			a = a.Neg()
		}
		sums[k] = sums[k].Add(a)
	}
	for k, a := range sums {
		cents, err := a.Cents()
		if err != nil || cents <= 0 {
			continue
		}
		switch k.dir {
		case "in":
			moneyIn.WithLabelValues(k.currency, k.rail).Add(float64(cents))
		case "out":
			moneyOut.WithLabelValues(k.currency, k.rail).Add(float64(cents))
		case "fees":
			moneyFees.WithLabelValues(k.currency).Add(float64(cents))
		}
	}
}

func moneyRail(account string) string {
	if r, ok := moneyRails[account]; ok {
		return r
	}
	return strings.TrimSuffix(strings.TrimPrefix(account, "system:"), "_clearing")
}
