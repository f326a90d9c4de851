package subscriptionkind

import (
	"encoding/json"
	"strings"
	"testing"

	"paysvc/actors/aggregates/subscription"
	"paysvc/actors/aggregates/tariff"
	"paysvc/actors/rails/card"
	"paysvc/topics"
)

// The subscription package names the card rail's outcomes without importing the
// rail: they must stay the same words.
func TestCardOutcomesAreTheRails(t *testing.T) {
	if subscription.CardApproves != card.OutcomeSuccess || subscription.CardDeclines != card.OutcomeDeclined ||
		subscription.CardInsufficientFunds != card.OutcomeInsufficientFunds {
		t.Fatal("subscription's card outcomes differ from rails/card's")
	}
	for _, pan := range []string{"4242424242424242", "4000000000000002", "4000000000009995", "5555555555554444"} {
		if !subscription.KnownCardOutcome(card.TestOutcome(pan)) {
			t.Fatalf("test card %s maps to an outcome setup refuses", pan)
		}
	}
}

// Only the approving test card approves a cycle; an absent or unknown outcome
// declines with a reason.
func TestDeclineReasonFailsClosed(t *testing.T) {
	if r := declineReason(card.OutcomeSuccess); r != "" {
		t.Fatalf("success declined: %q", r)
	}
	for _, o := range []string{"", "approved", "SUCCESS", card.OutcomeExpired, card.OutcomeDeclined, card.OutcomeInsufficientFunds} {
		if declineReason(o) == "" {
			t.Fatalf("outcome %q approved a cycle", o)
		}
	}
}

// A cycle command priced by its issuer, as the log may hold one, applies as it
// was priced, whatever fees and rates the kind now has; one that carries only the
// plan's terms is priced by the kind from them.
func TestCycleChargeLoggedOrPriced(t *testing.T) {
	now, err := tariff.ParseSchedule("CARD=0%+10.00")
	if err != nil {
		t.Fatal(err)
	}
	p := pricing{fees: now}
	decode := func(body string) *topics.SubscriptionCycle {
		var in topics.SubscriptionCycle
		if err := json.Unmarshal([]byte(body), &in); err != nil {
			t.Fatal(err)
		}
		return &in
	}
	terms := `"terms":{"name":"Gold","amount":"1000.00","currency":"KES"}`
	logged := decode(`{"subscription_id":"SUB1",` + terms + `,"value":"1000.00","charges":"35.00","net_amount":"965.00","rate":"1"}`)
	c, reason := p.charge(logged)
	if reason != "" || c.Value.String() != "1000.00" || c.Charges.String() != "35.00" || c.NetAmount.String() != "965.00" || c.Rate != "1" {
		t.Fatalf("logged price: %+v %q", c, reason)
	}
	refused := decode(`{"subscription_id":"SUB1",` + terms + `,"value":"0.00","charges":"0.00","net_amount":"0.00",` +
		`"price_error":"The amount does not cover the card fee."}`)
	if c, reason = p.charge(refused); reason != "The amount does not cover the card fee." || !c.Value.IsZero() {
		t.Fatalf("logged refusal: %+v %q", c, reason)
	}
	fresh := decode(`{"subscription_id":"SUB1",` + terms + `}`)
	c, reason = p.charge(fresh)
	if reason != "" || c.Value.String() != "1000.00" || c.Charges.String() != "10.00" || c.NetAmount.String() != "990.00" {
		t.Fatalf("priced now: %+v %q", c, reason)
	}
	// What the scheduler issues now carries no price, so the kind prices it.
	body, err := json.Marshal(topics.SubscriptionCycle{SubscriptionID: "SUB1",
		Terms: topics.SubscriptionTerms{Name: "Gold", Amount: "1000.00", Currency: "KES"}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(body), "value") || strings.Contains(string(body), "charges") {
		t.Fatalf("an unpriced cycle encodes a price: %s", body)
	}
}
