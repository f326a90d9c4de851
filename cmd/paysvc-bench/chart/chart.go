package chart

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"strconv"
	"strings"
)

// Row is one scenario's current figure: its rate (whole operations per second,
// of Unit), the plain HTTP + PostgreSQL service's rate on the same scenario (0
// when it has none), their ratio as the bench printed it, the CPU per operation
// (paysvc / PostgreSQL, µs) and the run it comes from. Fields the data file
// leaves as "-" are empty.
type Row struct {
	Scenario string
	Rate     int64
	Unit     string
	Plain    int64
	Ratio    string
	CPU      string
	Run      string
}

// Columns is the header line of the data file, in order.
var Columns = []string{"scenario", "rate", "unit", "plain", "ratio", "cpu_us", "run"}

// Read parses the data file: tab-separated, the header line Columns first, lines
// starting with # ignored.
func Read(r io.Reader) ([]Row, error) {
	sc := bufio.NewScanner(r)
	var rows []Row
	header := false
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if strings.TrimSpace(text) == "" || strings.HasPrefix(text, "#") {
			continue
		}
		f := strings.Split(text, "\t")
		if !header {
			if strings.Join(f, ",") != strings.Join(Columns, ",") {
				return nil, fmt.Errorf("line %d: header %q, want %q", line, text, strings.Join(Columns, "\t"))
			}
			header = true
			continue
		}
		if len(f) != len(Columns) {
			return nil, fmt.Errorf("line %d: %d fields, want %d", line, len(f), len(Columns))
		}
		for i := range f {
			if f[i] = strings.TrimSpace(f[i]); f[i] == "-" {
				f[i] = ""
			}
		}
		row := Row{Scenario: f[0], Unit: f[2], Ratio: f[4], CPU: f[5], Run: f[6]}
		var err error
		if row.Rate, err = strconv.ParseInt(f[1], 10, 64); err != nil || row.Rate <= 0 {
			return nil, fmt.Errorf("line %d: rate %q is not a positive whole number", line, f[1])
		}
		if f[3] != "" {
			if row.Plain, err = strconv.ParseInt(f[3], 10, 64); err != nil || row.Plain <= 0 {
				return nil, fmt.Errorf("line %d: plain %q is not a positive whole number", line, f[3])
			}
		}
		if row.Scenario == "" || row.Unit == "" {
			return nil, fmt.Errorf("line %d: scenario and unit are required", line)
		}
		rows = append(rows, row)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, errors.New("no figures")
	}
	return rows, nil
}

// thousands writes n with a comma between groups of three digits (4,612).
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Table is the Markdown table of the rows, as docs/benchmarks.md shows it.
func Table(rows []Row) string {
	var b strings.Builder
	b.WriteString("| scenario | paysvc | plain HTTP + PostgreSQL | paysvc / plain | CPU µs per operation, paysvc / PostgreSQL | run |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	for _, r := range rows {
		plain := "-"
		if r.Plain > 0 {
			plain = thousands(r.Plain) + " " + r.Unit
		}
		ratio := "-"
		if r.Ratio != "" {
			ratio = r.Ratio + "x"
		}
		cpu := "-"
		if r.CPU != "" {
			cpu = strings.ReplaceAll(r.CPU, "/", " / ")
		}
		fmt.Fprintf(&b, "| %s | **%s %s** | %s | %s | %s | %s |\n",
			r.Scenario, thousands(r.Rate), r.Unit, plain, ratio, cpu, orDash(r.Run))
	}
	return b.String()
}

// The chart's geometry, in pixels; the font is drawn at scale.
const (
	scale   = 2
	glyphW  = 6 * scale // 5 columns and a space
	lineH   = 9 * scale
	margin  = 16
	labelW  = 22 * glyphW
	valueW  = 20 * glyphW
	barMaxW = 480
	barH    = 11 * scale
	gap     = 3
	groupH  = 2*barH + gap + 10*scale
	width   = margin + labelW + barMaxW + valueW + margin
)

var (
	white = color.RGBA{0xff, 0xff, 0xff, 0xff}
	ink   = color.RGBA{0x22, 0x22, 0x22, 0xff}
	ours  = color.RGBA{0x33, 0x66, 0xcc, 0xff}
	plain = color.RGBA{0xa0, 0xa0, 0xa0, 0xff}
	axis  = color.RGBA{0xcc, 0xcc, 0xcc, 0xff}
)

// Draw renders the rows as a horizontal bar chart: per scenario its rate
// (blue) and, where it has one, the plain service's (grey), on one axis of
// operations per second, each bar labelled with its figure.
func Draw(rows []Row) *image.RGBA {
	top := margin + 3*lineH
	height := top + len(rows)*groupH + margin
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	draw.Draw(img, img.Bounds(), image.NewUniform(white), image.Point{}, draw.Src)

	text(img, margin, margin, "current figures (docs/benchmarks.tsv), operations/s", ink)
	legend := margin + lineH + 4
	fill(img, image.Rect(margin, legend, margin+barH, legend+7*scale), ours)
	text(img, margin+barH+glyphW, legend, "paysvc", ours)
	x := margin + barH + 8*glyphW
	fill(img, image.Rect(x, legend, x+barH, legend+7*scale), plain)
	text(img, x+barH+glyphW, legend, "plain http + postgresql, same scenario", ink)

	var max int64
	for _, r := range rows {
		max = max64(max, max64(r.Rate, r.Plain))
	}
	x0 := margin + labelW
	fill(img, image.Rect(x0-1, top-4, x0, top+len(rows)*groupH-8), axis)
	for i, r := range rows {
		y := top + i*groupH
		text(img, margin, y+(barH-7*scale)/2, r.Scenario, ink)
		bar(img, x0, y, r.Rate, max, ours, thousands(r.Rate)+" "+r.Unit)
		if r.Plain > 0 {
			bar(img, x0, y+barH+gap, r.Plain, max, plain, thousands(r.Plain)+" ("+r.Ratio+"x)")
		}
	}
	return img
}

// bar draws one bar of v on the scale of max, with its label after it.
func bar(img *image.RGBA, x0, y int, v, max int64, c color.RGBA, label string) {
	w := int(v * barMaxW / max)
	if w < 1 {
		w = 1
	}
	fill(img, image.Rect(x0, y, x0+w, y+barH), c)
	text(img, x0+w+glyphW/2, y+(barH-7*scale)/2, label, ink)
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

func fill(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	draw.Draw(img, r, image.NewUniform(c), image.Point{}, draw.Src)
}

// descenders (their glyphs start at the x-height) are drawn two rows lower, so
// their tails hang below the line the others sit on.
const descenders = "gpqy,"

// text writes s with its top-left corner at (x, y), upper case as lower case.
func text(img *image.RGBA, x, y int, s string, c color.RGBA) {
	for _, ch := range strings.ToLower(s) {
		g, ok := glyphs[ch]
		if !ok {
			g = box
		}
		top := y
		if strings.ContainsRune(descenders, ch) {
			top += 2 * scale
		}
		for row, bits := range g {
			for col, bit := range bits {
				if bit == '#' {
					fill(img, image.Rect(x+col*scale, top+row*scale, x+(col+1)*scale, top+(row+1)*scale), c)
				}
			}
		}
		x += glyphW
	}
}

// PNG is Draw's picture, encoded.
func PNG(rows []Row) ([]byte, error) {
	var b bytes.Buffer
	if err := png.Encode(&b, Draw(rows)); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// The Markdown page holds the table between these two lines.
const (
	BeginMarker = "<!-- figures: made from docs/benchmarks.tsv by `paysvc-bench chart`; edit the data file, not this table -->"
	EndMarker   = "<!-- end of figures -->"
)

// ErrNoMarkers is returned for a page without the two marker lines.
var ErrNoMarkers = errors.New("the page has no figures markers")

// TableIn returns the table of a page: what stands between the markers.
func TableIn(page string) (string, error) {
	i := strings.Index(page, BeginMarker+"\n")
	j := strings.Index(page, EndMarker)
	if i < 0 || j < i {
		return "", ErrNoMarkers
	}
	return page[i+len(BeginMarker)+1 : j], nil
}

// WithTable returns the page with the table between its markers replaced.
func WithTable(page string, rows []Row) (string, error) {
	old, err := TableIn(page)
	if err != nil {
		return "", err
	}
	i := strings.Index(page, BeginMarker+"\n") + len(BeginMarker) + 1
	return page[:i] + Table(rows) + page[i+len(old):], nil
}
