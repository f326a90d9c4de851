package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"paysvc/cmd/paysvc/service"
	"paysvc/storage"
)

func ledgerCheck(ctx context.Context, cfg service.Config, stdout, stderr io.Writer) error {
	db, err := storage.Open(ctx, cfg.DatabaseURL, 10*time.Second)
	if err != nil {
		return err
	}
	defer db.Close()
	p := newProgress(stderr)
	r, err := storage.CheckLedgerProgress(ctx, db, p.line)
	p.end()
	if err != nil {
		return err
	}
	if err := printJSON(stdout, r); err != nil {
		return err
	}
	if !r.OK {
		return errors.New("ledger check failed")
	}
	return nil
}

// progress writes a long command's progress lines to stderr, so stdout stays the
// JSON result scripts read. A step announced with a line ending in "..." stays
// open on the terminal until its "done in" line finishes it, so an operator sees
// which step is running and, after, what each took.
type progress struct {
	w    io.Writer
	open bool // the last line written ends in "..." and has no newline yet
}

func newProgress(w io.Writer) *progress { return &progress{w: w} }

func (p *progress) line(s string) {
	switch {
	case p.open && strings.HasPrefix(s, "done"):
		fmt.Fprintln(p.w, " "+s)
		p.open = false
		return
	case p.open:
		fmt.Fprintln(p.w)
	}
	if strings.HasSuffix(s, "...") {
		fmt.Fprint(p.w, s)
		p.open = true
		return
	}
	fmt.Fprintln(p.w, s)
	p.open = false
}

// end finishes a step left open (the command failed during it).
func (p *progress) end() {
	if p.open {
		fmt.Fprintln(p.w)
		p.open = false
	}
}
