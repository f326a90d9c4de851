package api_test

import (
	"encoding/json"
	"testing"

	"paysvc/topics"
)

func decodeEvent(b []byte) (topics.Event, error) {
	var ev topics.Event
	err := json.Unmarshal(b, &ev)
	return ev, err
}

func decodeTransfer(t *testing.T, b []byte) topics.WalletTransfer {
	t.Helper()
	var p topics.WalletTransfer
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	return p
}
