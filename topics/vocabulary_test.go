package topics_test

import (
	"testing"

	"paysvc/topics"
)

// Events use their own words for some values (the spec's note under the webhook
// topics); these are the translations.
func TestEventVocabulary(t *testing.T) {
	for status, want := range map[string]string{"PREVIEW-AND-APPROVE": "PREVIEW-AND-APPROVE", "PROCESSING": "PENDING",
		"COMPLETE": "PROCESSED", "CANCELLED": "CANCELLED", "FAILED": "FAILED"} {
		if got := topics.SendMoneyState(status); got != want {
			t.Errorf("SendMoneyState(%s) = %s, want %s", status, got, want)
		}
	}
	for provider, want := range map[string]string{"M-PESA": "MPESA", "CARD": "CARD", "PESALINK": "PESALINK"} {
		if got := topics.CollectionProvider(provider); got != want {
			t.Errorf("CollectionProvider(%s) = %s, want %s", provider, got, want)
		}
	}
}
