package engine

import (
	"errors"

	"paysvc/actors/aggregates/wallet"
	"paysvc/actors/values/money"
	"paysvc/storage"
	"paysvc/topics"
)

// The money API of Tx: every kind moves balances through the money kind's own
// commands, in its actors, so every money rule stays in one package and every
// entry is checked balanced (Engine.apply). It is the engine's one dependency on
// an aggregate: the accounts themselves. A kind reads an account (its balance
// after a move, its currency) with the money kind's typed Find.

// MoneyKind is the kind whose instances hold balances: the wallet's, named once
// (storage.WalletKind, which its table and commit are written for).
const MoneyKind = storage.WalletKind

// Reply codes of the money API's refusals, as the API maps them: the wallet
// aggregate's own, which it declares.
const (
	CodeDestNotFound      = wallet.CodeDestNotFound
	CodeInsufficientFunds = wallet.CodeInsufficientFunds
	CodeCurrencyMismatch  = wallet.CodeCurrencyMismatch
	CodeSameWallet        = wallet.CodeSameWallet
	CodeLabelTaken        = wallet.CodeLabelTaken
	CodeBalanceLimit      = wallet.CodeBalanceLimit
)

// A money refusal (insufficient funds, an unknown account...) is an error of
// this type; its standard reply is the one below. It unwraps to the wallet's own
// error, so a kind that words its refusal itself reads the details there (the
// available and requested amounts of a wallet.InsufficientFundsError).
type WalletError struct{ Err error }

func (e WalletError) Error() string { return e.Err.Error() }
func (e WalletError) Unwrap() error { return e.Err }

func WalletRefusal(err error) topics.Reply { return refuse(wallet.Refusal(err)) }

// move applies one command to an account; its refusal is a money refusal.
func (tx *Tx) move(id string, cmd any) error {
	r, err := tx.Ask(MoneyKind, id, cmd)
	if errors.Is(err, ErrNotFound) {
		return WalletError{Err: wallet.ErrNotFound}
	}
	if err != nil {
		return err
	}
	if r.Err != nil {
		return WalletError{Err: r.Err}
	}
	return nil
}

// Hold sets amount of an account's available balance aside.
func (tx *Tx) Hold(id string, amount money.Amount) error {
	return tx.move(id, wallet.Hold{MerchantID: tx.c.MerchantID, Amount: amount, At: tx.b.at})
}

// Release makes held (or uncleared) funds available again.
func (tx *Tx) Release(id string, amount money.Amount) error {
	return tx.move(id, wallet.Release{MerchantID: tx.c.MerchantID, Amount: amount, At: tx.b.at})
}

// Debit pays held funds out of an account to a system account, with balanced
// ledger entries: items' amounts go to clearing, their charges to the fees
// account; transType names the statement line.
func (tx *Tx) Debit(id, clearing, transType string, items []wallet.Disbursement) error {
	return tx.move(id, wallet.Disburse{MerchantID: tx.c.MerchantID, Items: items, Clearing: clearing, TransType: transType, At: tx.b.at})
}

// Credit brings value into an account from a system account: net to it, charges
// to the fees account, value out of clearing.
func (tx *Tx) Credit(id string, c wallet.Collect) error {
	c.MerchantID, c.At = tx.c.MerchantID, tx.b.at
	return tx.move(id, c)
}
