package subscription

import (
	"fmt"
	"time"
)

// Zone is the time zone of every subscription date: Africa/Nairobi (EAT). Kenya
// keeps UTC+3 all year (no daylight saving since 1942), so a fixed zone is exact
// and needs no tz database on the host. A date's cycle is due at 00:00 EAT of that
// date (docs/api-decisions.md, "Subscriptions").
var Zone = time.FixedZone("EAT", 3*60*60)

// DateLayout is the wire form of a subscription date.
const DateLayout = "2006-01-02"

// Frequency units of a plan.
const (
	UnitDay   = "D"
	UnitWeek  = "W"
	UnitMonth = "M"
	UnitYear  = "Y"
)

// ParseDate reads a YYYY-MM-DD calendar date (a date, not an instant: midnight UTC
// is only its representation).
func ParseDate(s string) (time.Time, error) {
	d, err := time.Parse(DateLayout, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("subscription: date %q is not YYYY-MM-DD", s)
	}
	return d, nil
}

// Today is the calendar date of an instant in EAT.
func Today(now time.Time) string { return now.In(Zone).Format(DateLayout) }

// DueAt is the instant a date's cycle falls due: 00:00 EAT of that date.
func DueAt(date string) (time.Time, error) {
	d, err := ParseDate(date)
	if err != nil {
		return time.Time{}, err
	}
	return time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, Zone), nil
}

// IsDue reports whether a date's cycle is due at the instant now.
func IsDue(date string, now time.Time) bool {
	return date != "" && date <= Today(now) // YYYY-MM-DD sorts as dates do
}

func daysIn(y int, m time.Month) int {
	return time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// addMonths moves a date n months on, keeping its day of month, clamped to the end
// of a shorter month. It always counts from the anchor, never from the clamped
// result, so Jan 31 -> Feb 28 -> Mar 31 does not drift to the 28th.
func addMonths(anchor time.Time, n int) time.Time {
	total := int(anchor.Month()) - 1 + n
	y := anchor.Year() + floorDiv(total, 12)
	m := time.Month(floorMod(total, 12) + 1)
	d := min(anchor.Day(), daysIn(y, m))
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

func floorDiv(a, b int) int {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func floorMod(a, b int) int { return a - floorDiv(a, b)*b }

// ScheduleDate is the date of the k-th slot counted from an anchor (slot 0 is the
// anchor itself), for a plan billing every frequency units.
func ScheduleDate(anchor string, unit string, frequency, k int) (string, error) {
	a, err := ParseDate(anchor)
	if err != nil {
		return "", err
	}
	if frequency < 1 {
		return "", fmt.Errorf("subscription: frequency %d must be at least 1", frequency)
	}
	var d time.Time
	switch unit {
	case UnitDay:
		d = a.AddDate(0, 0, frequency*k)
	case UnitWeek:
		d = a.AddDate(0, 0, 7*frequency*k)
	case UnitMonth, "":
		d = addMonths(a, frequency*k)
	case UnitYear:
		d = addMonths(a, 12*frequency*k)
	default:
		return "", fmt.Errorf("subscription: unknown frequency unit %q", unit)
	}
	return d.Format(DateLayout), nil
}
