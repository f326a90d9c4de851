package api_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"paysvc/actors/rails/mpesa"
	"paysvc/actors/rails/mpesa/mpesatest"
	"paysvc/actors/values/money"
	"paysvc/actors/values/waittest"
	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
)

// A live server with Daraja B2C credentials pays MPESA-B2C files through Daraja (here
// its local fake, over real HTTP): each transaction is sent once, however often the
// rails role resubmits it, and Daraja's result callbacks finish the file.
func TestPayoutB2C_LiveDaraja(t *testing.T) {
	t.Parallel()
	const token = "cb-secret-b2c"
	env, fake, base := startDaraja(t, daraja{token: token, live: true, b2c: true}, func(c *service.Config) {
		// Recovery resubmits the PROCESSING transactions many times before their
		// results come: none may reach Daraja twice.
		c.PayoutRecoverAfter = 300 * time.Millisecond
	})
	b := newBundle(t, env, "Live Payer")
	fundByDaraja(t, env, b, fake, "254712000099", "1000") // 985.00 after the collection fee

	r := b.post("/api/v1/send-money/initiation/", b2cFile("YES", "254712000011", "254712000012"))
	if r.Status != 201 {
		t.Fatalf("initiation: %d %s", r.Status, r.Body)
	}
	f := r.Map(t)
	tracking := f["tracking_id"].(string)
	if r := b.post("/api/v1/send-money/approve/", f); r.Status != 200 {
		t.Fatalf("approve: %d %s", r.Status, r.Body)
	}
	if cur, av := b.balance(t, b.settlement); cur != "985.00" || av != "765.00" {
		t.Fatalf("after approval 2 x (100 + 10) is held: %s / %s", cur, av)
	}
	txnOf := map[string]string{} // account -> transaction id
	for _, x := range f["transactions"].([]any) {
		tx := x.(map[string]any)
		txnOf[tx["account"].(string)] = tx["transaction_id"].(string)
	}
	paid, refused := txnOf["254712000011"], txnOf["254712000012"]

	// Both requests reach Daraja and both transactions are PROCESSING.
	waittest.Eventually(t, 20*time.Second, func() (bool, string) {
		file := b.post("/api/v1/send-money/status/", map[string]any{"tracking_id": tracking}).Map(t)
		processing := 0
		for _, x := range file["transactions"].([]any) {
			if x.(map[string]any)["status"] == "PROCESSING" {
				processing++
			}
		}
		return processing == 2 && len(fake.B2CRequests()) >= 2, fmt.Sprintf("B2C requests %d, file %v", len(fake.B2CRequests()), file)
	})
	for _, req := range fake.B2CRequests() {
		want := map[string]string{paid: "254712000011", refused: "254712000012"}[req.OriginatorConversationID]
		if req.PartyB != want || req.Amount != "100" || req.CommandID != "BusinessPayment" ||
			req.InitiatorName != mpesatest.FakeB2CInitiator || req.SecurityCredential != mpesatest.FakeB2CSecurityCredential ||
			req.PartyA != mpesatest.FakeB2CShortcode || req.ResultURL != base+"/api/v1/send-money/mpesa/result/"+token ||
			req.QueueTimeOutURL != base+"/api/v1/send-money/mpesa/timeout/"+token {
			t.Fatalf("B2C request %+v", req)
		}
	}

	// A forged success at a wrong token is not found and changes nothing; a malformed
	// result is refused; a queue timeout is acknowledged and changes nothing.
	forged := successBody(t, fake, paid, refused)
	if r := env.Do("POST", "/api/v1/send-money/mpesa/result/wrong-token", forged); r.Status != 404 {
		t.Fatalf("wrong token: %d %s", r.Status, r.Body)
	}
	if r := env.Do("POST", "/api/v1/send-money/mpesa/timeout/wrong-token", `{"Result":{}}`); r.Status != 404 {
		t.Fatalf("wrong token (timeout): %d %s", r.Status, r.Body)
	}
	if r := env.Do("POST", "/api/v1/send-money/mpesa/result/"+token, `{"Result":{"ResultCode":0}}`); r.Status != 400 {
		t.Fatalf("malformed result: %d %s", r.Status, r.Body)
	} else {
		errorBody(t, r)
	}
	if err := fake.TimeoutB2C(paid); err != nil {
		t.Fatal(err)
	}
	unknown := bytes.ReplaceAll(forged, []byte(refused), []byte("NOT-OURS-1"))
	if r := env.Do("POST", "/api/v1/send-money/mpesa/result/"+token, unknown); r.Status != 200 {
		t.Fatalf("result for an unknown transaction: %d %s", r.Status, r.Body)
	}

	// Recovery has resubmitted both (the rail logs each refusal to send again).
	waittest.Eventually(t, 20*time.Second, func() (bool, string) {
		return strings.Contains(env.Logs.String(), "not sent again"), "recovery never resubmitted the PROCESSING transactions"
	})

	if err := fake.CompleteB2C(paid, 0); err != nil {
		t.Fatal(err)
	}
	if err := fake.CompleteB2C(refused, mpesa.CodeWrongPIN); err != nil {
		t.Fatal(err)
	}
	done := b.waitFile(t, tracking)
	if done["status"] != "COMPLETE" || !amt(t, done["paid_amount"]).Equal(money.MustParse("100")) ||
		!amt(t, done["failed_amount"]).Equal(money.MustParse("100")) || !amt(t, done["actual_charges"]).Equal(money.MustParse("10")) {
		t.Fatalf("final file: %v", done)
	}
	receipt := resultOf(t, fake, paid).Receipt
	for _, x := range done["transactions"].([]any) {
		tx := x.(map[string]any)
		switch tx["transaction_id"] {
		case paid:
			if tx["status"] != "COMPLETE" || tx["provider_reference"] != receipt || tx["provider_account_name"] != mpesatest.FakeB2CRecipientName {
				t.Fatalf("paid: %v", tx)
			}
		case refused:
			if tx["status"] != "FAILED" || tx["status_description"] != "The initiator information is invalid." {
				t.Fatalf("refused: %v", tx)
			}
		}
	}
	if cur, av := b.balance(t, b.settlement); cur != "875.00" || av != "875.00" {
		t.Fatalf("after the file: 110 paid out, 110 released: %s / %s", cur, av)
	}

	// Daraja delivers both results again: one effect.
	if err := fake.CompleteB2C(paid, 0); err != nil {
		t.Fatal(err)
	}
	if err := fake.CompleteB2C(refused, mpesa.CodeWrongPIN); err != nil {
		t.Fatal(err)
	}
	b.wallet(t, "KES", "Marker") // a later command of the merchant, applied after the repeats
	if cur, av := b.balance(t, b.settlement); cur != "875.00" || av != "875.00" {
		t.Fatalf("a repeated result moved money: %s / %s", cur, av)
	}
	again := b.post("/api/v1/send-money/status/", map[string]any{"tracking_id": tracking}).Map(t)
	if again["paid_amount"] != done["paid_amount"] || again["failed_amount"] != done["failed_amount"] {
		t.Fatalf("a repeated result changed the file: %v", again)
	}

	// However often recovery resubmitted, Daraja saw each transaction once.
	n := map[string]int{}
	for _, req := range fake.B2CRequests() {
		n[req.OriginatorConversationID]++
	}
	if len(n) != 2 || n[paid] != 1 || n[refused] != 1 {
		t.Fatalf("B2C requests per transaction: %v", n)
	}
}

// successBody is the success result of txn with its OriginatorConversationID
// replaced by as (a forged result).
func successBody(t *testing.T, fake *mpesatest.FakeDaraja, txn, as string) []byte {
	t.Helper()
	body, err := fake.B2CResultBody(txn, 0)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.ReplaceAll(body, []byte(`"`+txn+`"`), []byte(`"`+as+`"`))
}

func resultOf(t *testing.T, fake *mpesatest.FakeDaraja, txn string) mpesa.B2CResult {
	t.Helper()
	body, err := fake.B2CResultBody(txn, 0)
	if err != nil {
		t.Fatal(err)
	}
	r, err := mpesa.ParseB2CResult(body)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// fundByDaraja collects amount into the merchant's settlement wallet with an STK
// push through the fake Daraja (a live server has no sandbox deposits).
func fundByDaraja(t *testing.T, env *servicetest.Env, b *bundle, fake *mpesatest.FakeDaraja, phone, amount string) {
	t.Helper()
	r := b.post("/api/v1/payment/mpesa-stk-push/", map[string]any{"phone_number": phone, "amount": amount})
	if r.Status != 200 {
		t.Fatalf("push: %d %s", r.Status, r.Body)
	}
	inv := r.Map(t)["invoice"].(map[string]any)["invoice_id"].(string)
	req := promptTo(t, fake, phone, recordedFor(t, env, inv))
	if err := fake.Complete(req.CheckoutRequestID, 0, ""); err != nil {
		t.Fatal(err)
	}
	if final := b.waitInvoice(t, inv); final["state"] != "COMPLETE" {
		t.Fatalf("funding collection: %v", final)
	}
}

// A B2C payout whose request answer is lost stays PROCESSING; the rails role asks
// Daraja's Transaction Status API about it, and the status answer (posted to the
// status URL) finishes it. A repeated answer and a late B2C result change nothing:
// they are the same FINAL command.
func TestPayoutB2C_StatusQuery(t *testing.T) {
	t.Parallel()
	const token = "cb-secret-tsq"
	var statusURL string
	env, fake, base := startDaraja(t, daraja{token: token, live: true, b2c: true}, func(c *service.Config) {
		statusURL = "http://" + c.HTTPAddr + "/api/v1/send-money/mpesa/status/" + token
		c.Daraja.B2CStatusURL = statusURL
		c.PayoutRecoverAfter = 300 * time.Millisecond
		c.DarajaB2CPause = 200 * time.Millisecond // the second payout follows an unknown outcome
	})
	b := newBundle(t, env, "Status Payer")
	fundByDaraja(t, env, b, fake, "254712000098", "1000") // 985.00

	fake.FailNextB2C(0, "", "") // Daraja takes the payment, its answer is lost
	r := b.post("/api/v1/send-money/initiation/", b2cFile("YES", "254712000021"))
	if r.Status != 201 {
		t.Fatalf("initiation: %d %s", r.Status, r.Body)
	}
	f := r.Map(t)
	tracking := f["tracking_id"].(string)
	txn := f["transactions"].([]any)[0].(map[string]any)["transaction_id"].(string)
	if r := b.post("/api/v1/send-money/approve/", f); r.Status != 200 {
		t.Fatalf("approve: %d %s", r.Status, r.Body)
	}

	// The sweeper asks Daraja about it; the transaction is PROCESSING meanwhile.
	var q mpesatest.FakeStatusQuery
	waittest.Eventually(t, 30*time.Second, func() (bool, string) {
		found := false
		for _, x := range fake.StatusQueries() {
			if x.Occasion == txn {
				q, found = x, true
			}
		}
		return found, fmt.Sprintf("no status query for %s; B2C requests %d", txn, len(fake.B2CRequests()))
	})
	if q.CommandID != "TransactionStatusQuery" || q.OriginatorConversationID != txn || q.Initiator != mpesatest.FakeB2CInitiator ||
		q.SecurityCredential != mpesatest.FakeB2CSecurityCredential || q.PartyA != mpesatest.FakeB2CShortcode || q.IdentifierType != "4" ||
		q.ResultURL != statusURL || q.QueueTimeOutURL != base+"/api/v1/send-money/mpesa/timeout/"+token {
		t.Fatalf("status query %+v", q)
	}
	file := b.post("/api/v1/send-money/status/", map[string]any{"tracking_id": tracking}).Map(t)
	if tx := file["transactions"].([]any)[0].(map[string]any); tx["status"] != "PROCESSING" {
		t.Fatalf("before the status answer: %v", tx)
	}
	if len(fake.B2CRequests()) != 1 {
		t.Fatalf("B2C requests: %d", len(fake.B2CRequests()))
	}

	// A wrong token is not found, a malformed answer refused, a pending answer
	// acknowledged and changes nothing.
	paidBody, err := fake.StatusResultBody(txn, "Completed")
	if err != nil {
		t.Fatal(err)
	}
	if r := env.Do("POST", "/api/v1/send-money/mpesa/status/wrong-token", paidBody); r.Status != 404 {
		t.Fatalf("wrong token: %d %s", r.Status, r.Body)
	}
	if r := env.Do("POST", "/api/v1/send-money/mpesa/status/"+token, `{"Result":{"ResultCode":0}}`); r.Status != 400 {
		t.Fatalf("malformed status result: %d %s", r.Status, r.Body)
	}
	pending, err := fake.StatusResultBody(txn, "Pending")
	if err != nil {
		t.Fatal(err)
	}
	if r := env.Do("POST", "/api/v1/send-money/mpesa/status/"+token, pending); r.Status != 200 || !strings.Contains(string(r.Body), `"ResultCode":0`) {
		t.Fatalf("pending status result: %d %s", r.Status, r.Body)
	}
	b.wallet(t, "KES", "Marker 1") // applied after anything the pending answer could have caused
	file = b.post("/api/v1/send-money/status/", map[string]any{"tracking_id": tracking}).Map(t)
	if tx := file["transactions"].([]any)[0].(map[string]any); tx["status"] != "PROCESSING" {
		t.Fatalf("after a pending answer: %v", tx)
	}

	// Completed for another amount than the payout's: not this payout as we know it,
	// so it stays PROCESSING for an operator.
	otherAmount := bytes.Replace(paidBody, []byte(`"Key":"Amount","Value":100}`), []byte(`"Key":"Amount","Value":1000}`), 1)
	if bytes.Equal(otherAmount, paidBody) {
		t.Fatalf("the status body has no amount to change: %s", paidBody)
	}
	if r := env.Do("POST", "/api/v1/send-money/mpesa/status/"+token, otherAmount); r.Status != 200 {
		t.Fatalf("status result for another amount: %d %s", r.Status, r.Body)
	}
	b.wallet(t, "KES", "Marker 1b")
	file = b.post("/api/v1/send-money/status/", map[string]any{"tracking_id": tracking}).Map(t)
	if tx := file["transactions"].([]any)[0].(map[string]any); tx["status"] != "PROCESSING" {
		t.Fatalf("after a Completed answer for another amount: %v", tx)
	}

	// Completed: the file is COMPLETE and the wallet right to the cent.
	if r := env.Do("POST", "/api/v1/send-money/mpesa/status/"+token, paidBody); r.Status != 200 || !strings.Contains(string(r.Body), `"ResultCode":0`) {
		t.Fatalf("completed status result: %d %s", r.Status, r.Body)
	}
	done := b.waitFile(t, tracking)
	if done["status"] != "COMPLETE" || !amt(t, done["paid_amount"]).Equal(money.MustParse("100")) ||
		!amt(t, done["failed_amount"]).IsZero() || !amt(t, done["actual_charges"]).Equal(money.MustParse("10")) {
		t.Fatalf("final file: %v", done)
	}
	receipt := resultOf(t, fake, txn).Receipt
	if tx := done["transactions"].([]any)[0].(map[string]any); tx["status"] != "COMPLETE" ||
		tx["provider_reference"] != receipt || tx["provider_account_name"] != mpesatest.FakeB2CRecipientName {
		t.Fatalf("paid: %v", tx)
	}
	if cur, av := b.balance(t, b.settlement); cur != "875.00" || av != "875.00" {
		t.Fatalf("after the file: %s / %s", cur, av)
	}

	// The same answer again, and the B2C result arriving late: nothing changes.
	if r := env.Do("POST", "/api/v1/send-money/mpesa/status/"+token, paidBody); r.Status != 200 {
		t.Fatalf("repeated status result: %d %s", r.Status, r.Body)
	}
	if err := fake.CompleteB2C(txn, 0); err != nil {
		t.Fatal(err)
	}
	b.wallet(t, "KES", "Marker 2")
	if cur, av := b.balance(t, b.settlement); cur != "875.00" || av != "875.00" {
		t.Fatalf("a repeated outcome moved money: %s / %s", cur, av)
	}
	again := b.post("/api/v1/send-money/status/", map[string]any{"tracking_id": tracking}).Map(t)
	if again["status"] != "COMPLETE" || again["paid_amount"] != done["paid_amount"] || again["failed_amount"] != done["failed_amount"] {
		t.Fatalf("a repeated outcome changed the file: %v", again)
	}
	if len(fake.B2CRequests()) != 1 {
		t.Fatalf("B2C requests: %d", len(fake.B2CRequests()))
	}

	// How many status queries asked about a transaction.
	asked := func(txn string) int {
		n := 0
		for _, x := range fake.StatusQueries() {
			if x.Occasion == txn {
				n++
			}
		}
		return n
	}
	before := asked(txn) // checked below, once a later pass has asked about another payout

	// A second payout whose answer is lost, and Daraja's status answer says Failed:
	// the transaction fails and its hold (amount and charge) is released.
	fake.FailNextB2C(0, "", "")
	r = b.post("/api/v1/send-money/initiation/", b2cFile("NO", "254712000022"))
	if r.Status != 201 {
		t.Fatalf("second initiation: %d %s", r.Status, r.Body)
	}
	f2 := r.Map(t)
	tracking2 := f2["tracking_id"].(string)
	txn2 := f2["transactions"].([]any)[0].(map[string]any)["transaction_id"].(string)
	// Asked twice: the pass that first asked about it has ended (passes run one
	// after another), and it listed the unsettled sends more than
	// PayoutRecoverAfter after the first file completed.
	waittest.Eventually(t, 30*time.Second, func() (bool, string) {
		n := asked(txn2)
		return n >= 2, fmt.Sprintf("%d status queries for %s, want 2", n, txn2)
	})
	// A final transaction is not asked about any more.
	if after := asked(txn); after != before {
		t.Fatalf("status queries after the file completed: %d, then %d", before, after)
	}
	if cur, av := b.balance(t, b.settlement); cur != "875.00" || av != "765.00" {
		t.Fatalf("while the second payout is unknown: %s / %s, want 875.00 / 765.00 (110.00 held)", cur, av)
	}
	failedBody, err := fake.StatusResultBody(txn2, "Failed")
	if err != nil {
		t.Fatal(err)
	}
	if r := env.Do("POST", "/api/v1/send-money/mpesa/status/"+token, failedBody); r.Status != 200 {
		t.Fatalf("failed status result: %d %s", r.Status, r.Body)
	}
	failed := b.waitFile(t, tracking2)
	if failed["status"] != "COMPLETE" || !amt(t, failed["paid_amount"]).IsZero() ||
		!amt(t, failed["failed_amount"]).Equal(money.MustParse("100")) || !amt(t, failed["actual_charges"]).IsZero() {
		t.Fatalf("file after a Failed status answer: %v", failed)
	}
	if tx := failed["transactions"].([]any)[0].(map[string]any); tx["status"] != "FAILED" {
		t.Fatalf("transaction after a Failed status answer: %v", tx)
	}
	if cur, av := b.balance(t, b.settlement); cur != "875.00" || av != "875.00" {
		t.Fatalf("after the Failed answer: %s / %s, want the hold released", cur, av)
	}
}
