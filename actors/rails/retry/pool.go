package retry

import (
	"context"
	"fmt"
	"sync"
)

// Pool runs a simulator's requests, each on its own goroutine until its last
// result is delivered or abandoned: at most max at once, all cancelled by Close.
type Pool struct {
	sem    chan struct{}
	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	mu     sync.Mutex // orders wg.Add against Close
	closed bool
	wg     sync.WaitGroup
}

// NewPool returns a pool of max slots.
func NewPool(max int) *Pool {
	ctx, cancel := context.WithCancel(context.Background())
	return &Pool{sem: make(chan struct{}, max), ctx: ctx, cancel: cancel}
}

// Admit takes a slot for one request, waiting while every slot is held until ctx
// ends. It returns errClosed once Close was called, and errBusy wrapping ctx's
// error when ctx ended first; the caller's own errors, so each rail keeps its
// sentinels. A slot taken must be handed to Start.
func (p *Pool) Admit(ctx context.Context, errClosed, errBusy error) error {
	if p.ctx.Err() != nil {
		return errClosed
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", errBusy, err)
	}
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", errBusy, ctx.Err())
	case <-p.ctx.Done():
		return errClosed
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.sem
		return errClosed
	}
	p.wg.Add(1)
	p.mu.Unlock()
	return nil
}

// Start runs job in the slot Admit took, on its own goroutine. Its context keeps
// the caller's values (trace ids) but not its deadline; Close cancels it.
func (p *Pool) Start(ctx context.Context, job func(context.Context)) {
	jobCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(p.ctx, cancel)
	go func() {
		defer p.wg.Done()
		defer func() { <-p.sem }()
		defer cancel()
		defer stop()
		job(jobCtx)
	}()
}

// Held is how many slots are held: requests not yet played to their end.
func (p *Pool) Held() int { return len(p.sem) }

// Close refuses new requests, cancels the running ones' contexts and returns
// once every one has ended. Safe to call more than once.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
}
