package api_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/actors/values/waittest"
	"paysvc/cmd/paysvc/service/servicetest"
	"paysvc/storage"
	"paysvc/topics"
)

// kafkaLog reads every record of every topic of the service on its Kafka (those
// of its namespace: the cluster may hold other services' too), from the
// beginning: the command log and every event topic.
func kafkaLog(t *testing.T, env *servicetest.Env) []*kgo.Record {
	t.Helper()
	ctx := context.Background()
	brokers := env.Svc.Brokers
	adm, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	list, err := kadm.NewClient(adm).ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, name := range list.Names() {
		if strings.HasPrefix(name, env.Topic("")) {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		t.Fatal("the service's Kafka has no topics")
	}
	ends, err := kadm.NewClient(adm).ListEndOffsets(ctx, names...)
	if err != nil {
		t.Fatal(err)
	}
	// Read each partition from its start up to the end it has now (nothing is
	// produced transactionally, so every offset below the end is a record).
	want := map[string]map[int32]kgo.Offset{}
	left := map[string]map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Fatalf("end offset of %s/%d: %v", o.Topic, o.Partition, o.Err)
		}
		if o.Offset == 0 {
			return
		}
		if want[o.Topic] == nil {
			want[o.Topic], left[o.Topic] = map[int32]kgo.Offset{}, map[int32]int64{}
		}
		want[o.Topic][o.Partition] = kgo.NewOffset().AtStart()
		left[o.Topic][o.Partition] = o.Offset
	})
	var out []*kgo.Record
	if len(want) == 0 {
		return out
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumePartitions(want))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	waittest.Eventually(t, 20*time.Second, func() (bool, string) {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := left[r.Topic][r.Partition]
			if !ok || r.Offset >= end {
				return // produced after the end was taken
			}
			out = append(out, r)
			if r.Offset+1 >= end {
				delete(left[r.Topic], r.Partition)
				if len(left[r.Topic]) == 0 {
					delete(left, r.Topic)
				}
			}
		})
		return len(left) == 0, fmt.Sprintf("the Kafka log was not read to its end: %v left", left)
	})
	return out
}

// commandsOf counts the command log's records for a merchant (commands are keyed
// by merchant id).
func commandsOf(t *testing.T, env *servicetest.Env, merchantID string) int {
	t.Helper()
	n := 0
	for _, r := range kafkaLog(t, env) {
		if r.Topic == env.Topic(topics.CommandsTopic) && string(r.Key) == merchantID {
			n++
		}
	}
	return n
}

// capabilities are one merchant's capabilities, minted on its own server.
type capabilities struct {
	b                     *bundle
	link                  string // a payment link's id
	checkout, checkoutSig string // a checkout session (public key) and its signature
	linkCheckout, linkSig string // the session the link's page opened, and its signature
	setupToken, plan, sub string // a PENDING subscription's setup token, its plan (plan_url), its id
	setupPath             string
}

func mintCapabilities(t *testing.T, b *bundle) capabilities {
	t.Helper()
	c := capabilities{b: b}
	r := b.post("/api/v1/paymentlinks/", map[string]any{"title": "Stall rent", "currency": "KES", "amount": 100})
	if r.Status != 201 {
		t.Fatalf("create link: %d %s", r.Status, r.Body)
	}
	c.link = r.Map(t)["id"].(string)
	r = b.env.Do("POST", "/pay/"+c.link+"/session/", map[string]any{})
	if r.Status != 200 {
		t.Fatalf("open the link's session: %d %s", r.Status, r.Body)
	}
	c.linkCheckout, c.linkSig = r.Map(t)["checkout_id"].(string), r.Map(t)["signature"].(string)
	r = b.env.Do("POST", "/api/v1/checkout/", map[string]any{"amount": 100, "currency": "KES", "public_key": b.public,
		"email": "payer@example.com"})
	if r.Status != 200 {
		t.Fatalf("create checkout: %d %s", r.Status, r.Body)
	}
	c.checkout, c.checkoutSig = r.Map(t)["id"].(string), r.Map(t)["signature"].(string)
	f := subFixture{b: b}
	c.plan = f.mustPost(t, "/api/v1/subscriptions/plans/", map[string]any{"name": "Gym", "amount": "100", "currency": "KES",
		"frequency": 1, "frequency_unit": "D", "billing_cycles": 3}, "plan_id")
	cust := f.mustPost(t, "/api/v1/subscriptions/customers/", map[string]any{"email": "ann@example.com", "first_name": "Ann",
		"last_name": "Otieno"}, "customer_id")
	// A live subscription is created through the live server's own API: creating
	// needs no card acquirer (only setting the card up does).
	r = b.post("/api/v1/subscriptions/subscriptions/", map[string]any{"plan_id": c.plan, "customer_id": cust})
	if r.Status != 201 {
		t.Fatalf("create subscription: %d %s", r.Status, r.Body)
	}
	sub := r.Map(t)
	c.sub = sub["subscription_id"].(string)
	c.setupPath = setupPath(t, sub)
	c.setupToken = strings.Trim(strings.TrimPrefix(c.setupPath, "/api/v1/subscriptions/setup/"), "/")
	return c
}

// works checks that each capability opens its page on its own server: the
// refusals elsewhere are not refusals of everything.
func (c capabilities) works(t *testing.T) {
	t.Helper()
	for _, path := range []string{"/pay/" + c.link + "/", "/pay/" + c.link + "/qr.png", "/checkout/" + c.checkout + "/",
		"/checkout/" + c.linkCheckout + "/", "/subscriptions/setup/" + c.setupToken + "/", c.setupPath, "/subscribe/" + c.plan + "/"} {
		if r := c.b.env.Do("GET", path, nil); r.Status != 200 {
			t.Errorf("GET %s on its own server: %d %s", path, r.Status, r.Body)
		}
	}
	r := c.b.env.Do("POST", "/api/v1/payment/status/", map[string]any{"invoice_id": "ABCDEFGH", "checkout_id": c.checkout,
		"signature": c.checkoutSig})
	if r.Status != 404 { // the signature is accepted: no such invoice
		t.Errorf("status with the checkout's signature on its own server: %d %s", r.Status, r.Body)
	}
}

// sideEffects is everything a refused capability might have changed for its
// merchant: rows, balances, ledger, subscriptions, and commands in the log.
func (c capabilities) sideEffects(t *testing.T, env *servicetest.Env) string {
	t.Helper()
	var s string
	err := env.Schema.DB.Get(&s, `SELECT concat_ws(' | ',
		(SELECT count(*) FROM checkouts WHERE merchant_id = $1),
		(SELECT count(*) FROM invoices WHERE merchant_id = $1),
		(SELECT count(*) FROM customers WHERE merchant_id = $1),
		(SELECT count(*) FROM payment_link_uses WHERE link_id = $2::uuid),
		(SELECT count(*) FROM ledger_entries WHERE merchant_id = $1),
		(SELECT string_agg(wallet_id || ' ' || current_balance || '/' || available_balance, ',' ORDER BY wallet_id) FROM wallets WHERE merchant_id = $1),
		(SELECT string_agg(subscription_id || ' ' || status || ' ' || data::text, ',' ORDER BY subscription_id) FROM subscriptions WHERE merchant_id = $1))`,
		c.b.merchant, c.link)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s | commands %d", s, commandsOf(t, env, c.b.merchant))
}

// refusedOn tries every capability on server: each is refused with the answer of an
// unknown one (404; 401 for a signature, as for a forged one), and nothing changes
// for the merchant, also after the simulators' delays.
func (c capabilities) refusedOn(t *testing.T, server *servicetest.Env, why string) {
	t.Helper()
	before := c.sideEffects(t, server)
	card := map[string]any{"card_number": "4242424242424242", "expiry": "12/39", "cvv": "123"}
	pay := func(checkout, sig string, extra map[string]any) map[string]any {
		body := map[string]any{"method": "M-PESA", "currency": "KES", "amount": 100, "api_ref": "x", "phone_number": "254708374149",
			"checkout_id": checkout, "signature": sig}
		for k, v := range extra {
			body[k] = v
		}
		return body
	}
	for _, tc := range []struct {
		what, method, path string
		body               any
		want               int
	}{
		{"payment link page", "GET", "/pay/" + c.link + "/", nil, 404},
		{"payment link session", "POST", "/pay/" + c.link + "/session/", map[string]any{}, 404},
		{"payment link QR code", "GET", "/pay/" + c.link + "/qr.png", nil, 404},
		{"checkout page", "GET", "/checkout/" + c.checkout + "/", nil, 404},
		{"link's checkout page", "GET", "/checkout/" + c.linkCheckout + "/", nil, 404},
		{"M-Pesa on the checkout's signature", "POST", "/api/v1/payment/collection/", pay(c.checkout, c.checkoutSig, nil), 401},
		{"M-Pesa on the link session's signature", "POST", "/api/v1/payment/collection/", pay(c.linkCheckout, c.linkSig, nil), 401},
		{"card on the checkout's signature", "POST", "/api/v1/payment/card/", pay(c.checkout, c.checkoutSig, card), 401},
		{"status on the checkout's signature", "POST", "/api/v1/payment/status/",
			map[string]any{"invoice_id": "ABCDEFGH", "checkout_id": c.checkout, "signature": c.checkoutSig}, 401},
		{"setup info", "GET", c.setupPath, nil, 404},
		{"setup card 4242", "POST", c.setupPath, card, 404},
		{"setup page", "GET", "/subscriptions/setup/" + c.setupToken + "/", nil, 404},
		{"plan page (plan_url)", "GET", "/subscribe/" + c.plan + "/", nil, 404},
		{"plan subscribe", "POST", "/subscribe/" + c.plan + "/",
			map[string]any{"email": "eve@example.com", "first_name": "Eve", "last_name": "Mallory"}, 404},
	} {
		r := server.Do(tc.method, tc.path, tc.body)
		if r.Status != tc.want {
			t.Errorf("%s: %s (%s %s): %d %s, want %d", why, tc.what, tc.method, tc.path, r.Status, r.Body, tc.want)
			continue
		}
		if tc.method == "GET" && strings.HasPrefix(r.Header.Get("Content-Type"), "image/") {
			t.Errorf("%s: %s answered an image", why, tc.what)
		}
	}
	// No wait: a call that slipped through would have changed the merchant before
	// its answer (the API answers a write after the engine applied its command),
	// and whatever the simulators or the scheduler would do later follows from such
	// a command, which the side effects count in the log read to its end.
	if after := c.sideEffects(t, server); after != before {
		t.Errorf("%s: refused capabilities changed the merchant:\nbefore %s\nafter  %s", why, before, after)
	}
}

// Every capability (payment link, its session, checkout and its signature, setup
// token, plan_url, the pages) works only on a server of its merchant's environment,
// while its merchant is enabled: a sandbox server and a live API process sharing
// one database and one command log, each refusing the other's, and both refusing a
// disabled merchant's. No live wallet changes.
func TestCapabilitiesBoundToEnvironmentAndMerchantState(t *testing.T) {
	t.Parallel()
	sandbox := servicetest.Start(t, nil)
	live := servicetest.StartPeer(t, sandbox, "live", "api")
	liveCaps := mintCapabilities(t, newBundle(t, live, "Live Shop"))
	sandboxCaps := mintCapabilities(t, newBundle(t, sandbox, "Sandbox Shop"))
	liveCaps.works(t)
	sandboxCaps.works(t)

	t.Run("LiveCapabilitiesOnTheSandboxServer", func(t *testing.T) {
		liveCaps.refusedOn(t, sandbox, "live merchant on the sandbox server")
		if cur, avail := liveCaps.b.balance(t, liveCaps.b.settlement); cur != "0.00" || avail != "0.00" {
			t.Fatalf("the live wallet changed: %s/%s", cur, avail)
		}
	})
	t.Run("SandboxCapabilitiesOnTheLiveServer", func(t *testing.T) {
		sandboxCaps.refusedOn(t, live, "sandbox merchant on the live server")
	})
	t.Run("SignatureWithoutEnvironment", func(t *testing.T) {
		// A token signed before the claims named an environment: valid HMAC, not
		// expired, but nothing says where it was minted. Refused (fail closed).
		key, err := storage.ServiceSecret(context.Background(), sandbox.Schema.DB, "status_signature")
		if err != nil {
			t.Fatal(err)
		}
		claims, _ := json.Marshal(map[string]any{"m": sandboxCaps.b.merchant, "i": "", "c": sandboxCaps.checkout,
			"e": time.Now().Add(time.Hour).Unix()})
		body := "v1." + base64.RawURLEncoding.EncodeToString(claims)
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(body))
		old := body + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
		before := sandboxCaps.sideEffects(t, sandbox)
		r := sandbox.Do("POST", "/api/v1/payment/collection/", map[string]any{"method": "M-PESA", "currency": "KES", "amount": 100,
			"api_ref": "x", "phone_number": "254708374149", "checkout_id": sandboxCaps.checkout, "signature": old})
		if r.Status != 401 {
			t.Fatalf("a signature without an environment: %d %s", r.Status, r.Body)
		}
		if after := sandboxCaps.sideEffects(t, sandbox); after != before {
			t.Fatalf("a refused signature changed the merchant:\nbefore %s\nafter  %s", before, after)
		}
	})
	t.Run("KeysFollowTheirMerchantsEnvironment", func(t *testing.T) {
		// A key row of the sandbox whose merchant is live (a key issued wrongly, or
		// a merchant moved to live): the key opens nothing on the sandbox server.
		m := sandbox.Merchant("Moved To Live")
		if _, err := sandbox.Schema.DB.Exec(`UPDATE merchants SET environment = 'live' WHERE merchant_id = $1`, m.MerchantID); err != nil {
			t.Fatal(err)
		}
		if r := sandbox.Do("POST", "/api/v1/checkout/", map[string]any{"amount": 10, "currency": "KES", "public_key": m.PublicKey}); r.Status != 401 {
			t.Errorf("the public key of a live merchant on the sandbox server: %d %s", r.Status, r.Body)
		}
		if r := sandbox.Do("GET", "/api/v1/wallets/", nil, servicetest.Bearer(m.SecretKey)...); r.Status != 401 {
			t.Errorf("the secret key of a live merchant on the sandbox server: %d %s", r.Status, r.Body)
		}
	})
	t.Run("DisabledMerchants", func(t *testing.T) {
		// Disabled after its capabilities were handed out: on its own server, each
		// is refused as if it did not exist.
		for _, c := range []capabilities{sandboxCaps, liveCaps} {
			if ok, err := storage.SetMerchantEnabled(context.Background(), sandbox.Schema.DB, c.b.merchant, false); err != nil || !ok {
				t.Fatalf("disable %s: %v %v", c.b.merchant, ok, err)
			}
			c.refusedOn(t, c.b.env, "disabled merchant on its own server")
		}
	})
}
