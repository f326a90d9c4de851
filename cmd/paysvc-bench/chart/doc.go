// Package chart turns the current benchmark figures, docs/benchmarks.tsv, into
// the two things docs/benchmarks.md shows: its table of figures (Table) and its bar
// chart, docs/img/benchmarks.png (Draw). Both come from the one data file, so the
// page, the picture and the data cannot disagree: `paysvc-bench chart` rewrites
// them, and a test fails when the committed page or picture differs from what
// the data file makes.
//
// It uses the standard library only, with a 5x7 bitmap font of its own (font.go),
// so drawing the chart needs no font or image package.
package chart
