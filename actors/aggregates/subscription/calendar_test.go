package subscription

import (
	"testing"
	"time"
)

func TestScheduleDate(t *testing.T) {
	cases := []struct {
		name, anchor, unit string
		freq, k            int
		want               string
	}{
		{"monthly 31st to February", "2025-01-31", UnitMonth, 1, 1, "2025-02-28"},
		{"monthly 31st to leap February", "2024-01-31", UnitMonth, 1, 1, "2024-02-29"},
		{"monthly 31st back to March 31 (no drift)", "2025-01-31", UnitMonth, 1, 2, "2025-03-31"},
		{"monthly 31st to April 30", "2025-01-31", UnitMonth, 1, 3, "2025-04-30"},
		{"monthly 30th in February", "2025-01-30", UnitMonth, 1, 1, "2025-02-28"},
		{"monthly 29th in leap February", "2028-01-29", UnitMonth, 1, 1, "2028-02-29"},
		{"monthly across the year end", "2025-11-30", UnitMonth, 1, 3, "2026-02-28"},
		{"monthly 12 cycles", "2025-01-31", UnitMonth, 1, 12, "2026-01-31"},
		{"every 2 months from the 31st", "2025-12-31", UnitMonth, 2, 1, "2026-02-28"},
		{"every 3 months", "2025-01-15", UnitMonth, 3, 2, "2025-07-15"},
		{"default unit is monthly", "2025-05-31", "", 1, 1, "2025-06-30"},
		{"yearly Feb 29 to non-leap", "2024-02-29", UnitYear, 1, 1, "2025-02-28"},
		{"yearly Feb 29 back to leap", "2024-02-29", UnitYear, 1, 4, "2028-02-29"},
		{"yearly Feb 29 three years on", "2024-02-29", UnitYear, 1, 3, "2027-02-28"},
		{"every 2 years", "2025-03-01", UnitYear, 2, 1, "2027-03-01"},
		{"daily", "2025-02-27", UnitDay, 1, 2, "2025-03-01"},
		{"daily leap day", "2024-02-28", UnitDay, 1, 1, "2024-02-29"},
		{"every 10 days", "2025-01-25", UnitDay, 10, 1, "2025-02-04"},
		{"weekly", "2025-12-29", UnitWeek, 1, 1, "2026-01-05"},
		{"every 2 weeks", "2025-01-01", UnitWeek, 2, 3, "2025-02-12"},
		{"slot 0 is the anchor", "2025-01-31", UnitMonth, 1, 0, "2025-01-31"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ScheduleDate(c.anchor, c.unit, c.freq, c.k)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Fatalf("ScheduleDate(%s, %s, %d, %d) = %s, want %s", c.anchor, c.unit, c.freq, c.k, got, c.want)
			}
		})
	}
}

func TestScheduleDateRefusesBadInput(t *testing.T) {
	for _, c := range []struct {
		anchor, unit string
		freq         int
	}{
		{"2025-02-30", UnitMonth, 1}, {"2025/01/01", UnitMonth, 1}, {"2025-01-01", "Q", 1}, {"2025-01-01", UnitDay, 0},
	} {
		if _, err := ScheduleDate(c.anchor, c.unit, c.freq, 1); err == nil {
			t.Errorf("ScheduleDate(%q, %q, %d) accepted", c.anchor, c.unit, c.freq)
		}
	}
}

// A cycle is due from 00:00 EAT of its date, which is 21:00 UTC the day before.
func TestDueAtMidnightEAT(t *testing.T) {
	before := time.Date(2025, 3, 30, 20, 59, 59, 0, time.UTC)
	at := time.Date(2025, 3, 30, 21, 0, 0, 0, time.UTC)
	if IsDue("2025-03-31", before) {
		t.Fatal("due before midnight EAT")
	}
	if !IsDue("2025-03-31", at) {
		t.Fatal("not due at midnight EAT")
	}
	if IsDue("", at) {
		t.Fatal("an empty next_date is never due")
	}
	d, err := DueAt("2025-03-31")
	if err != nil || !d.Equal(at) {
		t.Fatalf("DueAt = %v, %v", d, err)
	}
	if Today(at) != "2025-03-31" || Today(before) != "2025-03-30" {
		t.Fatalf("Today: %s %s", Today(at), Today(before))
	}
}
