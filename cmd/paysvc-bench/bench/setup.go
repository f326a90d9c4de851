package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"paysvc/actors/values/money"
	"paysvc/cmd/paysvc/admin"
)

// merchant is a bench merchant: its secret key and its bench wallets (indices into
// runner.wallets).
type merchant struct {
	ID      string
	Secret  string
	Auth    string // "Bearer " + Secret, built once
	Wallets []int
	// Settlement is the merchant's KES settlement wallet (stk-collect credits it).
	Settlement string
}

// benchWallet is one wallet the bench created, with what it deposited into it.
type benchWallet struct {
	ID        string
	Merchant  *merchant
	Deposited int64 // cents
}

// scenarioSetup is what one scenario's load picks from.
type scenarioSetup struct {
	Name       string
	Merchants  []*merchant
	Hot        int   // transfer-hot: the wallet every transfer credits
	Sources    []int // transfer-hot: the funded wallets transfers come from
	Partitions int   // command partitions its merchants hash to
	STK        bool  // stk-collect: STK pushes to the merchants' settlement wallets
	Webhooks   bool  // webhooks: transfers whose events are delivered to the merchants' webhooks
	Memory     bool  // wallets-1m: transfers over the seeded population (runner.mem)
}

// post sends a JSON POST with the merchant's secret key and returns the status and
// body. idemKey, when set, makes a retry after an unknown outcome safe.
func (r *runner) post(ctx context.Context, m *merchant, path string, body []byte, idemKey string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", m.Auth)
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		// A success carries nothing the bench needs (it knows what it asked for);
		// draining without keeping it keeps the load generator's CPU share down.
		_, err = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil, err
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64*1024))
	return resp.StatusCode, b, err
}

// postRetry is for setup calls: it retries unknown outcomes (transport errors and
// 5xx) with the same Idempotency-Key, so a deposit never lands twice.
func (r *runner) postRetry(ctx context.Context, m *merchant, path string, body []byte, want int) ([]byte, error) {
	key := "bench-setup-" + strconv.FormatUint(r.seq.Add(1), 10) + "-" + r.runID
	var last string
	for attempt := 0; attempt < 40; attempt++ {
		status, resp, err := r.post(ctx, m, path, body, key)
		switch {
		case err == nil && status == want:
			return resp, nil
		case err == nil && status < 500 && status != http.StatusConflict:
			return nil, fmt.Errorf("POST %s: status %d: %s", path, status, resp)
		case err != nil:
			last = err.Error()
		default:
			last = fmt.Sprintf("status %d: %s", status, resp)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		time.Sleep(time.Duration(min(100*(attempt+1), 1000)) * time.Millisecond)
	}
	return nil, fmt.Errorf("POST %s: gave up: %s", path, last)
}

// setup creates a scenario's merchants (admin package, on the bench database) and
// their wallets and deposits (HTTP API), as a merchant onboarding would.
func (r *runner) setup(ctx context.Context, name string, merchants, walletsEach int, fundAll bool) (*scenarioSetup, error) {
	s := &scenarioSetup{Name: name, Hot: -1}
	for i := 0; i < merchants; i++ {
		c, err := admin.CreateMerchant(ctx, r.db, fmt.Sprintf("bench %s %d", name, i+1), "sandbox")
		if err != nil {
			return nil, fmt.Errorf("create merchant: %w", err)
		}
		s.Merchants = append(s.Merchants, &merchant{ID: c.MerchantID, Secret: c.SecretKey, Auth: "Bearer " + c.SecretKey})
	}
	type job struct {
		m     *merchant
		label string
		fund  bool
	}
	var jobs []job
	for _, m := range s.Merchants {
		for j := 0; j < walletsEach; j++ {
			jobs = append(jobs, job{m: m, label: fmt.Sprintf("bench %d", j+1), fund: fundAll || j > 0})
		}
	}
	deposit, err := parseCents(r.o.Deposit)
	if err != nil {
		return nil, err
	}
	results := make([]*benchWallet, len(jobs))
	errs := make([]error, len(jobs))
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i, j := range jobs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			body, _ := json.Marshal(map[string]any{"currency": "KES", "label": j.label, "can_disburse": false})
			resp, err := r.postRetry(ctx, j.m, "/api/v1/wallets/", body, http.StatusCreated)
			if err != nil {
				errs[i] = err
				return
			}
			var w struct {
				WalletID string `json:"wallet_id"`
			}
			if err := json.Unmarshal(resp, &w); err != nil || w.WalletID == "" {
				errs[i] = fmt.Errorf("create wallet: unexpected answer %s", resp)
				return
			}
			bw := &benchWallet{ID: w.WalletID, Merchant: j.m}
			if j.fund {
				body, _ := json.Marshal(map[string]string{"amount": r.o.Deposit, "narrative": "bench funding"})
				if _, err := r.postRetry(ctx, j.m, "/api/v1/sandbox/wallets/"+w.WalletID+"/deposit/", body, http.StatusOK); err != nil {
					errs[i] = err
					return
				}
				bw.Deposited = deposit
			}
			results[i] = bw
		})
		if ctx.Err() != nil {
			break
		}
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	for i, bw := range results {
		idx := len(r.wallets)
		r.wallets = append(r.wallets, bw)
		bw.Merchant.Wallets = append(bw.Merchant.Wallets, idx)
		if !fundAll && i == 0 {
			s.Hot = idx
		} else if !fundAll {
			s.Sources = append(s.Sources, idx)
		}
	}
	return s, nil
}

func parseCents(s string) (int64, error) {
	a, err := money.Parse(s)
	if err != nil || a.Sign() <= 0 {
		return 0, fmt.Errorf("--deposit: %q is not a positive amount like 1000000.00", s)
	}
	return a.Cents()
}
