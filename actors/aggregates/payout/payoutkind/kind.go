// Package payoutkind registers the payment-file aggregate (actors/aggregates/payout) with
// the engine (docs/adr/0007-one-aggregate-contract.md): a file is initiated,
// approved (its money held in the paying wallet and its transactions queued to
// their rail), cancelled, and settled by the rail's results (paid transactions
// out of the hold through the ledger, failed ones back to available); a P2P
// transaction credits the recipient's wallet in the recipient's partition.
package payoutkind

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"paysvc/actors/aggregates/payout"
	"paysvc/actors/aggregates/payout/payoutstore"
	"paysvc/actors/aggregates/tariff"
	"paysvc/actors/aggregates/wallet"
	"paysvc/actors/aggregates/wallet/walletkind"
	"paysvc/actors/engine"
	"paysvc/actors/values/ids"
	"paysvc/actors/values/ledger"
	"paysvc/actors/values/money"
	"paysvc/storage"
	"paysvc/topics"
)

// Name is the payment files' kind.
const Name = storage.PayoutKind

// Reply codes of payout commands.
const (
	CodeNotAwaitingApproval = "not_awaiting_approval"
	CodeNotCancellable      = "not_cancellable"
	CodeCannotDisburse      = "cannot_disburse"
	CodeNonceMismatch       = "nonce_mismatch"
	// CodeInsufficientBalance refuses an approval (or an initiation with
	// requires_approval NO) that the paying wallet's available balance cannot
	// cover. Nothing changes: the file, if it exists, still awaits approval.
	CodeInsufficientBalance = "insufficient_balance"
	// CodeNotProcessing refuses an operator's hold, release or fail of a file
	// that is not being paid (awaiting approval, complete, cancelled).
	CodeNotProcessing = "not_processing"
	// CodeFileOnHold refuses a rail's submission of a held file's transactions.
	CodeFileOnHold = "file_on_hold"
)

var payoutTxns = promauto.NewCounterVec(prometheus.CounterOpts{
	Name: "paysvc_payout_transactions_total",
	Help: "Payout transactions that reached their outcome in a committed batch, by provider and status (COMPLETE, FAILED).",
}, []string{"provider", "status"})

func init() {
	for _, p := range payout.Providers {
		payoutTxns.WithLabelValues(p, payout.TxnComplete)
		payoutTxns.WithLabelValues(p, payout.TxnFailed)
	}
}

// Files is the payment-file kind as its commands use it through a Tx.
const Files = engine.Of[payout.State](Name)

// Kind is the payment-file aggregate's registration. fees prices each
// transaction of a file when the file opens (nil: tariff.DefaultSchedule()).
func Kind(fees *tariff.Schedule) engine.Kind {
	if fees == nil {
		fees = tariff.DefaultSchedule()
	}
	open := func(tx *engine.Tx, c *topics.Command, in *topics.PayoutInitiate) (topics.Reply, error) {
		return initiate(tx, c, in, fees)
	}
	return engine.Define[payout.State](aggregate{},
		// An initiation opens its file by Create (Tx.Live checks its id), so it
		// names no instance of its own; it needs its paying wallet.
		engine.On[payout.State](topics.CmdPayoutInitiate, engine.Guard{}, noIDs[topics.PayoutInitiate], open,
			engine.Needs(initiateNeeds), engine.Prepare(prepareInitiate)),
		engine.On[payout.State](topics.CmdPayoutApprove, engine.Guard{},
			func(p *topics.PayoutApprove) []string { return []string{p.FileID} }, approve,
			engine.Prepare(prepareApprove)),
		engine.On[payout.State](topics.CmdPayoutCancel, engine.Guard{},
			func(p *topics.PayoutCancel) []string { return []string{p.FileID} }, cancel),
		// A rail's results complete money in motion. The SUBMITTED stage of a
		// disabled merchant is refused by results, not here: a FINAL outcome must
		// still land.
		engine.On[payout.State](topics.CmdPayoutResults, engine.Guard{WhileDisabled: true},
			func(p *topics.PayoutResults) []string { return []string{p.FileID} }, results),
		// A P2P credit, in the recipient's partition, is checked against its payer
		// (p2pCredit checks the recipient).
		engine.On[payout.State](topics.CmdPayoutP2PCredit,
			engine.Guard{WhileDisabled: true, Subject: engine.SubjectOf(func(p *topics.PayoutP2PCredit) string { return p.PayerMerchantID })},
			noIDs[topics.PayoutP2PCredit], p2pCredit, engine.Needs(p2pNeeds)),
		// An operator's kill switch of one file must work on a disabled merchant
		// above all (disable, then fail the file a stolen key approved).
		operator(topics.CmdPayoutHold),
		operator(topics.CmdPayoutRelease),
		operator(topics.CmdPayoutFail),
	)
}

// operator declares one of the operator's commands on a file (hold, release,
// fail): they share their payload, and operate tells them apart by type.
func operator(typ string) engine.Command[payout.State] {
	return engine.On[payout.State](typ, engine.Guard{WhileDisabled: true},
		func(p *topics.PayoutOperator) []string { return []string{p.FileID} }, operate)
}

// noIDs is the ids of a command that names no existing file.
func noIDs[P any](*P) []string { return nil }

// aggregate is the payment file's definition: hosted (its pure Step), loaded by
// id, indexed by the idempotency keys its transactions hold, referring to its
// wallet, written through paysvc_apply_payout.
type aggregate struct{}

func (aggregate) Name() string { return Name }
func (aggregate) New(id string) payout.State {
	return payout.State{Header: payout.Header{FileID: id}}
}
func (aggregate) Step(s payout.State, msg any) (payout.State, any, error) {
	return payout.Step(s, msg)
}
func (aggregate) Rows() engine.TypedRows[payout.State] { return rows{payoutstore.NewWrites()} }

// initiateNeeds: an initiation names its paying wallet (or the currency's
// settlement wallet).
func initiateNeeds(p *topics.PayoutInitiate) []engine.Ref {
	if p.WalletID != "" {
		return walletRef(p.WalletID)
	}
	return []engine.Ref{{Kind: walletkind.Name, Key: walletkind.SettlementKey(p.Currency)}}
}

// p2pNeeds: a P2P credit names its recipient's wallet.
func p2pNeeds(p *topics.PayoutP2PCredit) []engine.Ref { return walletRef(p.WalletID) }

// Refs: a file's wallet holds and pays its money.
func (aggregate) Refs(s payout.State) []engine.Ref { return walletRef(s.WalletID) }

// walletRef names the wallet id, if any.
func walletRef(id string) []engine.Ref {
	if id == "" {
		return nil
	}
	return []engine.Ref{{Kind: walletkind.Name, ID: id}}
}

// Index: the idempotency keys a file's transactions hold (payoutstore.ClaimsKey), so
// an approval finds the keys files in memory hold, committed or not.
func (aggregate) Index(s payout.State) []string {
	var keys []string
	for _, t := range s.Txns {
		if payoutstore.ClaimsKey(s.Header, t) {
			keys = append(keys, t.IdempotencyKey)
		}
	}
	return keys
}

func (aggregate) Final(s payout.State) bool {
	return s.Status == payout.StatusComplete || s.Status == payout.StatusCancelled || s.Status == payout.StatusFailed
}

func (aggregate) Load(ctx context.Context, q sqlx.QueryerContext, merchantID string, idList []string) ([]engine.Stored[payout.State], error) {
	found, err := payoutstore.Load(ctx, q, merchantID, idList)
	if err != nil {
		return nil, err
	}
	out := make([]engine.Stored[payout.State], 0, len(found))
	for _, s := range found {
		out = append(out, engine.Stored[payout.State]{ID: s.FileID, Version: s.Version, State: s})
	}
	return out, nil
}

// Facts Prepare reads: whether an initiation's ids are taken (by any merchant),
// and which transaction holds an idempotency key in the table ("" for none).
const (
	idsTakenFact = "ids-taken\x00"
	keyFact      = "key\x00"
)

// Prepare reads, before the batch applies, what the table alone can say: for an
// initiation whether its file or transaction ids are taken, and for it and an
// approval which stored transactions hold the file's idempotency keys. Keys
// claimed by files in memory (committed or not) are the index's (rejectedKeys).
// A file initiated and approved in one batch has its keys read for the
// initiation.
func prepareInitiate(ctx context.Context, q sqlx.QueryerContext, _ engine.Finder, c *topics.Command, p *topics.PayoutInitiate) (map[string]any, error) {
	facts := map[string]any{}
	var keys []string
	txnIDs := make([]string, len(p.Transactions))
	for i, t := range p.Transactions {
		txnIDs[i] = t.TransactionID
		if t.IdempotencyKey != "" {
			keys = append(keys, t.IdempotencyKey)
		}
	}
	taken, err := storage.PayoutIDsTaken(ctx, q, p.FileID, txnIDs)
	if err != nil {
		return nil, err
	}
	facts[idsTakenFact+p.FileID] = taken
	return keyFacts(ctx, q, c, facts, keys)
}

func prepareApprove(ctx context.Context, q sqlx.QueryerContext, find engine.Finder, c *topics.Command, p *topics.PayoutApprove) (map[string]any, error) {
	s, ok := Files.Found(find, p.FileID)
	if !ok {
		return nil, nil
	}
	var keys []string
	for _, t := range s.Txns {
		if t.IdempotencyKey != "" {
			keys = append(keys, t.IdempotencyKey)
		}
	}
	return keyFacts(ctx, q, c, map[string]any{}, keys)
}

// keyFacts adds to facts which stored transaction holds each of keys.
func keyFacts(ctx context.Context, q sqlx.QueryerContext, c *topics.Command, facts map[string]any, keys []string) (map[string]any, error) {
	if len(keys) == 0 {
		return facts, nil
	}
	held, err := storage.ClaimedPayoutKeys(ctx, q, c.MerchantID, keys)
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		facts[keyFact+k] = held[k]
	}
	return facts, nil
}

// keyHolder is Prepare's fact of an idempotency key: the stored transaction
// that holds it ("" for none), and whether it was prepared.
func keyHolder(tx *engine.Tx, key string) (string, bool) {
	return engine.FactOf[string](tx, keyFact+key) // keyFacts stores strings
}

// deltaOf is a file's step's out as its type: payout.Step says what it
// changed with a Delta (the engine carries outs as any).
func deltaOf(out any) payout.Delta {
	d, _ := engine.OutOf[payout.Delta](out)
	return d
}

// rows writes files through paysvc_apply_payout: a file's header, and the
// transactions its steps changed, plus those that now hold their idempotency key
// (a transaction that holds its key must have its row written with claims_key in
// the batch that claimed it, even if nothing else about it changed: once the
// batch commits the table alone answers for the key).
type rows struct{ w *payoutstore.Writes }

func (r rows) Touch(_, _ string, before, after engine.Stored[payout.State], outs []any) error {
	b, a := before.State, after.State
	var changed []int
	for _, o := range outs {
		changed = append(changed, deltaOf(o).Changed...)
	}
	for i, t := range a.Txns {
		if payoutstore.ClaimsKey(a.Header, t) && (i >= len(b.Txns) || !payoutstore.ClaimsKey(b.Header, b.Txns[i])) {
			changed = append(changed, i)
		}
	}
	r.w.Touch(b, a, changed)
	return nil
}

func (r rows) Writes() storage.AggregateRows { return r.w }

// fileReply is the reply of initiate, approve and cancel: the file as merchants
// see it, with its wallet.
func fileReply(f payout.State, w wallet.View) topics.Reply {
	return topics.Reply{Result: mustJSON(f.View(&w, nil))}
}

// clearingOf is the system account a provider's payouts go to.
func clearingOf(provider string) string {
	switch provider {
	case payout.ProviderPesalink:
		return ledger.PesalinkClearing
	case payout.ProviderAirtime:
		return ledger.AirtimeClearing
	case payout.ProviderRTGS:
		return ledger.RTGSClearing
	case payout.ProviderP2P:
		return ledger.P2PClearing
	}
	return ledger.MpesaClearing
}

// counted books transactions of a file that reached an outcome, once committed.
func counted(tx *engine.Tx, provider string, complete, failed int) {
	tx.AfterCommit(func() {
		if complete > 0 {
			payoutTxns.WithLabelValues(provider, payout.TxnComplete).Add(float64(complete))
		}
		if failed > 0 {
			payoutTxns.WithLabelValues(provider, payout.TxnFailed).Add(float64(failed))
		}
	})
}

// initiate opens a file, each transaction priced by fees; with requires_approval
// NO it is approved in the same command (and so the same transaction).
func initiate(tx *engine.Tx, c *topics.Command, in *topics.PayoutInitiate, fees *tariff.Schedule) (topics.Reply, error) {
	if tx.Live(Name, in.FileID) {
		return engine.Refuse(engine.CodeIDTaken, "File id is already in use; retry the request.", ""), nil
	}
	if taken, _ := tx.Fact(idsTakenFact + in.FileID); taken == true {
		return engine.Refuse(engine.CodeIDTaken, "File or transaction id is already in use; retry the request.", ""), nil
	}
	walletID := in.WalletID
	if walletID == "" {
		id, ok := tx.Lookup(walletkind.Name, walletkind.SettlementKey(in.Currency))
		if !ok {
			return engine.Refuse(engine.CodeNotFound, "Wallet not found.", "wallet_id"), nil
		}
		walletID = id
	}
	w, ok := walletkind.Wallets.Find(tx, walletID)
	if !ok {
		return engine.Refuse(engine.CodeNotFound, "Wallet not found.", "wallet_id"), nil
	}
	switch {
	case !w.Exists() || w.MerchantID != c.MerchantID:
		return engine.Refuse(engine.CodeNotFound, "Wallet not found.", "wallet_id"), nil
	case w.Currency != in.Currency:
		return engine.Refuse(engine.CodeCurrencyMismatch, fmt.Sprintf("The wallet holds %s but the file pays %s.", w.Currency, in.Currency), "currency"), nil
	case !w.CanDisburse:
		return engine.Refuse(CodeCannotDisburse, "This wallet cannot be the source of payouts (can_disburse is false).", "wallet_id"), nil
	}
	txns, ok := priced(fees, in)
	if !ok {
		return engine.Refuse(engine.CodeInvalid, "Invalid payment file: provider "+in.Provider+" has no payout fee.", "provider"), nil
	}
	r, err := Files.Create(tx, in.FileID, payout.Create{Header: payout.Header{
		FileID: in.FileID, TrackingID: in.TrackingID, Nonce: in.Nonce, MerchantID: c.MerchantID, WalletID: w.WalletID,
		Provider: in.Provider, Currency: in.Currency, RequiresApproval: in.RequiresApproval, BatchReference: in.BatchReference,
		DeviceID: in.DeviceID, CallbackURL: in.CallbackURL,
	}, Txns: txns, At: tx.At()})
	if err != nil {
		return topics.Reply{}, err
	}
	if errors.Is(r.Err, payout.ErrExists) {
		// Another command of this batch opened the id first (any merchant's: the
		// engine names a partition's actors by id).
		return engine.Refuse(engine.CodeIDTaken, "File id is already in use; retry the request.", ""), nil
	}
	if r.Err != nil {
		return engine.Refuse(engine.CodeInvalid, "Invalid payment file: "+r.Err.Error(), ""), nil
	}
	f := r.After
	if !in.RequiresApproval {
		// Approved in the same command. If the wallet cannot cover it the file never
		// comes to be (a 400 changes nothing): the refusal undoes its creation.
		return approveFile(tx, c, f, true)
	}
	sendMoneyEvent(tx, f)
	callback(tx, c, f, deltaOf(r.Out).Changed)
	return fileReply(f, w.View()), nil
}

// priced is a file's transactions as the file holds them, each charged its fee
// (tariff.Schedule.PayoutFee). A command's own charge (topics.PayoutTxnIn.Charge)
// is never used: the price is the aggregate's rule, so no producer of a command
// sets what a payout costs. An amount that is not positive is left unpriced, for
// Create to refuse as it refuses any invalid transaction; a provider no schedule
// prices (only a command no API sent names one) refuses the file (not ok).
func priced(fees *tariff.Schedule, in *topics.PayoutInitiate) (txns []payout.Txn, ok bool) {
	txns = make([]payout.Txn, len(in.Transactions))
	for i, t := range in.Transactions {
		charge := money.Zero()
		if t.Amount.Sign() > 0 {
			var err error
			if charge, err = fees.PayoutFee(in.Provider, t.Amount); err != nil {
				return nil, false
			}
		}
		txns[i] = payout.Txn{TransactionID: t.TransactionID, RequestReferenceID: t.RequestReferenceID, Account: t.Account,
			Amount: t.Amount, Charge: charge, Name: t.Name, IDNumber: t.IDNumber, CategoryName: t.CategoryName,
			Narrative: t.Narrative, AccountType: t.AccountType, AccountReference: t.AccountReference, BankCode: t.BankCode,
			IdempotencyKey: t.IdempotencyKey, RecipientMerchantID: t.RecipientMerchantID,
			RecipientWalletID: t.RecipientWalletID}
	}
	return txns, true
}

// approve approves a file awaiting approval.
func approve(tx *engine.Tx, c *topics.Command, in *topics.PayoutApprove) (topics.Reply, error) {
	st, ok := Files.Find(tx, in.FileID)
	if !ok {
		return engine.Refuse(engine.CodeNotFound, "Payment file not found.", "file_id"), nil
	}
	if st.MerchantID != c.MerchantID {
		return engine.Refuse(engine.CodeNotFound, "Payment file not found.", "file_id"), nil
	}
	if in.Nonce != "" && in.Nonce != st.Nonce {
		return engine.Refuse(CodeNonceMismatch, "The nonce does not match this file.", "nonce"), nil
	}
	if st.Status != payout.StatusPreview {
		return engine.Refuse(CodeNotAwaitingApproval, "The file is not awaiting approval: its status is "+st.Status+".", "file_id"), nil
	}
	return approveFile(tx, c, st, false)
}

// approveFile holds the file's money and queues its transactions. When the wallet
// cannot cover it, it refuses (insufficient_balance) and changes nothing: the
// file still awaits approval, nothing is held, no event or callback is queued, so
// the merchant can top the wallet up and approve again. The refusal's text derives
// from the wallet's state and the file only, so a re-applied command answers the
// same. created: the initiation approves in the same command.
func approveFile(tx *engine.Tx, c *topics.Command, st payout.State, created bool) (topics.Reply, error) {
	rejected, err := rejectedKeys(tx, st)
	if err != nil {
		return topics.Reply{}, err
	}
	if hold := payout.HoldFor(st, rejected); hold.Sign() > 0 {
		err := tx.Hold(st.WalletID, hold)
		var short wallet.InsufficientFundsError
		if errors.As(err, &short) {
			// The wallet refused the hold and did not change.
			after := "Nothing was held; the file still awaits approval."
			if created {
				after = "Nothing was held and no file was created."
			}
			return engine.Refuse(CodeInsufficientBalance, fmt.Sprintf("Insufficient balance in wallet %s: available %s, the file needs %s "+
				"(amounts plus charges). %s", st.WalletID, short.Available, short.Requested, after), "wallet_id"), nil
		}
		if err != nil {
			return topics.Reply{}, fmt.Errorf("engine: hold for file %s: %w", st.FileID, err)
		}
	}
	wafter, ok := walletkind.Wallets.Find(tx, st.WalletID) // after the hold
	if !ok {
		return topics.Reply{}, errors.New("engine: wallet of payment file " + st.FileID + " is gone")
	}
	r, err := Files.Ask(tx, st.FileID, payout.Approve{Rejected: rejected, SubmitNow: st.Provider == payout.ProviderP2P, At: tx.At()})
	if err == nil && r.Err != nil {
		err = r.Err
	}
	if err != nil {
		return topics.Reply{}, err
	}
	f, d := r.After, deltaOf(r.Out)
	counted(tx, f.Provider, 0, len(rejected))
	queuePayouts(tx, c, f, rejected)
	sendMoneyEvent(tx, f)
	callback(tx, c, f, d.Changed)
	return fileReply(f, wafter.View()), nil
}

// rejectedKeys finds the transactions whose idempotency key is already held: by
// an earlier transaction of the file, by a transaction of a file in memory
// (committed or not), or by a stored one (Prepare's facts).
func rejectedKeys(tx *engine.Tx, st payout.State) (map[string]string, error) {
	rejected := map[string]string{}
	first := map[string]string{}
	for _, t := range st.Txns {
		k := t.IdempotencyKey
		if k == "" {
			continue
		}
		if prev, dup := first[k]; dup {
			rejected[t.TransactionID] = "Duplicate idempotency_key: transaction " + prev + " of this file has it."
			continue
		}
		first[k] = t.TransactionID
		if holder := liveHolder(tx, k); holder != "" {
			rejected[t.TransactionID] = "Duplicate idempotency_key: already used by transaction " + holder + "."
			continue
		}
		holder, ok := keyHolder(tx, k)
		if !ok {
			return nil, errors.New("payoutkind: idempotency key of file " + st.FileID + " not prepared")
		}
		if holder != "" && holder != t.TransactionID {
			rejected[t.TransactionID] = "Duplicate idempotency_key: already used by transaction " + holder + "."
		}
	}
	return rejected, nil
}

// liveHolder is the transaction of a file in memory that holds key, or "".
func liveHolder(tx *engine.Tx, key string) string {
	id, ok := tx.Lookup(Name, key)
	if !ok {
		return ""
	}
	f, ok := Files.Find(tx, id)
	if !ok {
		return ""
	}
	for _, t := range f.Txns {
		if t.IdempotencyKey == key && payoutstore.ClaimsKey(f.Header, t) {
			return t.TransactionID
		}
	}
	return ""
}

// queuePayouts sends the payable transactions to their rail: rail requests of at
// most topics.PayoutChunk transactions, or, for P2P, one credit command per
// transaction keyed by the recipient merchant. All go through the outbox, in the
// batch's transaction, with ids derived from the command, so a re-applied command
// queues the same records.
func queuePayouts(tx *engine.Tx, c *topics.Command, f payout.State, rejected map[string]string) {
	if f.Provider == payout.ProviderP2P {
		for _, t := range f.Txns {
			if _, no := rejected[t.TransactionID]; no {
				continue
			}
			dest := t.Account
			if t.RecipientWalletID != "" {
				dest = t.RecipientWalletID // an email resolved at initiation
			}
			payload := mustJSON(topics.PayoutP2PCredit{PayerMerchantID: f.MerchantID, FileID: f.FileID, TransactionID: t.TransactionID,
				WalletID: dest, Account: t.Account, Amount: t.Amount, Currency: f.Currency, Narrative: t.Narrative})
			// The approval's environment, which the guard found to be the payer's:
			// the credit is checked against the payer (Guard.Subject), the
			// recipient by p2pCredit.
			cmd := topics.Command{ID: ids.DeriveUUID("p2p-credit", f.FileID, t.TransactionID), Type: topics.CmdPayoutP2PCredit,
				Version: 1, MerchantID: t.RecipientMerchantID, IssuedAt: tx.At(), Environment: c.Environment, Payload: payload}
			emitCommand(tx, ids.DeriveUUID(c.ID, "p2p", t.TransactionID), f.MerchantID, cmd)
		}
		return
	}
	queueRail(tx, c, f, "payout-rail", 0, func(t payout.Txn) bool {
		_, no := rejected[t.TransactionID]
		return !no
	})
}

// queueRail queues the transactions of f that send says to send to their rail, in
// requests of at most topics.PayoutChunk transactions numbered from base. The
// records' ids derive from the command, label and the request's place.
func queueRail(tx *engine.Tx, c *topics.Command, f payout.State, label string, base int, send func(payout.Txn) bool) {
	var chunk []topics.PayoutRailTxn
	n := 0
	flush := func() {
		if len(chunk) == 0 {
			return
		}
		req := topics.PayoutRailRequest{FileID: f.FileID, MerchantID: f.MerchantID, Provider: f.Provider, Currency: f.Currency,
			Chunk: base + n, Transactions: chunk}
		tx.Emit(storage.OutboxEvent{EventID: ids.DeriveUUID(c.ID, label, fmt.Sprint(n)),
			Topic: topics.RailsPayoutTopic, Key: f.FileID, MerchantID: f.MerchantID, Body: mustJSON(req)})
		chunk = nil
		n++
	}
	for _, t := range f.Txns {
		if !send(t) {
			continue
		}
		chunk = append(chunk, railTxn(t))
		if len(chunk) == topics.PayoutChunk {
			flush()
		}
	}
	flush()
}

// cancel cancels a file awaiting approval; nothing was held, so no money moves.
func cancel(tx *engine.Tx, c *topics.Command, in *topics.PayoutCancel) (topics.Reply, error) {
	if _, ok := Files.Find(tx, in.FileID); !ok {
		return engine.Refuse(engine.CodeNotFound, "Payment file not found.", "file_id"), nil
	}
	r, err := Files.Ask(tx, in.FileID, payout.Cancel{At: tx.At()})
	if err != nil {
		return topics.Reply{}, err
	}
	before := r.Before
	if before.MerchantID != c.MerchantID {
		return engine.Refuse(engine.CodeNotFound, "Payment file not found.", "file_id"), nil
	}
	if r.Err != nil {
		return engine.Refuse(CodeNotCancellable, "The file cannot be cancelled: its status is "+before.Status+
			"; only a file awaiting approval (PREVIEW-AND-APPROVE) can be.", "file_id"), nil
	}
	f := r.After
	ws, ok := walletkind.Wallets.Find(tx, f.WalletID)
	if !ok {
		return topics.Reply{}, errors.New("engine: wallet " + f.WalletID + " is gone")
	}
	sendMoneyEvent(tx, f)
	callback(tx, c, f, deltaOf(r.Out).Changed)
	return fileReply(f, ws.View()), nil
}

// results applies a rail's outcomes: paid transactions leave the hold through the
// ledger, failed ones go back to the available balance, in the same command.
func results(tx *engine.Tx, c *topics.Command, in *topics.PayoutResults) (topics.Reply, error) {
	if _, ok := Files.Find(tx, in.FileID); !ok {
		return engine.Refuse(engine.CodeNotFound, "Payment file not found.", "file_id"), nil
	}
	if in.Stage != topics.PayoutStageFinal && !tx.MerchantOf(c.MerchantID).Enabled {
		// A disabled merchant's money stops: the rails send a transaction only once
		// its submission applied, so refusing it keeps the transaction unsent (and
		// held). A FINAL outcome still applies: that money is already in motion.
		return engine.Refuse(engine.CodeMerchantDisabled, "This merchant account is disabled: no payout is sent.", ""), nil
	}
	outs := make([]payout.Outcome, len(in.Results))
	for i, r := range in.Results {
		outs[i] = payout.Outcome{TransactionID: r.TransactionID, Success: r.Success, Description: r.Description,
			ProviderReference: r.ProviderReference, ProviderAccountName: r.ProviderAccountName}
	}
	sp := tx.Savepoint()
	r, err := Files.Ask(tx, in.FileID, payout.Results{Final: in.Stage == topics.PayoutStageFinal, Outcomes: outs, At: tx.At()})
	if err != nil {
		return topics.Reply{}, err
	}
	if errors.Is(r.Err, payout.ErrOnHold) {
		return engine.Refuse(CodeFileOnHold, "The payment file is on hold: nothing is sent until an operator releases it.", "file_id"), nil
	}
	if r.Err != nil {
		return engine.Refuse(engine.CodeInvalid, r.Err.Error(), "file_id"), nil
	}
	f, d := r.After, deltaOf(r.Out)
	if len(d.Unsubmitted) > 0 {
		// Only a forged or misrouted result names a transaction no rail has yet, or
		// a simulator's whose submission was refused (merchant disabled, file held
		// meanwhile): the transaction stays unsent and held, and is sent later.
		tx.Log().Warn("payout results for transactions never submitted: ignored", "file_id", in.FileID,
			"command_id", c.ID, "transactions", d.Unsubmitted)
	}
	type summary struct {
		FileID  string `json:"file_id"`
		Status  string `json:"status"`
		Applied int    `json:"applied"`
		Ignored int    `json:"ignored"`
	}
	reply := topics.Reply{Result: mustJSON(summary{FileID: f.FileID, Status: f.Status, Applied: len(d.Changed), Ignored: d.Ignored})}
	if len(d.Changed) == 0 {
		// Nothing changed: nothing is written.
		return reply, tx.Rollback(sp)
	}
	if len(d.Paid) > 0 || d.Release.Sign() > 0 {
		if err := settle(tx, f, d); err != nil {
			return topics.Reply{}, err
		}
	}
	if in.Stage == topics.PayoutStageFinal {
		counted(tx, f.Provider, len(d.Paid), len(d.Changed)-len(d.Paid))
	}
	if d.Moved {
		sendMoneyEvent(tx, f)
	}
	callback(tx, c, f, d.Changed)
	return reply, nil
}

// operatorActions maps the operator's command types to the file's actions.
var operatorActions = map[string]string{topics.CmdPayoutHold: payout.ActionHold,
	topics.CmdPayoutRelease: payout.ActionRelease, topics.CmdPayoutFail: payout.ActionFail}

// OperatorResult is the reply of an operator's hold, release or fail.
type OperatorResult struct {
	FileID   string `json:"file_id"`
	Action   string `json:"action"`
	Status   string `json:"status"`
	OnHold   bool   `json:"on_hold"`
	Changed  bool   `json:"changed"`
	Failed   int    `json:"failed"`   // FAIL: transactions failed now
	Released string `json:"released"` // FAIL: hold released to available
	Message  string `json:"message"`
}

// operate applies an operator's hold, release or fail of a file being paid. Hold
// and release move no money; fail releases the hold of every unsent transaction
// (PENDING: no rail has it) in the same transaction. A release queues the file's
// unsent transactions to their rail again, so sending resumes at once where it
// stopped (the rails send only what is still due, and never a transaction twice).
func operate(tx *engine.Tx, c *topics.Command, in *topics.PayoutOperator) (topics.Reply, error) {
	action := operatorActions[c.Type]
	cur, ok := Files.Find(tx, in.FileID)
	if !ok || cur.MerchantID != c.MerchantID {
		return engine.Refuse(engine.CodeNotFound, "Payment file not found.", "file_id"), nil
	}
	if in.By == "" {
		return engine.Refuse(engine.CodeInvalid, "An operator command names its operator (by).", "by"), nil
	}
	if action == payout.ActionFail && in.Reason == "" {
		return engine.Refuse(engine.CodeInvalid, "Failing a file needs a reason, which the merchant is shown.", "reason"), nil
	}
	r, err := Files.Ask(tx, in.FileID, payout.Operator{Action: action, By: in.By, Reason: in.Reason, CommandID: c.ID, At: tx.At()})
	if err != nil {
		return topics.Reply{}, err
	}
	before := r.Before
	res := OperatorResult{FileID: in.FileID, Action: action, Status: before.Status, OnHold: before.OnHold, Released: "0.00"}
	switch {
	case errors.Is(r.Err, payout.ErrNotProcessing):
		return engine.Refuse(CodeNotProcessing, "The payment file is "+before.Status+": only a file being paid (PROCESSING) can be held, released or failed.", "file_id"), nil
	case errors.Is(r.Err, payout.ErrNoChange):
		res.Message = map[string]string{
			payout.ActionHold:    "The file is on hold already: nothing changed.",
			payout.ActionRelease: "The file is not on hold: nothing changed.",
			payout.ActionFail:    "The file has no unsent transaction to fail (each was handed to its rail or has its outcome): nothing changed.",
		}[action]
		return topics.Reply{Result: mustJSON(res)}, nil
	case r.Err != nil:
		return topics.Reply{}, fmt.Errorf("engine: %s of payment file %s: %w", c.Type, in.FileID, r.Err)
	}
	f, d := r.After, deltaOf(r.Out)
	if d.Release.Sign() > 0 {
		if err := settle(tx, f, d); err != nil {
			return topics.Reply{}, err
		}
		counted(tx, f.Provider, 0, len(d.Changed))
	}
	if action == payout.ActionRelease {
		queueUnsent(tx, c, f)
	}
	tx.Log().Info("payment file changed by an operator", "file_id", f.FileID, "action", action, "by", in.By,
		"reason", in.Reason, "command_id", c.ID, "failed", len(d.Changed))
	a := f.LastAction()
	sendMoneyEventBy(tx, f, &topics.SendMoneyOperator{Action: a.Action, Reason: a.Reason, Failed: a.Failed, At: a.At})
	if len(d.Changed) > 0 { // the callback shows transactions; a hold or release changes none
		callback(tx, c, f, d.Changed)
	}
	res.Status, res.OnHold, res.Changed, res.Failed, res.Released = f.Status, f.OnHold, true, len(d.Changed), d.Release.String()
	res.Message = map[string]string{
		payout.ActionHold:    "The file is on hold: its unsent transactions are not sent until it is released.",
		payout.ActionRelease: "The file is released: its unsent transactions are sent again.",
		payout.ActionFail:    fmt.Sprintf("%d unsent transactions failed and their hold was released.", len(d.Changed)),
	}[action]
	return topics.Reply{Result: mustJSON(res)}, nil
}

// queueUnsent queues a released file's unsent (PENDING) transactions to their
// rail again: their first requests may have been read while the file was held,
// and skipped. Chunk numbers start above any the approval or the recovery use
// (from the file's version), so their outcomes are new commands.
func queueUnsent(tx *engine.Tx, c *topics.Command, f payout.State) {
	if f.Provider == payout.ProviderP2P {
		return // credited at approval: nothing waits for a rail
	}
	queueRail(tx, c, f, "payout-rail-release", releaseChunkBase+int(f.Version)*10_000, payout.Txn.Unsent)
}

// releaseChunkBase is above every chunk number an approval (0, 1, ...) or the
// recovery (below 10^9) gives a request.
const releaseChunkBase = 1 << 40

func railTxn(t payout.Txn) topics.PayoutRailTxn {
	return topics.PayoutRailTxn{TransactionID: t.TransactionID, Account: t.Account, Amount: t.Amount,
		Name: t.Name, IDNumber: t.IDNumber, Narrative: t.Narrative, AccountType: t.AccountType,
		AccountReference: t.AccountReference, BankCode: t.BankCode}
}

// settle moves a result's money in the wallet: payments out of the hold (ledger
// entries), failures back to available. A wallet refusing (or gone) is a broken
// invariant: the batch fails.
func settle(tx *engine.Tx, f payout.State, d payout.Delta) error {
	if len(d.Paid) > 0 {
		items := make([]wallet.Disbursement, len(d.Paid))
		for i, pd := range d.Paid {
			items[i] = wallet.Disbursement{TransactionID: pd.TransactionID, Amount: pd.Amount, Charge: pd.Charge,
				Narrative: "Payout " + f.Provider + " " + pd.Account + " file " + f.FileID}
		}
		if err := tx.Debit(f.WalletID, clearingOf(f.Provider), wallet.TransTypePayout, items); err != nil {
			return fmt.Errorf("engine: payment file %s, wallet %s: %w", f.FileID, f.WalletID, err)
		}
	}
	if d.Release.Sign() > 0 {
		if err := tx.Release(f.WalletID, d.Release); err != nil {
			return fmt.Errorf("engine: payment file %s, wallet %s: %w", f.FileID, f.WalletID, err)
		}
	}
	return nil
}

// p2pCredit credits a recipient's wallet with a P2P payout (in the recipient's
// partition) and sends the outcome back to the payer's file as a payout.results.
// A wallet that is not the recipient's, or of another currency, fails the payout
// without moving money.
func p2pCredit(tx *engine.Tx, c *topics.Command, in *topics.PayoutP2PCredit) (topics.Reply, error) {
	result := topics.PayoutTxnResult{TransactionID: in.TransactionID}
	// Money never crosses environments: a live file cannot pay a sandbox wallet
	// (whose balance is play money) nor the reverse. The API refuses such files;
	// this holds whatever produced the command. The wallet is then "not found",
	// as the other environment's wallets are to the API.
	payer, recipient := tx.MerchantOf(in.PayerMerchantID), tx.MerchantOf(c.MerchantID)
	sameEnv := payer.Exists && recipient.Exists && payer.Environment == recipient.Environment
	// A disabled recipient receives nothing: the payout fails and the payer's
	// hold is released (the guard let the command through for the payer, whose
	// money is already in motion).
	found := false
	if in.WalletID != "" && sameEnv && recipient.Enabled {
		_, found = walletkind.Wallets.Find(tx, in.WalletID)
	}
	// What the payer called the recipient: its descriptions never show the wallet
	// an email resolved to.
	named := in.Account
	if named == "" {
		named = in.WalletID
	}
	if !found {
		result.Description = "Recipient " + named + " not found."
	} else {
		sp := tx.Savepoint()
		err := tx.Credit(in.WalletID, wallet.Collect{
			TransactionID: in.TransactionID, Value: in.Amount, Charges: money.Zero(), NetAmount: in.Amount,
			Clearing: ledger.P2PClearing, Narrative: "P2P payout from " + in.PayerMerchantID + " file " + in.FileID,
			TransType: wallet.TransTypeP2P,
		})
		var refused engine.WalletError
		switch w, _ := walletkind.Wallets.Find(tx, in.WalletID); {
		case errors.As(err, &refused):
			result.Description = "Recipient wallet cannot receive this payout."
		case err != nil:
			return topics.Reply{}, err
		case w.Currency != in.Currency:
			// A credit is in its wallet's currency: one of another is undone.
			if err := tx.Rollback(sp); err != nil {
				return topics.Reply{}, err
			}
			result.Description = "Recipient " + named + " cannot receive " + in.Currency + "."
		default:
			result.Success, result.Description = true, "Credited to "+named+"."
			result.ProviderReference = ids.Derive(10, "p2p", in.FileID, in.TransactionID)
			result.ProviderAccountName = w.Label
		}
	}
	payload := mustJSON(topics.PayoutResults{FileID: in.FileID, MerchantID: in.PayerMerchantID, Stage: topics.PayoutStageFinal, Batch: "p2p-" + in.TransactionID,
		Results: []topics.PayoutTxnResult{result}})
	cmd := topics.Command{ID: topics.PayoutResultCommandID(in.FileID, topics.PayoutStageFinal, "p2p-"+in.TransactionID),
		Type: topics.CmdPayoutResults, Version: 1, MerchantID: in.PayerMerchantID, IssuedAt: tx.At(), Environment: c.Environment, Payload: payload}
	emitCommand(tx, ids.DeriveUUID(c.ID, "p2p-result"), c.MerchantID, cmd)
	return topics.Reply{Result: mustJSON(result)}, nil
}

// emitCommand queues cmd on the command log through the outbox, keyed by the
// merchant it is for, in the batch's transaction; from is the merchant whose
// command queued it.
func emitCommand(tx *engine.Tx, eventID, from string, cmd topics.Command) {
	body, err := topics.EncodeCommand(cmd)
	if err != nil {
		panic(fmt.Sprintf("payoutkind: encode %s: %v", cmd.Type, err)) // only our own types reach here
	}
	tx.Emit(storage.OutboxEvent{EventID: eventID, Topic: topics.CommandsTopic, Key: cmd.MerchantID, MerchantID: from, Body: body})
}

func sendMoneyEvent(tx *engine.Tx, f payout.State) { sendMoneyEventBy(tx, f, nil) }

// sendMoneyEventBy reports a change of f; op is the operator's action that made
// it, if any.
func sendMoneyEventBy(tx *engine.Tx, f payout.State, op *topics.SendMoneyOperator) {
	opt := func(v string) *string {
		if v == "" {
			return nil
		}
		return &v
	}
	// Keyed (and so ordered) by file. The id derives from the command and the file, so
	// each command reports a file once: an initiation without approval, which moves
	// the file twice, reports only where it ended (PROCESSING, or COMPLETE when every
	// transaction was refused).
	tx.Event(topics.SendMoneyEvent, f.FileID, topics.SendMoney{ID: f.FileID, FileID: f.FileID, TrackingID: f.TrackingID,
		State: topics.SendMoneyState(f.Status), Status: f.Status, StatusCode: f.StatusCode,
		Provider: f.Provider, Currency: f.Currency, TotalAmount: f.TotalAmount.String(), ChargeEstimate: f.ChargeEstimate.String(),
		PaidAmount: f.PaidAmount.String(), FailedAmount: f.FailedAmount.String(), ActualCharges: f.ActualCharges.String(),
		TransactionsCount: f.Count, BatchReference: opt(f.BatchReference), FailedReason: opt(f.FailedReason),
		OnHold: f.OnHold, Operator: op, CreatedAt: f.CreatedAt, UpdatedAt: f.UpdatedAt})
}

// callback queues the merchant's callback_url notification of a change: the file
// header and the transactions changed (topics.CallbackTopic; the dispatcher role
// signs and delivers it).
func callback(tx *engine.Tx, c *topics.Command, f payout.State, changed []int) {
	if f.CallbackURL == "" {
		return
	}
	sorted := slices.Clone(changed)
	sort.Ints(sorted)
	txns := make([]payout.Txn, 0, len(sorted))
	for _, i := range sorted {
		txns = append(txns, f.Txns[i])
	}
	view := f.View(nil, txns)
	view.Nonce = "" // it signs the callback
	body := mustJSON(struct {
		Topic string          `json:"topic"`
		Data  payout.FileView `json:"data"`
	}{topics.SendMoneyEvent, view})
	cb := topics.Callback{ID: ids.DeriveUUID(c.ID, "callback", f.FileID, fmt.Sprint(f.Version)), MerchantID: f.MerchantID,
		URL: f.CallbackURL, FileID: f.FileID, OccurredAt: tx.At(), Body: body}
	tx.Emit(storage.OutboxEvent{EventID: cb.ID, Topic: topics.CallbackTopic, Key: f.FileID,
		MerchantID: f.MerchantID, Body: mustJSON(cb)})
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("payoutkind: marshal %T: %v", v, err)) // only our own types reach here
	}
	return b
}
