package subscriptionkind

import (
	"testing"

	"paysvc/actors/aggregates/subscription"
	"paysvc/actors/rails/card"
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
