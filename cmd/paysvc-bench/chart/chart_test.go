package chart

import (
	"image/color"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	head := strings.Join(Columns, "\t") + "\n"
	t.Run("Figures", func(t *testing.T) {
		rows, err := Read(strings.NewReader("# a comment\n" + head +
			"transfer-hot\t5758\ttransfers/s\t796\t7.24\t-\tmake bench\n" +
			"payout-file\t6199\ttransactions/s\t-\t-\t-\t-\n"))
		if err != nil {
			t.Fatal(err)
		}
		want := []Row{
			{Scenario: "transfer-hot", Rate: 5758, Unit: "transfers/s", Plain: 796, Ratio: "7.24", Run: "make bench"},
			{Scenario: "payout-file", Rate: 6199, Unit: "transactions/s"},
		}
		if len(rows) != len(want) || rows[0] != want[0] || rows[1] != want[1] {
			t.Errorf("Read = %+v, want %+v", rows, want)
		}
	})
	for name, in := range map[string]string{
		"NoHeader":      "transfer-hot\t5758\ttransfers/s\t-\t-\t-\t-\n",
		"WrongHeader":   "scenario\trate\n",
		"MissingFields": head + "transfer-hot\t5758\n",
		"RateNotWhole":  head + "transfer-hot\t57.5\ttransfers/s\t-\t-\t-\t-\n",
		"RateMissing":   head + "transfer-hot\t-\ttransfers/s\t-\t-\t-\t-\n",
		"PlainNotWhole": head + "transfer-hot\t5758\ttransfers/s\tabc\t-\t-\t-\n",
		"NoUnit":        head + "transfer-hot\t5758\t-\t-\t-\t-\t-\n",
		"NoFigures":     head,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Read(strings.NewReader(in)); err == nil {
				t.Errorf("Read(%q) accepted it", in)
			}
		})
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 796: "796", 4612: "4,612", 1000000: "1,000,000", 123456: "123,456"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

// Every character the chart writes has a glyph: a missing one would be drawn as a
// box.
func TestFontCoversTheChart(t *testing.T) {
	rows := []Row{{Scenario: "transfer-spread (a/b)", Rate: 1234567890, Unit: "transfers/s", Plain: 1, Ratio: "7.24"}}
	texts := []string{"current figures (docs/benchmarks.tsv), operations/s", "paysvc", "plain http + postgresql, same scenario",
		"abcdefghijklmnopqrstuvwxyz0123456789 .,/-:()%+="}
	for _, r := range rows {
		texts = append(texts, r.Scenario, thousands(r.Rate)+" "+r.Unit, thousands(r.Plain)+" ("+r.Ratio+"x)")
	}
	for _, s := range texts {
		for _, ch := range strings.ToLower(s) {
			g, ok := glyphs[ch]
			if !ok {
				t.Errorf("no glyph for %q (in %q)", ch, s)
				continue
			}
			for _, line := range g {
				if len(line) != 5 || strings.Trim(line, ".#") != "" {
					t.Errorf("glyph %q has a bad row %q", ch, line)
				}
			}
		}
	}
}

// The picture has one bar per rate, scaled to the largest: the longest bar is
// barMaxW wide and a bar of half the rate is half as wide.
func TestDrawScalesBars(t *testing.T) {
	img := Draw([]Row{
		{Scenario: "a", Rate: 1000, Unit: "x/s", Plain: 500, Ratio: "2.00"},
		{Scenario: "b", Rate: 250, Unit: "x/s"},
	})
	top := margin + 3*lineH
	x0 := margin + labelW
	barWidth := func(y int, c color.RGBA) int {
		w := 0
		for img.RGBAAt(x0+w, y) == c {
			w++
		}
		return w
	}
	mid := barH / 2
	for _, tc := range []struct {
		name string
		y    int
		c    color.RGBA
		want int
	}{
		{"Largest", top + mid, ours, barMaxW},
		{"Plain", top + barH + gap + mid, plain, barMaxW / 2},
		{"Quarter", top + groupH + mid, ours, barMaxW / 4},
	} {
		if got := barWidth(tc.y, tc.c); got != tc.want {
			t.Errorf("%s bar: %d px wide, want %d", tc.name, got, tc.want)
		}
	}
	if got := img.Bounds().Dy(); got != top+2*groupH+margin {
		t.Errorf("height %d, want %d", got, top+2*groupH+margin)
	}
}

func TestWithTable(t *testing.T) {
	rows := []Row{{Scenario: "s", Rate: 1, Unit: "x/s"}}
	page := "a\n" + BeginMarker + "\nold\n" + EndMarker + "\nb\n"
	got, err := WithTable(page, rows)
	if err != nil {
		t.Fatal(err)
	}
	if want := "a\n" + BeginMarker + "\n" + Table(rows) + EndMarker + "\nb\n"; got != want {
		t.Errorf("WithTable = %q, want %q", got, want)
	}
	if _, err := WithTable("no markers", rows); err != ErrNoMarkers {
		t.Errorf("a page without markers: %v, want ErrNoMarkers", err)
	}
}
