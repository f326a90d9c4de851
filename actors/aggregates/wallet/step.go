package wallet

import "errors"

// Step is the wallet's transition as its actor hosts it (actors/engine/aggregate): the
// new state, and the command's ledger entries as what it says of the change.
func Step(s State, cmd any) (State, any, error) {
	r, err := Apply(s, cmd)
	if err != nil {
		return s, nil, err
	}
	return r.State, r.Entries, nil
}

// Reply codes of a wallet's refusals; the API maps each to an HTTP status.
const (
	CodeInvalid           = "invalid"
	CodeNotFound          = "not_found"
	CodeDestNotFound      = "destination_not_found"
	CodeInsufficientFunds = "insufficient_funds"
	CodeCurrencyMismatch  = "currency_mismatch"
	CodeSameWallet        = "same_wallet"
	CodeLabelTaken        = "label_taken"
	CodeInternal          = "internal"
	CodeBalanceLimit      = "balance_limit"
)

// Refusal is the reply (code, detail, attribute) to a wallet's refusal: Apply's
// errors as merchants read them.
func Refusal(err error) (code, detail, attr string) {
	var insufficient InsufficientFundsError
	switch {
	case errors.As(err, &insufficient):
		return CodeInsufficientFunds, "Insufficient balance: the available balance " + insufficient.Available.String() +
			" is below the requested amount " + insufficient.Requested.String() + ".", "amount"
	case errors.Is(err, ErrNoDestination):
		return CodeDestNotFound, "Destination wallet not found.", "wallet_id"
	case errors.Is(err, ErrNotFound):
		return CodeNotFound, "Wallet not found.", "wallet_id"
	case errors.Is(err, ErrCurrencyMismatch):
		return CodeCurrencyMismatch, "Wallets must have the same currency.", "wallet_id"
	case errors.Is(err, ErrSameWallet):
		return CodeSameWallet, "Origin and destination wallets must differ.", "wallet_id"
	case errors.Is(err, ErrInvalidAmount):
		return CodeInvalid, "Amount must be greater than 0 and at most 999999.00.", "amount"
	case errors.Is(err, ErrExists):
		return CodeInvalid, "Wallet already exists.", "wallet_id"
	case errors.Is(err, ErrBalanceLimit):
		return CodeBalanceLimit, "The wallet's balance would exceed its maximum of " + MaxBalance.String() + ".", "amount"
	case errors.Is(err, ErrInvalidWallet):
		return CodeInvalid, "Invalid wallet definition.", ""
	default:
		return CodeInternal, "internal error", ""
	}
}
