package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
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
// which step is running and, after, what each took; a step that runs long (one
// statement over a big ledger) shows its elapsed time every tick meanwhile, so
// silence never looks like a hang.
type progress struct {
	w    io.Writer
	tick time.Duration

	mu      sync.Mutex
	open    bool          // the last line written ends in "..." and has no newline yet
	stopped chan struct{} // closed when the open step ends
}

func newProgress(w io.Writer) *progress { return &progress{w: w, tick: 5 * time.Second} }

func (p *progress) line(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.open && strings.HasPrefix(s, "done"):
		fmt.Fprintln(p.w, " "+s)
		p.close()
		return
	case p.open:
		fmt.Fprintln(p.w)
		p.close()
	}
	if !strings.HasSuffix(s, "...") {
		fmt.Fprintln(p.w, s)
		return
	}
	fmt.Fprint(p.w, s)
	p.open, p.stopped = true, make(chan struct{})
	go p.heartbeat(p.stopped, time.Now())
}

// heartbeat writes the open step's elapsed time every tick until it ends.
func (p *progress) heartbeat(stopped chan struct{}, start time.Time) {
	t := time.NewTicker(p.tick)
	defer t.Stop()
	for {
		select {
		case <-stopped:
			return
		case <-t.C:
			p.mu.Lock()
			select {
			case <-stopped:
			default:
				fmt.Fprintf(p.w, " %s", time.Since(start).Round(time.Second))
			}
			p.mu.Unlock()
		}
	}
}

// close ends the open step; p.mu is held.
func (p *progress) close() {
	p.open = false
	close(p.stopped)
}

// end finishes a step left open (the command failed during it).
func (p *progress) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.open {
		fmt.Fprintln(p.w)
		p.close()
	}
}
