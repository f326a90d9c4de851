package wallet_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"paysvc/actors/aggregates/wallet"
	"paysvc/actors/values/ledger"
	"paysvc/actors/values/money"
)

var at = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func amt(s string) money.Amount { return money.MustParse(s) }

// open returns the state of a freshly opened WORKING wallet.
func open(t *testing.T, id, merchant, currency string) wallet.State {
	t.Helper()
	res, err := wallet.Apply(wallet.State{}, wallet.Open{
		WalletID: id, MerchantID: merchant, Currency: currency, WalletType: wallet.TypeWorking,
		Label: "label " + id, At: at,
	})
	if err != nil {
		t.Fatalf("open %s: %v", id, err)
	}
	if len(res.Entries) != 0 {
		t.Fatalf("open %s: got %d entries, want none", id, len(res.Entries))
	}
	return res.State
}

// fund deposits amount into s and returns the new state.
func fund(t *testing.T, s wallet.State, amount string) wallet.State {
	t.Helper()
	res, err := wallet.Apply(s, wallet.Deposit{MerchantID: s.MerchantID, TransactionID: "DEP", Amount: amt(amount), At: at})
	if err != nil {
		t.Fatalf("deposit %s into %s: %v", amount, s.WalletID, err)
	}
	return res.State
}

func wantBalance(t *testing.T, s wallet.State, current, available string) {
	t.Helper()
	if !s.CurrentBalance.Equal(amt(current)) || !s.AvailableBalance.Equal(amt(available)) {
		t.Fatalf("wallet %s: balances current=%s available=%s, want %s/%s",
			s.WalletID, s.CurrentBalance, s.AvailableBalance, current, available)
	}
}

func TestApply_Open(t *testing.T) {
	t.Parallel()

	valid := func() wallet.Open {
		return wallet.Open{WalletID: "W1", MerchantID: "M1", Currency: "KES", WalletType: wallet.TypeWorking,
			Label: "ops", CanDisburse: true, At: at}
	}

	t.Run("Open_CreatesVersionOneWithZeroBalances", func(t *testing.T) {
		t.Parallel()
		res, err := wallet.Apply(wallet.State{}, valid())
		if err != nil {
			t.Fatal(err)
		}
		s := res.State
		if !s.Exists() || s.Version != 1 {
			t.Fatalf("version = %d, exists = %v; want 1, true", s.Version, s.Exists())
		}
		if s.WalletID != "W1" || s.MerchantID != "M1" || s.Currency != "KES" || s.WalletType != wallet.TypeWorking ||
			s.Label != "ops" || !s.CanDisburse || !s.CreatedAt.Equal(at) || !s.UpdatedAt.Equal(at) {
			t.Fatalf("unexpected state %+v", s)
		}
		wantBalance(t, s, "0.00", "0.00")
		if len(res.Entries) != 0 {
			t.Fatalf("open made %d entries", len(res.Entries))
		}
	})

	t.Run("Open_SettlementType", func(t *testing.T) {
		t.Parallel()
		c := valid()
		c.WalletType = wallet.TypeSettlement
		if _, err := wallet.Apply(wallet.State{}, c); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("Open_ExistingWallet_ErrExists", func(t *testing.T) {
		t.Parallel()
		s := open(t, "W1", "M1", "KES")
		res, err := wallet.Apply(s, valid())
		if !errors.Is(err, wallet.ErrExists) {
			t.Fatalf("err = %v, want ErrExists", err)
		}
		if res.State.Exists() || len(res.Entries) != 0 {
			t.Fatalf("refused open returned a result: %+v", res)
		}
	})

	invalid := map[string]func(*wallet.Open){
		"EmptyWalletID":   func(c *wallet.Open) { c.WalletID = "" },
		"EmptyMerchantID": func(c *wallet.Open) { c.MerchantID = "" },
		"UnknownCurrency": func(c *wallet.Open) { c.Currency = "XAU" },
		"LowerCurrency":   func(c *wallet.Open) { c.Currency = "kes" },
		"UnknownType":     func(c *wallet.Open) { c.WalletType = "SAVINGS" },
		"EmptyLabel":      func(c *wallet.Open) { c.Label = "" },
	}
	for name, mutate := range invalid {
		t.Run("Open_Invalid_"+name, func(t *testing.T) {
			t.Parallel()
			c := valid()
			mutate(&c)
			_, err := wallet.Apply(wallet.State{}, c)
			if !errors.Is(err, wallet.ErrInvalidWallet) {
				t.Fatalf("err = %v, want ErrInvalidWallet", err)
			}
		})
	}
}

func TestApply_Deposit(t *testing.T) {
	t.Parallel()

	t.Run("Deposit_CreditsBothBalancesAndBumpsVersion", func(t *testing.T) {
		t.Parallel()
		s := open(t, "W1", "M1", "KES")
		later := at.Add(time.Hour)
		res, err := wallet.Apply(s, wallet.Deposit{MerchantID: "M1", TransactionID: "T1", Amount: amt("100.50"), Narrative: "top up", At: later})
		if err != nil {
			t.Fatal(err)
		}
		n := res.State
		wantBalance(t, n, "100.50", "100.50")
		if n.Version != s.Version+1 {
			t.Fatalf("version = %d, want %d", n.Version, s.Version+1)
		}
		if !n.UpdatedAt.Equal(later) || !n.CreatedAt.Equal(at) {
			t.Fatalf("timestamps created=%v updated=%v", n.CreatedAt, n.UpdatedAt)
		}
		// The input state is a value: it must be untouched.
		wantBalance(t, s, "0.00", "0.00")
	})

	t.Run("Deposit_EntriesBalancedWithRunningBalance", func(t *testing.T) {
		t.Parallel()
		s := fund(t, open(t, "W1", "M1", "KES"), "10.00")
		res, err := wallet.Apply(s, wallet.Deposit{MerchantID: "M1", TransactionID: "T2", Amount: amt("2.25"), Narrative: "n", At: at})
		if err != nil {
			t.Fatal(err)
		}
		if err := ledger.Balanced(res.Entries); err != nil {
			t.Fatalf("deposit entries unbalanced: %v", err)
		}
		if len(res.Entries) != 2 {
			t.Fatalf("got %d entries, want 2", len(res.Entries))
		}
		var walletSide, fundingSide *ledger.Entry
		for i := range res.Entries {
			e := &res.Entries[i]
			if e.TransactionID != "T2" || e.Currency != "KES" || e.MerchantID != "M1" || e.TransType != wallet.TransTypeDeposit {
				t.Fatalf("entry %d: %+v", i, e)
			}
			switch e.Account {
			case ledger.WalletAccount("W1"):
				walletSide = e
			case ledger.SandboxFunding:
				fundingSide = e
			}
		}
		if walletSide == nil || fundingSide == nil {
			t.Fatalf("entries %+v: want one wallet and one sandbox funding posting", res.Entries)
		}
		if !walletSide.Amount.Equal(amt("2.25")) || walletSide.WalletID != "W1" {
			t.Fatalf("wallet posting %+v", walletSide)
		}
		if walletSide.RunningBalance == nil || !walletSide.RunningBalance.Equal(amt("12.25")) {
			t.Fatalf("running balance = %v, want 12.25", walletSide.RunningBalance)
		}
		if !fundingSide.Amount.Equal(amt("-2.25")) || fundingSide.RunningBalance != nil || fundingSide.WalletID != "" {
			t.Fatalf("funding posting %+v", fundingSide)
		}
	})

	t.Run("Deposit_UnknownWallet_ErrNotFound", func(t *testing.T) {
		t.Parallel()
		_, err := wallet.Apply(wallet.State{}, wallet.Deposit{MerchantID: "M1", TransactionID: "T", Amount: amt("1.00")})
		if !errors.Is(err, wallet.ErrNotFound) {
			t.Fatalf("err = %v, want ErrNotFound", err)
		}
	})

	t.Run("Deposit_ForeignMerchant_ErrNotFound", func(t *testing.T) {
		t.Parallel()
		s := open(t, "W1", "M1", "KES")
		_, err := wallet.Apply(s, wallet.Deposit{MerchantID: "M2", TransactionID: "T", Amount: amt("1.00")})
		if !errors.Is(err, wallet.ErrNotFound) {
			t.Fatalf("err = %v, want ErrNotFound", err)
		}
	})

	for _, a := range []string{"0.00", "-0.01", "-5.00"} {
		t.Run("Deposit_NonPositive_"+a, func(t *testing.T) {
			t.Parallel()
			s := open(t, "W1", "M1", "KES")
			_, err := wallet.Apply(s, wallet.Deposit{MerchantID: "M1", TransactionID: "T", Amount: amt(a)})
			if !errors.Is(err, wallet.ErrInvalidAmount) {
				t.Fatalf("err = %v, want ErrInvalidAmount", err)
			}
		})
	}
}

// pair returns two funded wallets of one merchant, and an empty one in USD.
type pairBundle struct {
	src, dst, usd wallet.State
}

func setupPair(t *testing.T) pairBundle {
	t.Helper()
	return pairBundle{
		src: fund(t, open(t, "SRC", "M1", "KES"), "1000.00"),
		dst: fund(t, open(t, "DST", "M1", "KES"), "5.00"),
		usd: open(t, "USD1", "M1", "USD"),
	}
}

func transferOut(b pairBundle, amount string) wallet.TransferOut {
	return wallet.TransferOut{MerchantID: "M1", TransactionID: "TX", Amount: amt(amount), Narrative: "move",
		Destination: b.dst, At: at.Add(time.Minute)}
}

func TestApply_TransferOut(t *testing.T) {
	t.Parallel()

	t.Run("TransferOut_DebitsSourceWithOneEntry", func(t *testing.T) {
		t.Parallel()
		b := setupPair(t)
		res, err := wallet.Apply(b.src, transferOut(b, "250.25"))
		if err != nil {
			t.Fatal(err)
		}
		wantBalance(t, res.State, "749.75", "749.75")
		if res.State.Version != b.src.Version+1 {
			t.Fatalf("version = %d, want %d", res.State.Version, b.src.Version+1)
		}
		if len(res.Entries) != 1 {
			t.Fatalf("got %d entries, want 1", len(res.Entries))
		}
		e := res.Entries[0]
		if e.Account != ledger.WalletAccount("SRC") || !e.Amount.Equal(amt("-250.25")) || e.TransType != wallet.TransTypeTransfer ||
			e.TransactionID != "TX" || e.RunningBalance == nil || !e.RunningBalance.Equal(amt("749.75")) {
			t.Fatalf("entry %+v (running %v)", e, e.RunningBalance)
		}
	})

	t.Run("TransferOut_ExactBalanceAllowed", func(t *testing.T) {
		t.Parallel()
		b := setupPair(t)
		res, err := wallet.Apply(b.src, transferOut(b, "1000.00"))
		if err != nil {
			t.Fatalf("transfer of the whole balance refused: %v", err)
		}
		wantBalance(t, res.State, "0.00", "0.00")
	})

	t.Run("TransferOut_InsufficientFunds", func(t *testing.T) {
		t.Parallel()
		b := setupPair(t)
		res, err := wallet.Apply(b.src, transferOut(b, "1000.01"))
		var ins wallet.InsufficientFundsError
		if !errors.As(err, &ins) {
			t.Fatalf("err = %v (%T), want InsufficientFundsError", err, err)
		}
		if ins.WalletID != "SRC" || !ins.Requested.Equal(amt("1000.01")) || !ins.Available.Equal(amt("1000.00")) {
			t.Fatalf("error data %+v", ins)
		}
		if res.State.Exists() || len(res.Entries) != 0 {
			t.Fatalf("refused transfer returned a result: %+v", res)
		}
	})

	t.Run("TransferOut_CurrencyMismatch", func(t *testing.T) {
		t.Parallel()
		b := setupPair(t)
		c := transferOut(b, "1.00")
		c.Destination = b.usd
		_, err := wallet.Apply(b.src, c)
		if !errors.Is(err, wallet.ErrCurrencyMismatch) {
			t.Fatalf("err = %v, want ErrCurrencyMismatch", err)
		}
	})

	t.Run("TransferOut_ForeignDestination_ErrNoDestination", func(t *testing.T) {
		t.Parallel()
		b := setupPair(t)
		c := transferOut(b, "1.00")
		c.Destination = open(t, "OTHER", "M2", "KES")
		res, err := wallet.Apply(b.src, c)
		if !errors.Is(err, wallet.ErrNoDestination) {
			t.Fatalf("err = %v, want ErrNoDestination", err)
		}
		if res.State.Exists() || len(res.Entries) != 0 {
			t.Fatalf("refused transfer returned a result: %+v", res)
		}
	})

	t.Run("TransferOut_UnknownDestination_ErrNoDestination", func(t *testing.T) {
		t.Parallel()
		b := setupPair(t)
		c := transferOut(b, "1.00")
		c.Destination = wallet.State{WalletID: "NOPE"}
		_, err := wallet.Apply(b.src, c)
		if !errors.Is(err, wallet.ErrNoDestination) {
			t.Fatalf("err = %v, want ErrNoDestination", err)
		}
	})

	t.Run("TransferOut_ForeignSource_ErrNotFound", func(t *testing.T) {
		t.Parallel()
		b := setupPair(t)
		c := transferOut(b, "1.00")
		c.MerchantID = "M2" // the command's merchant does not own the source
		_, err := wallet.Apply(b.src, c)
		if !errors.Is(err, wallet.ErrNotFound) {
			t.Fatalf("err = %v, want ErrNotFound", err)
		}
	})

	t.Run("TransferOut_SameWallet", func(t *testing.T) {
		t.Parallel()
		b := setupPair(t)
		c := transferOut(b, "1.00")
		c.Destination = b.src
		_, err := wallet.Apply(b.src, c)
		if !errors.Is(err, wallet.ErrSameWallet) {
			t.Fatalf("err = %v, want ErrSameWallet", err)
		}
	})

	for _, a := range []string{"0.00", "-1.00", "999999.01", "1000000.00"} {
		t.Run("TransferOut_InvalidAmount_"+a, func(t *testing.T) {
			t.Parallel()
			b := setupPair(t)
			b.src = fund(t, b.src, "2000000.00") // funds are not the reason for the refusal
			_, err := wallet.Apply(b.src, transferOut(b, a))
			if !errors.Is(err, wallet.ErrInvalidAmount) {
				t.Fatalf("err = %v, want ErrInvalidAmount", err)
			}
		})
	}

	t.Run("TransferOut_MaxAmountAllowed", func(t *testing.T) {
		t.Parallel()
		b := setupPair(t)
		b.src = fund(t, b.src, "999999.00")
		res, err := wallet.Apply(b.src, transferOut(b, wallet.MaxTransfer.String()))
		if err != nil {
			t.Fatalf("transfer of MaxTransfer refused: %v", err)
		}
		wantBalance(t, res.State, "1000.00", "1000.00")
	})
}

func TestApply_TransferIn(t *testing.T) {
	t.Parallel()

	in := func(amount string) wallet.TransferIn {
		return wallet.TransferIn{MerchantID: "M1", TransactionID: "TX", Amount: amt(amount), Narrative: "move",
			Origin: "SRC", Currency: "KES", At: at}
	}

	t.Run("TransferIn_CreditsWithRunningBalance", func(t *testing.T) {
		t.Parallel()
		b := setupPair(t)
		res, err := wallet.Apply(b.dst, in("7.50"))
		if err != nil {
			t.Fatal(err)
		}
		wantBalance(t, res.State, "12.50", "12.50")
		if res.State.Version != b.dst.Version+1 || len(res.Entries) != 1 {
			t.Fatalf("version %d entries %d", res.State.Version, len(res.Entries))
		}
		e := res.Entries[0]
		if e.Account != ledger.WalletAccount("DST") || !e.Amount.Equal(amt("7.50")) || e.RunningBalance == nil ||
			!e.RunningBalance.Equal(amt("12.50")) || e.TransType != wallet.TransTypeTransfer {
			t.Fatalf("entry %+v", e)
		}
	})

	t.Run("TransferIn_PairsWithTransferOutBalanced", func(t *testing.T) {
		t.Parallel()
		b := setupPair(t)
		out, err := wallet.Apply(b.src, transferOut(b, "30.00"))
		if err != nil {
			t.Fatal(err)
		}
		inRes, err := wallet.Apply(b.dst, in("30.00"))
		if err != nil {
			t.Fatal(err)
		}
		if err := ledger.Balanced(append(out.Entries, inRes.Entries...)); err != nil {
			t.Fatalf("transfer unbalanced: %v", err)
		}
		if err := ledger.Balanced(out.Entries); err == nil {
			t.Fatal("one side of a transfer alone must not be balanced")
		}
	})

	t.Run("TransferIn_Unknown_ErrNotFound", func(t *testing.T) {
		t.Parallel()
		if _, err := wallet.Apply(wallet.State{}, in("1.00")); !errors.Is(err, wallet.ErrNotFound) {
			t.Fatalf("err = %v, want ErrNotFound", err)
		}
	})

	t.Run("TransferIn_ForeignMerchant_ErrNotFound", func(t *testing.T) {
		t.Parallel()
		b := setupPair(t)
		c := in("1.00")
		c.MerchantID = "M2"
		if _, err := wallet.Apply(b.dst, c); !errors.Is(err, wallet.ErrNotFound) {
			t.Fatalf("err = %v, want ErrNotFound", err)
		}
	})

	t.Run("TransferIn_CurrencyMismatch", func(t *testing.T) {
		t.Parallel()
		b := setupPair(t)
		c := in("1.00")
		c.Currency = "USD"
		if _, err := wallet.Apply(b.dst, c); !errors.Is(err, wallet.ErrCurrencyMismatch) {
			t.Fatalf("err = %v, want ErrCurrencyMismatch", err)
		}
	})

	t.Run("TransferIn_SameWallet", func(t *testing.T) {
		t.Parallel()
		b := setupPair(t)
		c := in("1.00")
		c.Origin = "DST"
		if _, err := wallet.Apply(b.dst, c); !errors.Is(err, wallet.ErrSameWallet) {
			t.Fatalf("err = %v, want ErrSameWallet", err)
		}
	})

	for _, a := range []string{"0.00", "-1.00", "999999.01"} {
		t.Run("TransferIn_InvalidAmount_"+a, func(t *testing.T) {
			t.Parallel()
			b := setupPair(t)
			if _, err := wallet.Apply(b.dst, in(a)); !errors.Is(err, wallet.ErrInvalidAmount) {
				t.Fatalf("err = %v, want ErrInvalidAmount", err)
			}
		})
	}
}

func TestApply_UnknownCommand(t *testing.T) {
	t.Parallel()
	s := open(t, "W1", "M1", "KES")
	for _, cmd := range []any{nil, "deposit", &wallet.Deposit{MerchantID: "M1", Amount: amt("1.00")}} {
		res, err := wallet.Apply(s, cmd)
		if err == nil {
			t.Fatalf("Apply(%T) succeeded: %+v", cmd, res)
		}
	}
}

// TestApply_Property applies random deposits and transfers between a few wallets and
// checks the result against a model in int64 cents: balances never go negative,
// every command's entries balance, all entries (sandbox funding included) sum to
// zero, and each wallet's balance is the sum of its own entries.
func TestApply_Property(t *testing.T) {
	t.Parallel()

	for run := 0; run < 20; run++ {
		seed := uint64(time.Now().UnixNano()) + uint64(run)
		t.Run(fmt.Sprintf("Seed_%d", seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
			const n = 4
			states := make([]wallet.State, n)
			model := make([]int64, n)
			for i := range states {
				states[i] = open(t, fmt.Sprintf("W%d", i), "M1", "KES")
			}
			var all []ledger.Entry
			refusedFunds := 0

			for step := 0; step < 400; step++ {
				txn := fmt.Sprintf("T%d", step)
				if rng.IntN(3) == 0 {
					i := rng.IntN(n)
					cents := 1 + rng.Int64N(50_000)
					res, err := wallet.Apply(states[i], wallet.Deposit{MerchantID: "M1", TransactionID: txn, Amount: money.FromUnits(cents), At: at})
					if err != nil {
						t.Fatalf("step %d: deposit: %v", step, err)
					}
					if err := ledger.Balanced(res.Entries); err != nil {
						t.Fatalf("step %d: deposit unbalanced: %v", step, err)
					}
					states[i], model[i] = res.State, model[i]+cents
					all = append(all, res.Entries...)
				} else {
					from, to := rng.IntN(n), rng.IntN(n)
					// Up to 1.5x the balance, so some transfers must be refused.
					cents := 1 + rng.Int64N(model[from]+model[from]/2+1)
					out, err := wallet.Apply(states[from], wallet.TransferOut{MerchantID: "M1", TransactionID: txn,
						Amount: money.FromUnits(cents), Destination: states[to], At: at})
					switch {
					case from == to:
						if !errors.Is(err, wallet.ErrSameWallet) {
							t.Fatalf("step %d: self transfer: err = %v", step, err)
						}
						continue
					case cents > 99_999_900:
						if !errors.Is(err, wallet.ErrInvalidAmount) {
							t.Fatalf("step %d: over max: err = %v", step, err)
						}
						continue
					case cents > model[from]:
						var ins wallet.InsufficientFundsError
						if !errors.As(err, &ins) {
							t.Fatalf("step %d: %d > %d cents: err = %v", step, cents, model[from], err)
						}
						refusedFunds++
						continue
					case err != nil:
						t.Fatalf("step %d: transfer out of %d cents (balance %d): %v", step, cents, model[from], err)
					}
					in, err := wallet.Apply(states[to], wallet.TransferIn{MerchantID: "M1", TransactionID: txn,
						Amount: money.FromUnits(cents), Origin: states[from].WalletID, Currency: out.State.Currency, At: at})
					if err != nil {
						t.Fatalf("step %d: transfer in: %v", step, err)
					}
					es := append(append([]ledger.Entry{}, out.Entries...), in.Entries...)
					if err := ledger.Balanced(es); err != nil {
						t.Fatalf("step %d: transfer unbalanced: %v", step, err)
					}
					states[from], states[to] = out.State, in.State
					model[from] -= cents
					model[to] += cents
					all = append(all, es...)
				}
				for i, s := range states {
					got, err := s.CurrentBalance.Cents()
					if err != nil {
						t.Fatal(err)
					}
					if got != model[i] || !s.AvailableBalance.Equal(s.CurrentBalance) {
						t.Fatalf("step %d: wallet %d: balance %s/%s, model %d cents", step, i, s.CurrentBalance, s.AvailableBalance, model[i])
					}
					if s.CurrentBalance.Sign() < 0 || s.AvailableBalance.Sign() < 0 {
						t.Fatalf("step %d: wallet %d went negative: %s", step, i, s.CurrentBalance)
					}
				}
			}

			if err := ledger.Balanced(all); err != nil {
				t.Fatalf("ledger unbalanced: %v", err)
			}
			amounts := make([]money.Amount, len(all))
			perWallet := map[string][]money.Amount{}
			lastRunning := map[string]money.Amount{}
			for i, e := range all {
				amounts[i] = e.Amount
				if e.WalletID != "" {
					perWallet[e.WalletID] = append(perWallet[e.WalletID], e.Amount)
					if e.RunningBalance == nil {
						t.Fatalf("wallet entry without running balance: %+v", e)
					}
					lastRunning[e.WalletID] = *e.RunningBalance
				}
			}
			if total := money.Sum(amounts...); !total.IsZero() {
				t.Fatalf("all entries sum to %s, want 0.00", total)
			}
			for _, s := range states {
				sum := money.Sum(perWallet[s.WalletID]...)
				if !sum.Equal(s.CurrentBalance) {
					t.Fatalf("wallet %s: balance %s, entries sum %s", s.WalletID, s.CurrentBalance, sum)
				}
				if r, ok := lastRunning[s.WalletID]; ok && !r.Equal(s.CurrentBalance) {
					t.Fatalf("wallet %s: last running balance %s, balance %s", s.WalletID, r, s.CurrentBalance)
				}
			}
			if refusedFunds == 0 {
				t.Log("no transfer was refused for insufficient funds in this run")
			}
		})
	}
}

// A wallet near MaxBalance refuses every credit that would pass it, whatever the
// command, with ErrBalanceLimit and no entries, and still takes one that lands
// exactly on the maximum: the engine turns the refusal into a reply, so the
// database never sees a balance it could not store.
func TestApply_BalanceLimit(t *testing.T) {
	t.Parallel()
	near := func(t *testing.T) wallet.State {
		s := open(t, "W1", "M1", "KES")
		s.CurrentBalance = wallet.MaxBalance.Sub(amt("10.00"))
		s.AvailableBalance = s.CurrentBalance
		return s
	}
	credits := map[string]func(amount string) any{
		"Deposit": func(a string) any {
			return wallet.Deposit{MerchantID: "M1", TransactionID: "DEP", Amount: amt(a), Narrative: "n", At: at}
		},
		"TransferIn": func(a string) any {
			return wallet.TransferIn{MerchantID: "M1", TransactionID: "TX", Amount: amt(a), Narrative: "n", Origin: "SRC", Currency: "KES", At: at}
		},
		"Collect": func(a string) any {
			return wallet.Collect{MerchantID: "M1", TransactionID: "COL", Value: amt(a), Charges: money.Zero(), NetAmount: amt(a),
				Clearing: ledger.CardClearing, Narrative: "n", Uncleared: true, At: at}
		},
	}
	for name, cmd := range credits {
		t.Run(name+"_PastTheMaximumIsRefused", func(t *testing.T) {
			t.Parallel()
			s := near(t)
			res, err := wallet.Apply(s, cmd("10.01"))
			if !errors.Is(err, wallet.ErrBalanceLimit) || len(res.Entries) != 0 {
				t.Fatalf("credit past the maximum: err %v, %d entries; want ErrBalanceLimit and none", err, len(res.Entries))
			}
		})
		t.Run(name+"_UpToTheMaximumIsApplied", func(t *testing.T) {
			t.Parallel()
			s := near(t)
			res, err := wallet.Apply(s, cmd("10.00"))
			if err != nil {
				t.Fatalf("credit up to the maximum: %v", err)
			}
			if !res.State.CurrentBalance.Equal(wallet.MaxBalance) {
				t.Fatalf("balance %s, want %s", res.State.CurrentBalance, wallet.MaxBalance)
			}
		})
	}
	t.Run("MaximumFitsTheStrictParserAndInt64Cents", func(t *testing.T) {
		t.Parallel()
		if _, err := money.Parse(wallet.MaxBalance.String()); err != nil {
			t.Fatalf("MaxBalance %s does not parse back: %v", wallet.MaxBalance, err)
		}
		if _, err := wallet.MaxBalance.Cents(); err != nil {
			t.Fatalf("MaxBalance %s is not representable in int64 cents: %v", wallet.MaxBalance, err)
		}
	})
}
