package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"paysvc/actors/values/waittest"
	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
	"paysvc/topics"
)

// hookReceiver collects the wallet_transfer_event deliveries of one deployment's
// webhook: the origin wallet of each, by webhook-id.
type hookReceiver struct {
	srv     *httptest.Server
	mu      sync.Mutex
	origins map[string]string
}

func newHookReceiver(t *testing.T) *hookReceiver {
	h := &hookReceiver{origins: map[string]string{}}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body struct {
			Data topics.WalletTransfer `json:"data"`
		}
		_ = json.Unmarshal(b, &body)
		h.mu.Lock()
		h.origins[r.Header.Get("webhook-id")] = body.Data.OriginWallet
		h.mu.Unlock()
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hookReceiver) received() map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]string, len(h.origins))
	for k, v := range h.origins {
		out[k] = v
	}
	return out
}

// deployment is one service of TestNamespacesShareOneCluster, its merchant and
// what it did.
type deployment struct {
	env        *servicetest.Env
	auth       []string
	settlement string
	hook       *hookReceiver
	invoices   []string
}

func newDeployment(t *testing.T, env *servicetest.Env, name string) *deployment {
	t.Helper()
	m := env.Merchant(name)
	d := &deployment{env: env, auth: servicetest.Bearer(m.SecretKey), hook: newHookReceiver(t)}
	if r := env.Do("POST", "/api/v1/webhooks/", map[string]any{"endpoint": d.hook.srv.URL + "/hook", "challenge": "secret-123",
		"wallet_transfer_event": true}, d.auth...); r.Status != 201 {
		t.Fatalf("%s: webhook: %d %s", name, r.Status, r.Body)
	}
	d.settlement = env.Settlement(d.auth)
	return d
}

// work deposits, transfers n times and asks for an M-Pesa payment (the rails
// role's round trip), each answered by its own engine.
func (d *deployment) work(t *testing.T, n int) {
	t.Helper()
	r := d.env.Do("POST", "/api/v1/wallets/", map[string]any{"currency": "KES", "label": "Dest"}, d.auth...)
	if r.Status != 201 {
		t.Fatalf("wallet: %d %s", r.Status, r.Body)
	}
	dest := r.Map(t)["wallet_id"].(string)
	if r := d.env.Do("POST", "/api/v1/sandbox/wallets/"+d.settlement+"/deposit/", map[string]any{"amount": "1000.00"}, d.auth...); r.Status != 200 {
		t.Fatalf("deposit: %d %s", r.Status, r.Body)
	}
	for i := 0; i < n; i++ {
		if r := d.env.Do("POST", "/api/v1/wallets/"+d.settlement+"/intra_transfer/", map[string]any{"wallet_id": dest, "amount": "1.00",
			"narrative": "ns"}, d.auth...); r.Status != 200 {
			t.Fatalf("transfer %d: %d %s", i, r.Status, r.Body)
		}
	}
	r = d.env.Do("POST", "/api/v1/payment/mpesa-stk-push/", map[string]any{"phone_number": "254722222222", "amount": "10"}, d.auth...)
	if r.Status != 200 {
		t.Fatalf("stk push: %d %s", r.Status, r.Body)
	}
	d.invoices = append(d.invoices, r.Map(t)["invoice"].(map[string]any)["invoice_id"].(string))
}

// settled waits until the deployment's invoices are COMPLETE and its receiver has
// every transfer's event, and checks that they all are its own merchant's.
func (d *deployment) settled(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second) // one bound for all the invoices and events together
	for _, id := range d.invoices {
		waittest.Eventually(t, time.Until(deadline), func() (bool, string) {
			r := d.env.Do("POST", "/api/v1/payment/status/", map[string]any{"invoice_id": id}, d.auth...)
			if r.Status != 200 {
				t.Fatalf("status: %d %s", r.Status, r.Body)
			}
			s := r.Map(t)["invoice"].(map[string]any)["state"]
			if s == "FAILED" {
				t.Fatalf("invoice %s is %v", id, s)
			}
			return s == "COMPLETE", fmt.Sprintf("invoice %s is %v", id, s)
		})
	}
	waittest.Eventually(t, time.Until(deadline), func() (bool, string) {
		got := len(d.hook.received())
		return got >= n, fmt.Sprintf("%d of %d transfer events delivered", got, n)
	})
	got := d.hook.received()
	if len(got) != n {
		t.Errorf("%d events delivered, want %d", len(got), n)
	}
	for id, origin := range got {
		if origin != d.settlement {
			t.Errorf("event %s of wallet %q delivered to the merchant of %s", id, origin, d.settlement)
		}
	}
}

// Two deployments on one Kafka cluster, each in its own namespace with its own
// database: the second runs on the first's embedded broker. Each applies its own
// merchant's commands only (every request is answered by its own engine, and
// neither database processed the other's commands), its rails role answers its own
// payments, and its dispatcher delivers its own events. The cluster holds exactly
// the two namespaces' topics and groups: nothing without a prefix.
func TestNamespacesShareOneCluster(t *testing.T) {
	t.Parallel()
	allowPrivate := func(c *service.Config) { c.API.WebhookAllowPrivate = true }
	// The first on an embedded broker of its own, whatever Kafka the other tests
	// share: the test counts every topic and group on the cluster.
	a := servicetest.Start(t, func(c *service.Config) {
		allowPrivate(c)
		c.KafkaBrokers = nil
	})
	b := servicetest.Start(t, func(c *service.Config) {
		allowPrivate(c)
		c.KafkaBrokers = a.Svc.Brokers
	})
	nsA, nsB := a.Config.KafkaNamespace, b.Config.KafkaNamespace
	if nsA == "" || nsB == "" || nsA == nsB {
		t.Fatalf("namespaces %q and %q: the test needs two", nsA, nsB)
	}
	da, db := newDeployment(t, a, "Alpha"), newDeployment(t, b, "Beta")
	const n = 12
	var wg sync.WaitGroup
	for _, d := range []*deployment{da, db} {
		wg.Go(func() { d.work(t, n) })
	}
	wg.Wait()
	da.settled(t, n)
	db.settled(t, n)
	for _, pair := range [][2]*servicetest.Env{{a, b}, {b, a}} {
		var foreign int
		if err := pair[0].Schema.DB.Get(&foreign, `SELECT count(*) FROM processed_commands WHERE merchant_id NOT IN (SELECT merchant_id FROM merchants)`); err != nil {
			t.Fatal(err)
		}
		if foreign != 0 {
			t.Errorf("the %s deployment's engine processed %d commands of merchants it does not have", pair[0].Config.KafkaNamespace, foreign)
		}
	}

	adm := a.Admin()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	list, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := list.Names()
	want := append(nsA.Topics(topics.AllTopics()...), nsB.Topics(topics.AllTopics()...)...)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("topics on the cluster:\n%q\nwant exactly the two namespaces':\n%q", got, want)
	}
	// Every consumer group of a sandbox deployment with every role, in each
	// namespace and nowhere else.
	var wantGroups []string
	for _, ns := range []topics.Namespace{nsA, nsB} {
		for _, g := range []string{"paysvc-engine", "paysvc-dispatcher", "paysvc-callbacks", "paysvc-rails-sandbox",
			"paysvc-rails-payout-sandbox", "paysvc-rails-" + topics.RailsCardTopic + "-sandbox", "paysvc-rails-" + topics.RailsPesalinkTopic + "-sandbox"} {
			wantGroups = append(wantGroups, ns.Group(g))
		}
	}
	slices.Sort(wantGroups)
	var groups []string
	ctxDeadline, _ := ctx.Deadline() // the groups share the listing's bound
	waittest.Eventually(t, time.Until(ctxDeadline), func() (bool, string) {
		listed, err := adm.ListGroups(ctx)
		if err == nil {
			groups = listed.Groups()
			slices.Sort(groups)
		}
		return err == nil && slices.Equal(groups, wantGroups), fmt.Sprintf("groups on the cluster:\n%q\nwant exactly:\n%q", groups, wantGroups)
	})
	for _, g := range groups {
		if !strings.HasPrefix(g, string(nsA)) && !strings.HasPrefix(g, string(nsB)) {
			t.Errorf("group %q outside both namespaces", g)
		}
	}
}
