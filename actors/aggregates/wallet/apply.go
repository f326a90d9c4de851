package wallet

import (
	"fmt"
	"time"

	"paysvc/actors/values/ledger"
	"paysvc/actors/values/money"
)

// Apply decides one command against a wallet's state. It is pure: it returns the
// new state and the ledger entries, or an error and changes nothing.
func Apply(s State, cmd any) (Result, error) {
	switch c := cmd.(type) {
	case Open:
		return applyOpen(s, c)
	case Deposit:
		return applyDeposit(s, c)
	case TransferOut:
		return applyTransferOut(s, c)
	case TransferIn:
		return applyTransferIn(s, c)
	case Collect:
		return applyCollect(s, c)
	case Release:
		return applyRelease(s, c)
	case Hold:
		return applyHold(s, c)
	case Disburse:
		return applyDisburse(s, c)
	default:
		return Result{}, fmt.Errorf("wallet: unknown command %T", cmd)
	}
}

func applyOpen(s State, c Open) (Result, error) {
	if s.Exists() {
		return Result{}, ErrExists
	}
	if c.WalletID == "" || c.MerchantID == "" || !Currencies[c.Currency] ||
		(c.WalletType != TypeWorking && c.WalletType != TypeSettlement) || c.Label == "" {
		return Result{}, ErrInvalidWallet
	}
	return Result{State: State{
		WalletID:         c.WalletID,
		MerchantID:       c.MerchantID,
		Currency:         c.Currency,
		WalletType:       c.WalletType,
		Label:            c.Label,
		CanDisburse:      c.CanDisburse,
		CurrentBalance:   money.Zero(),
		AvailableBalance: money.Zero(),
		Version:          1,
		CreatedAt:        c.At,
		UpdatedAt:        c.At,
	}}, nil
}

func validAmount(a money.Amount, limit *money.Amount) bool {
	if a.Sign() <= 0 {
		return false
	}
	return limit == nil || a.Cmp(*limit) <= 0
}

// fits reports whether amount can be credited without the balance passing
// MaxBalance (current is never below available, so it is the one to check).
func fits(s State, amount money.Amount) bool {
	return s.CurrentBalance.Add(amount).Cmp(MaxBalance) <= 0
}

// credit returns s with amount added to both balances: intra-merchant movements and
// sandbox deposits are cleared funds, available at once.
func credit(s State, amount money.Amount) State {
	s.CurrentBalance = s.CurrentBalance.Add(amount)
	s.AvailableBalance = s.AvailableBalance.Add(amount)
	s.Version++
	return s
}

func entry(s State, txn string, amount money.Amount, transType, narrative string) ledger.Entry {
	rb := s.CurrentBalance
	return ledger.Entry{
		TransactionID:  txn,
		Account:        ledger.WalletAccount(s.WalletID),
		WalletID:       s.WalletID,
		MerchantID:     s.MerchantID,
		Currency:       s.Currency,
		Amount:         amount,
		RunningBalance: &rb,
		TransType:      transType,
		Narrative:      narrative,
	}
}

// credited is s with a cleared credit of amount (at most limit, when there is
// one) at the time at, or the refusal of the amount.
func credited(s State, amount money.Amount, limit *money.Amount, at time.Time) (State, error) {
	if !validAmount(amount, limit) {
		return State{}, ErrInvalidAmount
	}
	if !fits(s, amount) {
		return State{}, ErrBalanceLimit
	}
	n := credit(s, amount)
	n.UpdatedAt = at
	return n, nil
}

// counterpart is the entry of a movement's other side, an account outside the
// merchant's wallets (a rail's clearing, the fees, the sandbox funding): it has no
// wallet and no running balance.
func counterpart(s State, txn, account string, amount money.Amount, transType, narrative string) ledger.Entry {
	return ledger.Entry{TransactionID: txn, Account: account, MerchantID: s.MerchantID, Currency: s.Currency,
		Amount: amount, TransType: transType, Narrative: narrative}
}

// moveAvailable returns s with available set to what a hold or a release leaves
// of it. Current does not change and nothing is written to the ledger: held
// money is still the merchant's.
func moveAvailable(s State, available money.Amount, at time.Time) Result {
	s.AvailableBalance = available
	s.Version++
	s.UpdatedAt = at
	return Result{State: s}
}

func applyDeposit(s State, c Deposit) (Result, error) {
	if !s.Exists() || s.MerchantID != c.MerchantID {
		return Result{}, ErrNotFound
	}
	n, err := credited(s, c.Amount, nil, c.At)
	if err != nil {
		return Result{}, err
	}
	return Result{State: n, Entries: []ledger.Entry{
		entry(n, c.TransactionID, c.Amount, TransTypeDeposit, c.Narrative),
		counterpart(s, c.TransactionID, ledger.SandboxFunding, c.Amount.Neg(), TransTypeDeposit, c.Narrative),
	}}, nil
}

func applyTransferOut(s State, c TransferOut) (Result, error) {
	if !s.Exists() || s.MerchantID != c.MerchantID {
		return Result{}, ErrNotFound
	}
	d := c.Destination
	if !d.Exists() || d.MerchantID != s.MerchantID {
		return Result{}, ErrNoDestination
	}
	if d.WalletID == s.WalletID {
		return Result{}, ErrSameWallet
	}
	if d.Currency != s.Currency {
		return Result{}, ErrCurrencyMismatch
	}
	if !validAmount(c.Amount, &MaxTransfer) {
		return Result{}, ErrInvalidAmount
	}
	if s.AvailableBalance.Cmp(c.Amount) < 0 {
		return Result{}, InsufficientFundsError{WalletID: s.WalletID, Requested: c.Amount, Available: s.AvailableBalance}
	}
	n := s
	n.CurrentBalance = s.CurrentBalance.Sub(c.Amount)
	n.AvailableBalance = s.AvailableBalance.Sub(c.Amount)
	n.Version++
	n.UpdatedAt = c.At
	return Result{State: n, Entries: []ledger.Entry{
		entry(n, c.TransactionID, c.Amount.Neg(), TransTypeTransfer, c.Narrative),
	}}, nil
}

func applyTransferIn(s State, c TransferIn) (Result, error) {
	if !s.Exists() || s.MerchantID != c.MerchantID {
		return Result{}, ErrNotFound
	}
	if c.Currency != s.Currency {
		return Result{}, ErrCurrencyMismatch
	}
	if c.Origin == s.WalletID {
		return Result{}, ErrSameWallet
	}
	n, err := credited(s, c.Amount, &MaxTransfer, c.At)
	if err != nil {
		return Result{}, err
	}
	return Result{State: n, Entries: []ledger.Entry{
		entry(n, c.TransactionID, c.Amount, TransTypeTransfer, c.Narrative),
	}}, nil
}

func applyCollect(s State, c Collect) (Result, error) {
	if !s.Exists() || s.MerchantID != c.MerchantID {
		return Result{}, ErrNotFound
	}
	if !validAmount(c.NetAmount, nil) || c.Charges.Sign() < 0 || !c.Value.Equal(c.NetAmount.Add(c.Charges)) || c.Clearing == "" {
		return Result{}, ErrInvalidAmount
	}
	if !fits(s, c.NetAmount) {
		return Result{}, ErrBalanceLimit
	}
	n := credit(s, c.NetAmount)
	if c.Uncleared {
		n.AvailableBalance = s.AvailableBalance
	}
	n.UpdatedAt = c.At
	tt := c.TransType
	if tt == "" {
		tt = TransTypeSale
	}
	entries := []ledger.Entry{
		entry(n, c.TransactionID, c.NetAmount, tt, c.Narrative),
		counterpart(s, c.TransactionID, c.Clearing, c.Value.Neg(), tt, c.Narrative),
	}
	if c.Charges.Sign() > 0 {
		entries = append(entries, counterpart(s, c.TransactionID, ledger.Fees, c.Charges, TransTypeCharge, c.Narrative))
	}
	return Result{State: n, Entries: entries}, nil
}

func applyRelease(s State, c Release) (Result, error) {
	if !s.Exists() || s.MerchantID != c.MerchantID {
		return Result{}, ErrNotFound
	}
	if !validAmount(c.Amount, nil) || s.AvailableBalance.Add(c.Amount).Cmp(s.CurrentBalance) > 0 {
		return Result{}, ErrInvalidAmount
	}
	return moveAvailable(s, s.AvailableBalance.Add(c.Amount), c.At), nil
}

func applyHold(s State, c Hold) (Result, error) {
	if !s.Exists() || s.MerchantID != c.MerchantID {
		return Result{}, ErrNotFound
	}
	if !validAmount(c.Amount, nil) {
		return Result{}, ErrInvalidAmount
	}
	if s.AvailableBalance.Cmp(c.Amount) < 0 {
		return Result{}, InsufficientFundsError{WalletID: s.WalletID, Requested: c.Amount, Available: s.AvailableBalance}
	}
	return moveAvailable(s, s.AvailableBalance.Sub(c.Amount), c.At), nil
}

func applyDisburse(s State, c Disburse) (Result, error) {
	if !s.Exists() || s.MerchantID != c.MerchantID {
		return Result{}, ErrNotFound
	}
	if len(c.Items) == 0 || c.Clearing == "" {
		return Result{}, ErrInvalidAmount
	}
	total := money.Zero()
	for _, it := range c.Items {
		if !validAmount(it.Amount, nil) || it.Charge.Sign() < 0 || it.TransactionID == "" {
			return Result{}, ErrInvalidAmount
		}
		total = total.Add(it.Amount).Add(it.Charge)
	}
	// Held funds are the part of current not available (with uncleared card funds):
	// a disbursement larger than that would spend money never held.
	if s.CurrentBalance.Sub(s.AvailableBalance).Cmp(total) < 0 {
		return Result{}, InsufficientFundsError{WalletID: s.WalletID, Requested: total, Available: s.CurrentBalance.Sub(s.AvailableBalance)}
	}
	n := s
	tt := c.TransType
	if tt == "" {
		tt = TransTypePayout
	}
	entries := make([]ledger.Entry, 0, 3*len(c.Items))
	for _, it := range c.Items {
		out := it.Amount.Add(it.Charge)
		n.CurrentBalance = n.CurrentBalance.Sub(out)
		entries = append(entries, entry(n, it.TransactionID, out.Neg(), tt, it.Narrative),
			counterpart(s, it.TransactionID, c.Clearing, it.Amount, tt, it.Narrative))
		if it.Charge.Sign() > 0 {
			entries = append(entries, counterpart(s, it.TransactionID, ledger.Fees, it.Charge, TransTypeCharge, it.Narrative))
		}
	}
	n.Version++
	n.UpdatedAt = c.At
	return Result{State: n, Entries: entries}, nil
}
