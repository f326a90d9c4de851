package rails_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/actors/rails"
	"paysvc/actors/rails/mpesa"
	"paysvc/actors/rails/mpesa/mpesatest"
	"paysvc/actors/values/money"
	"paysvc/actors/values/nettest"
	"paysvc/actors/values/waittest"
	"paysvc/storage/storagetest"
	"paysvc/topics"
)

// stkBundle runs the rails role (Run) against the fake Daraja over an in-process
// Kafka: STK requests go in on their topic, outcomes come out as commands.
type stkBundle struct {
	fake    *mpesatest.FakeDaraja
	prod    *kgo.Client
	brokers []string
	ns      topics.Namespace // of the topics the rails role reads and writes
	refuse  atomic.Int32     // connections to Daraja to refuse (really: dialled to a port nobody listens on)
	mu      sync.Mutex
	results map[string][]topics.ProviderResult // by invoice, in order
	cmds    map[string][]topics.Command        // the outcome commands, by invoice
}

func setupSTK(t *testing.T, opt rails.Options) *stkBundle {
	t.Helper()
	return setupSTKIn(t, opt, "")
}

// setupSTKIn is setupSTK with the topics in namespace ns (and the topics of the
// same names without it, another deployment's, on the cluster too).
func setupSTKIn(t *testing.T, opt rails.Options, ns topics.Namespace) *stkBundle {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	seed := []string{topics.CommandsTopic, topics.RailsMpesaSTKTopic}
	if ns != "" {
		seed = append(seed, ns.Topics(seed...)...)
	}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, seed...),
		kfake.GroupMinSessionTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	b := &stkBundle{fake: mpesatest.NewFakeDaraja(), results: map[string][]topics.ProviderResult{}, cmds: map[string][]topics.Command{},
		brokers: cluster.ListenAddrs(), ns: ns}
	if opt.Scope == nil {
		// A live rails role: M1 is its merchant, M9 the sandbox's.
		db := storagetest.New(t)
		db.DB.MustExec(`INSERT INTO merchants (merchant_id, name, environment) VALUES ('M1', 'Live Shop', 'live'), ('M9', 'Sandbox Shop', 'sandbox')`)
		opt.Scope = rails.NewScope(db.DB, "live", ns)
	}
	refused := nettest.RefusingAddr(t)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	dial := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if b.refuse.Load() > 0 && b.refuse.Add(-1) >= 0 {
			return dial(ctx, network, refused)
		}
		return dial(ctx, network, addr)
	}
	tr.DisableKeepAlives = true // every request dials: a refusal hits the request it was meant for
	d, err := mpesa.NewDaraja(b.fake.Config("http://127.0.0.1:1/cb/tok"), &http.Client{Transport: tr, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	b.prod, err = kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	// Both command topics: an outcome on the other deployment's would be seen.
	cons, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ConsumeTopics(seed[0], ns.Topic(topics.CommandsTopic)))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = rails.Run(ctx, cluster.ListenAddrs(), d, opt, log) }()
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			cons.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
				if r.Topic != ns.Topic(topics.CommandsTopic) {
					t.Errorf("an outcome on %s, outside the rails role's namespace %q", r.Topic, ns)
				}
				c, err := topics.DecodeCommand(r.Value)
				var pr topics.ProviderResult
				if err != nil || json.Unmarshal(c.Payload, &pr) != nil {
					return
				}
				b.mu.Lock()
				b.results[pr.InvoiceID] = append(b.results[pr.InvoiceID], pr)
				b.cmds[pr.InvoiceID] = append(b.cmds[pr.InvoiceID], c)
				b.mu.Unlock()
			})
		}
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		cons.Close()
		b.prod.Close()
		b.fake.Close()
		cluster.Close()
	})
	return b
}

func (b *stkBundle) push(t *testing.T, invoiceID, phone string) {
	t.Helper()
	b.pushFor(t, "M1", invoiceID, phone)
}

func (b *stkBundle) pushFor(t *testing.T, merchant, invoiceID, phone string) {
	t.Helper()
	b.pushOn(t, b.ns.Topic(topics.RailsMpesaSTKTopic), merchant, invoiceID, phone)
}

// pushOn is pushFor on the topic of that name on the cluster.
func (b *stkBundle) pushOn(t *testing.T, topic, merchant, invoiceID, phone string) {
	t.Helper()
	v, _ := json.Marshal(topics.STKRequest{InvoiceID: invoiceID, MerchantID: merchant, Phone: phone, Amount: money.MustParse("100"), AccountRef: "ref"})
	if err := b.prod.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Value: v}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// outcome waits for the first outcome of an invoice.
func (b *stkBundle) outcome(t *testing.T, invoiceID string) topics.ProviderResult {
	t.Helper()
	var first topics.ProviderResult
	waittest.Eventually(t, 20*time.Second, func() (bool, string) {
		b.mu.Lock()
		defer b.mu.Unlock()
		got := b.results[invoiceID]
		if len(got) > 0 {
			first = got[0]
		}
		return len(got) > 0, "no outcome for " + invoiceID
	})
	return first
}

// prompts counts the prompts Daraja took for a phone.
func (b *stkBundle) prompts(phone string) (n int, ref string) {
	for _, r := range b.fake.Requests() {
		if r.PhoneNumber == phone {
			n, ref = n+1, r.CheckoutRequestID
		}
	}
	return n, ref
}

func TestRunSTK_Daraja(t *testing.T) {
	t.Parallel()

	t.Run("UnknownOutcomeIsNeitherFailedNorResent", func(t *testing.T) {
		t.Parallel()
		b := setupSTK(t, rails.Options{RecordAccepted: true, Backoff: time.Millisecond})
		for i, fault := range []mpesatest.PushFault{mpesatest.FaultDropAnswer, mpesatest.FaultCutAnswer, mpesatest.FaultGarbage, mpesatest.FaultNoCheckoutID} {
			inv, phone := "INVU"+strconv.Itoa(i), "25471100000"+strconv.Itoa(i)
			b.fake.FaultNextPush(fault)
			b.push(t, inv, phone)
			got := b.outcome(t, inv)
			n, ref := b.prompts(phone)
			if got.Stage != rails.StageUnknown || n != 1 {
				t.Fatalf("fault %d: outcome %+v after %d prompts, want UNKNOWN after 1", fault, got, n)
			}
			if fault == mpesatest.FaultCutAnswer && got.CheckoutRequestID != ref {
				t.Fatalf("cut answer: reference %q, want the named %q", got.CheckoutRequestID, ref)
			}
			if fault != mpesatest.FaultCutAnswer && got.CheckoutRequestID != "" {
				t.Fatalf("fault %d: reference %q from nowhere", fault, got.CheckoutRequestID)
			}
		}
	})
	t.Run("CertainlyUnsentIsRetried", func(t *testing.T) {
		t.Parallel()
		b := setupSTK(t, rails.Options{RecordAccepted: true, Backoff: time.Millisecond})
		b.refuse.Store(3) // the token request and then the push are refused at first
		b.fake.FailNextPush(http.StatusTooManyRequests, "", "")
		b.push(t, "INVR", "254711000010")
		got := b.outcome(t, "INVR")
		n, ref := b.prompts("254711000010")
		if got.Stage != mpesa.StageAccepted || got.CheckoutRequestID != ref || n != 1 || b.refuse.Load() > 0 {
			t.Fatalf("outcome %+v after %d prompts (refusals left %d), want ACCEPTED of the one prompt", got, n, b.refuse.Load())
		}
	})
	t.Run("NeverReachableFailsAfterMaxAttempts", func(t *testing.T) {
		t.Parallel()
		b := setupSTK(t, rails.Options{RecordAccepted: true, Backoff: time.Millisecond, MaxAttempts: 3})
		b.refuse.Store(1 << 20)
		b.push(t, "INVN", "254711000011")
		got := b.outcome(t, "INVN")
		if got.Stage != mpesa.StageFinal || got.Code != -1 || len(b.fake.Requests()) != 0 {
			t.Fatalf("outcome %+v, want FINAL -1 with nothing sent", got)
		}
		if used := 1<<20 - b.refuse.Load(); used != 3 {
			t.Fatalf("%d connections tried, want 3 (MaxAttempts)", used)
		}
	})
	t.Run("OnlyItsEnvironmentsMerchants", func(t *testing.T) {
		// A live rails role and a sandbox one may share the topic: the live one
		// never prompts a sandbox merchant's payer, and its outcomes
		// say they are live and not simulated.
		t.Parallel()
		b := setupSTK(t, rails.Options{RecordAccepted: true, Backoff: time.Millisecond})
		b.pushFor(t, "M9", "INVS", "254711000013")
		b.pushFor(t, "MNONE", "INVX", "254711000014") // no such merchant: never sent either
		b.push(t, "INVL", "254711000015")
		got := b.outcome(t, "INVL") // after the two before it, in the one partition
		if got.Stage != mpesa.StageAccepted {
			t.Fatalf("live merchant's prompt: %+v", got)
		}
		if n, _ := b.prompts("254711000013"); n != 0 {
			t.Fatalf("a sandbox merchant's prompt reached Daraja %d times", n)
		}
		if n, _ := b.prompts("254711000014"); n != 0 {
			t.Fatalf("an unknown merchant's prompt reached Daraja %d times", n)
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		if len(b.results["INVS"])+len(b.results["INVX"]) != 0 {
			t.Fatalf("outcomes for the other environment: %+v %+v", b.results["INVS"], b.results["INVX"])
		}
		if c := b.cmds["INVL"][0]; c.Environment != "live" || c.Simulated {
			t.Fatalf("live outcome stamped %q simulated=%v", c.Environment, c.Simulated)
		}
	})
	t.Run("OnlyItsNamespacesRequests", func(t *testing.T) {
		// A rails role of a namespace reads its namespace's requests in its
		// namespace's group, and sends its outcomes to its namespace's command
		// log (setupSTKIn's consumer fails the test on any other): another
		// deployment's request on the same cluster is not sent.
		t.Parallel()
		b := setupSTKIn(t, rails.Options{RecordAccepted: true, Backoff: time.Millisecond}, "rails-ns.")
		b.pushOn(t, topics.RailsMpesaSTKTopic, "M1", "INVO", "254711000016")
		b.push(t, "INVNS", "254711000017")
		if got := b.outcome(t, "INVNS"); got.Stage != mpesa.StageAccepted {
			t.Fatalf("the namespace's prompt: %+v", got)
		}
		b.push(t, "INVNS2", "254711000018")
		b.outcome(t, "INVNS2")
		if n, _ := b.prompts("254711000016"); n != 0 {
			t.Fatalf("another deployment's prompt reached Daraja %d times", n)
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.brokers...))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		groups, err := kadm.NewClient(cl).ListGroups(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if g := groups.Groups(); !slices.Equal(g, []string{"rails-ns.paysvc-rails"}) {
			t.Fatalf("groups on the cluster %q, want the live rails role's of its namespace only", g)
		}
	})
	t.Run("RefusedBeforeAcceptanceFails", func(t *testing.T) {
		t.Parallel()
		b := setupSTK(t, rails.Options{RecordAccepted: true, Backoff: time.Millisecond})
		b.fake.FailNextPush(http.StatusBadRequest, "", "")
		b.push(t, "INVF", "254711000012")
		if got := b.outcome(t, "INVF"); got.Stage != mpesa.StageFinal || got.Code != -1 {
			t.Fatalf("outcome %+v, want FINAL -1", got)
		}
	})
}
