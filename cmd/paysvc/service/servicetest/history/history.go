package history

import (
	"fmt"
	"os"
	"sync"
	"time"
)

// Input is one client operation: Deposit, Transfer or Read.
type Input interface {
	isInput()
}

// Deposit adds Cents to Wallet.
type Deposit struct {
	Wallet string
	Cents  int64
}

// Transfer moves Cents from From to To when From holds at least Cents; otherwise
// the service must refuse it.
type Transfer struct {
	From, To string
	Cents    int64
}

// Read asks for Wallet's balance.
type Read struct {
	Wallet string
}

func (Deposit) isInput()  {}
func (Transfer) isInput() {}
func (Read) isInput()     {}

type outcome uint8

const (
	outPending outcome = iota // not ended yet: checked as unknown
	outOk
	outRefused
	outBalance
	outUnknown
)

// record is one operation as the client saw it. Times are nanoseconds since the
// recorder was made; ret is infinity while the outcome is unknown.
type record struct {
	client    int
	in        Input
	call, ret int64
	out       outcome
	balance   int64 // a read's answer
}

// Recorder collects one history; it is safe for concurrent use by many clients.
type Recorder struct {
	start time.Time

	mu      sync.Mutex
	last    int64 // the last timestamp handed out
	ops     []record
	initial map[string]int64
	dir     string
}

// NewRecorder starts an empty history; its clock starts now.
func NewRecorder() *Recorder {
	return &Recorder{start: time.Now(), initial: map[string]int64{}, dir: os.TempDir()}
}

// Initial sets the balance wallet holds before the history starts (the balance a
// test set up before the clients began); wallets never set start at 0.
func (r *Recorder) Initial(wallet string, cents int64) {
	if wallet == "" {
		panic("history: Initial with an empty wallet")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.initial[wallet] = cents
}

// VisualizeIn sets the directory Check writes the HTML visualization of a failing
// partition to; it is os.TempDir() unless set, and "" writes none (for tests
// that check many failing histories).
func (r *Recorder) VisualizeIn(dir string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dir = dir
}

// clock returns a timestamp strictly after every earlier one. Two events taken on
// one goroutine must never share a timestamp: porcupine treats equal times as
// concurrent, which would let a stale read right after a write pass. Bumping a
// tie by a nanosecond only orders events as their lock acquisitions were, an
// instant inside each Begin or end call, so no real-time order is invented.
// r.mu must be held.
func (r *Recorder) clock() int64 {
	t := time.Since(r.start).Nanoseconds()
	if t <= r.last {
		t = r.last + 1
	}
	r.last = t
	return t
}

// Pending is an operation that has been invoked and not yet ended.
type Pending struct {
	r *Recorder
	i int
}

// Begin records the invocation of in by client now and returns its handle; call
// it right before sending the request. Exactly one of Ok, Refused, Balance or
// Unknown must end it. client numbers the caller's clients from 0 (porcupine's
// visualization draws one line per client).
func (r *Recorder) Begin(client int, in Input) *Pending {
	if client < 0 {
		panic(fmt.Sprintf("history: client %d: clients are numbered from 0", client))
	}
	validate(in)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, record{client: client, in: in, call: r.clock(), ret: infinity})
	return &Pending{r: r, i: len(r.ops) - 1}
}

// validate panics on inputs the model has no meaning for: they are mistakes in
// the test, and checking them would only produce confusing verdicts.
func validate(in Input) {
	switch in := in.(type) {
	case Deposit:
		if in.Wallet == "" || in.Cents <= 0 {
			panic(fmt.Sprintf("history: %#v: a deposit needs a wallet and a positive amount", in))
		}
	case Transfer:
		if in.From == "" || in.To == "" || in.Cents <= 0 {
			panic(fmt.Sprintf("history: %#v: a transfer needs two wallets and a positive amount", in))
		}
	case Read:
		if in.Wallet == "" {
			panic("history: a read needs a wallet")
		}
	default:
		panic(fmt.Sprintf("history: unknown input %T", in))
	}
}

// Ok ends a deposit or transfer that was acknowledged (2xx): it happened, once,
// between Begin and now.
func (p *Pending) Ok() { p.end(outOk, 0) }

// Refused ends a deposit or transfer that got a definite refusal (4xx, e.g.
// insufficient funds): it did not happen and never will.
func (p *Pending) Refused() { p.end(outRefused, 0) }

// Balance ends a read with the balance the service answered.
func (p *Pending) Balance(cents int64) { p.end(outBalance, cents) }

// Unknown ends an operation whose outcome the client cannot know (timeout,
// connection reset, 5xx): it may have happened at any time after Begin, or never.
func (p *Pending) Unknown() { p.end(outUnknown, 0) }

func (p *Pending) end(out outcome, balance int64) {
	r := p.r
	r.mu.Lock()
	defer r.mu.Unlock()
	op := &r.ops[p.i]
	if op.out != outPending {
		panic(fmt.Sprintf("history: operation %s of client %d ended twice", describeInput(op.in), op.client))
	}
	_, isRead := op.in.(Read)
	switch {
	case isRead && (out == outOk || out == outRefused):
		panic(fmt.Sprintf("history: %s ended with Ok/Refused; a read ends with Balance or Unknown", describeInput(op.in)))
	case !isRead && out == outBalance:
		panic(fmt.Sprintf("history: %s ended with Balance; only a read has one", describeInput(op.in)))
	}
	op.out, op.balance = out, balance
	if out != outUnknown {
		op.ret = r.clock()
	}
}

// Len is the number of operations begun so far.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ops)
}

// Report describes a check.
type Report struct {
	Operations int           // operations recorded
	Partitions int           // independent groups of wallets checked
	Unknown    int           // operations ended with Unknown or never ended
	Took       time.Duration // the whole Check, including the search for a short history when it fails
}

func describeInput(in Input) string {
	switch in := in.(type) {
	case Deposit:
		return fmt.Sprintf("deposit %s %d", in.Wallet, in.Cents)
	case Transfer:
		return fmt.Sprintf("transfer %s->%s %d", in.From, in.To, in.Cents)
	case Read:
		return fmt.Sprintf("read %s", in.Wallet)
	}
	return fmt.Sprintf("%v", in)
}
