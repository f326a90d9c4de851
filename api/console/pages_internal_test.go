package console

import (
	"strings"
	"testing"
	"time"

	"paysvc/actors/values/money"
	"paysvc/storage"
)

// The console's pure helpers need no server: what the search box looks up, how
// a form's Nairobi time reaches the API, and how the overview's bars are laid out.
func TestSearchPhone(t *testing.T) {
	t.Parallel()
	for q, want := range map[string]string{
		"0712345678":      "254712345678",
		"712 345 678":     "254712345678",
		"+254-712-345678": "254712345678",
		"110345678":       "254110345678",
		"INV-123":         "",
		"071234567":       "",
		"":                "",
	} {
		if got := searchPhone(q); got != want {
			t.Errorf("searchPhone(%q) = %q, want %q", q, got, want)
		}
	}
}

func TestSearchTermCutsAtACharacter(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", searchMax-1) + "é" // é is two bytes: the cut falls inside it
	got := searchTerm("  " + long + "  ")
	if got != strings.Repeat("a", searchMax-1) {
		t.Fatalf("searchTerm cut to %d bytes %q, want the %d whole characters before the cut", len(got), got[len(got)-3:], searchMax-1)
	}
	if got := searchTerm("  INV-1 "); got != "INV-1" {
		t.Fatalf("searchTerm trims: got %q", got)
	}
}

func TestFrozenTimeIsNairobi(t *testing.T) {
	t.Parallel()
	if got := frozenTime("2025-01-31T09:30"); got != "2025-01-31T09:30:00+03:00" {
		t.Fatalf("frozenTime = %q, want Nairobi time in RFC 3339", got)
	}
	if got := frozenTime("not a time"); got != "not a time" {
		t.Fatalf("frozenTime passes what it cannot read to the API, got %q", got)
	}
	if got := consoleTime("2025-01-31T06:30:00Z"); got != "2025-01-31 09:30" {
		t.Fatalf("consoleTime = %q, want the minute in Nairobi", got)
	}
}

func TestBuildChartScalesFromCents(t *testing.T) {
	t.Parallel()
	from := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	amt := func(s string) money.Amount {
		a, err := money.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	flows := []storage.DayFlow{
		{Currency: "KES", Day: from, In: amt("100.00"), Out: amt("50.00")},
		{Currency: "KES", Day: from.AddDate(0, 0, 2), In: amt("0.01"), Out: money.Zero()},
	}
	ch := buildChart("KES", flows, from, 3)
	if len(ch.Bars) != 3 || ch.From != "2025-01-01" || ch.To != "2025-01-03" {
		t.Fatalf("bars %d from %s to %s, want 3 days from 2025-01-01", len(ch.Bars), ch.From, ch.To)
	}
	if ch.In != "100.01" || ch.Out != "50.00" || ch.Peak != "100.00" {
		t.Fatalf("totals in %s out %s peak %s", ch.In, ch.Out, ch.Peak)
	}
	if b := ch.Bars[0]; b.InH != ch.Base || b.OutH != ch.Base/2 {
		t.Fatalf("first day's bars %d and %d high, want the peak's %d and half of it", b.InH, b.OutH, ch.Base)
	}
	if b := ch.Bars[1]; b.InH != 0 || b.OutH != 0 || b.In != "0.00" {
		t.Fatalf("an empty day has no bars, got %+v", b)
	}
	if b := ch.Bars[2]; b.InH != 1 {
		t.Fatalf("a cent still shows as one pixel, got %d", b.InH)
	}
}
