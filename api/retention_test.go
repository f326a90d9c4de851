package api_test

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"paysvc/actors/values/waittest"
	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
)

// A request retried with its Idempotency-Key is carried out once, whatever retention
// has pruned in between: first the key's record answers, then the engine's stored
// reply, and once that is emptied too, a 409 that applies nothing.
func TestIdempotencyKeyOutlivesRetention(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, func(c *service.Config) {
		c.API.IdempotencyTTL = 300 * time.Millisecond
		c.Retention = service.Retention{Interval: 50 * time.Millisecond, CommandReplies: 600 * time.Millisecond, WebhookEvents: time.Hour}
	})
	b := newBundle(t, env, "Acme")
	b.deposit(t, b.settlement, "100.00")
	w := b.wallet(t, "KES", "retained")

	first := b.transfer(b.settlement, w, "10.00", "Idempotency-Key", "pay-once")
	if first.Status != 200 {
		t.Fatalf("transfer: %d %s", first.Status, first.Body)
	}
	want := first.Map(t)
	sawReplay := false
	waittest.Eventually(t, 15*time.Second, func() (bool, string) {
		r := b.transfer(b.settlement, w, "10.00", "Idempotency-Key", "pay-once")
		if r.Status == 409 {
			_, code, _ := errorBody(t, r)
			if code != "reply_expired" {
				t.Fatalf("409 with code %q: %s", code, r.Body)
			}
			return true, ""
		}
		if r.Status != 200 {
			t.Fatalf("retry: %d %s", r.Status, r.Body)
		}
		// Same transfer, not a new one: the key's record, or after it the engine's
		// stored reply, answers.
		if got := r.Map(t); !sameJSON(got, want) {
			t.Fatalf("retry answered another transfer: %v, want %v", got, want)
		}
		if r.Header.Get("Idempotent-Replayed") == "" {
			sawReplay = true // the key's record was pruned; the engine answered
		}
		return false, "the stored reply was never trimmed"
	})
	if cur, avail := b.balance(t, b.settlement); cur != "90.00" || avail != "90.00" {
		t.Fatalf("settlement %s/%s after retries, want 90.00: paid once", cur, avail)
	}
	if cur, _ := b.balance(t, w); cur != "10.00" {
		t.Fatalf("destination %s, want 10.00", cur)
	}
	t.Logf("engine answered from its stored reply before trimming: %v", sawReplay)
	// Only the engine's trim empties replies, so it must have counted. (An expired
	// key's record may instead be deleted by the next request that meets it, which
	// the idempotency_keys count does not see.)
	if !metricAtLeast(t, env, `paysvc_retention_rows_total{table="processed_commands"}`, 1) {
		t.Fatal("the retention metric did not count the emptied replies")
	}
}

func sameJSON(a, b map[string]any) bool { return len(a) > 0 && reflect.DeepEqual(a, b) }

// metricAtLeast reads one sample (name with its labels, as exposed) from /metrics.
func metricAtLeast(t *testing.T, env *servicetest.Env, sample string, min float64) bool {
	t.Helper()
	for line := range strings.Lines(env.Metrics()) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), sample+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return err == nil && f >= min
		}
	}
	return false
}
