package main

import (
	"bytes"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"paysvc/cmd/paysvc-bench/chart"
)

const (
	dataFile  = "../../docs/benchmarks.tsv"
	pageFile  = "../../docs/benchmarks.md"
	chartFile = "../../docs/img/benchmarks.png"
)

func readFigures(t *testing.T) []chart.Row {
	t.Helper()
	f, err := os.Open(dataFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := chart.Read(f)
	if err != nil {
		t.Fatalf("%s: %v", dataFile, err)
	}
	return rows
}

// docs/benchmarks.md's table and docs/img/benchmarks.png are what the data file
// makes: a figure edited in one place only fails here.
func TestCommittedFiguresMatchData(t *testing.T) {
	rows := readFigures(t)
	const fix = "run `go run ./cmd/paysvc-bench chart` from the repository root after editing docs/benchmarks.tsv"

	t.Run("Table", func(t *testing.T) {
		page, err := os.ReadFile(pageFile)
		if err != nil {
			t.Fatal(err)
		}
		got, err := chart.TableIn(string(page))
		if err != nil {
			t.Fatalf("%s: %v", pageFile, err)
		}
		if want := chart.Table(rows); got != want {
			t.Errorf("%s's figures table differs from %s: %s\ngot:\n%s\nwant:\n%s", pageFile, dataFile, fix, got, want)
		}
	})

	t.Run("Chart", func(t *testing.T) {
		f, err := os.Open(chartFile)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		committed, err := png.Decode(f)
		if err != nil {
			t.Fatalf("%s: %v", chartFile, err)
		}
		drawn := chart.Draw(rows)
		if !samePixels(committed, drawn) {
			t.Errorf("%s is not the chart of %s: %s", chartFile, dataFile, fix)
		}
	})
}

func samePixels(a, b image.Image) bool {
	if a.Bounds() != b.Bounds() {
		return false
	}
	r := a.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			ar, ag, ab, aa := a.At(x, y).RGBA()
			br, bg, bb, ba := b.At(x, y).RGBA()
			if ar != br || ag != bg || ab != bb || aa != ba {
				return false
			}
		}
	}
	return true
}

// The subcommand writes a PNG that decodes to the chart and rewrites only the
// page's table, and needs no service configuration.
func TestChartCommand(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "chart.png")
	md := filepath.Join(dir, "page.md")
	page := "# Page\n\nbefore\n\n" + chart.BeginMarker + "\n| stale |\n" + chart.EndMarker + "\n\nafter\n"
	if err := os.WriteFile(md, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	getenv := func(string) string { return "" }
	if err := run(t.Context(), []string{"chart", "--in", dataFile, "--out", out, "--md", md}, getenv, &stdout, &stdout); err != nil {
		t.Fatalf("chart: %v\n%s", err, stdout.String())
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("the chart does not decode: %v", err)
	}
	if !samePixels(img, chart.Draw(readFigures(t))) {
		t.Error("the written PNG is not the chart of the data file")
	}
	got, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(page, "| stale |\n", chart.Table(readFigures(t)), 1)
	if string(got) != want {
		t.Errorf("page rewritten as\n%s\nwant\n%s", got, want)
	}
}
