package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"paysvc/actors/ids"
	"paysvc/actors/ledger"
	"paysvc/actors/money"
	"paysvc/actors/payoutfile"
	"paysvc/actors/wallet"
	"paysvc/storage"
	"paysvc/topics"
)

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
)

// payoutFileIDs are the files a command touches, for hydration.
func payoutFileIDs(payload any) []string {
	switch p := payload.(type) {
	case *topics.PayoutApprove:
		return []string{p.FileID}
	case *topics.PayoutCancel:
		return []string{p.FileID}
	case *topics.PayoutResults:
		return []string{p.FileID}
	}
	return nil
}

// fileReply is the reply of initiate, approve and cancel: the file as merchants
// see it, with its wallet.
func fileReply(f payoutfile.State, w wallet.View) topics.Reply {
	return topics.Reply{Result: mustJSON(f.View(&w, nil))}
}

// clearingOf is the system account a provider's payouts go to.
func clearingOf(provider string) string {
	switch provider {
	case payoutfile.ProviderPesalink:
		return ledger.PesalinkClearing
	case payoutfile.ProviderAirtime:
		return ledger.AirtimeClearing
	case payoutfile.ProviderRTGS:
		return ledger.RTGSClearing
	case payoutfile.ProviderP2P:
		return ledger.P2PClearing
	}
	return ledger.MpesaClearing
}

// initiatePayout opens a file; with requires_approval NO it is approved in the
// same command (and so the same transaction).
func (e *Engine) initiatePayout(ctx context.Context, p *partition, b *batch, c *topics.Command, in topics.PayoutInitiate) (topics.Reply, error) {
	if p.payouts[in.FileID] != nil {
		return refuse(CodeInvalid, "File id is already in use; retry the request.", ""), nil
	}
	txnIDs := make([]string, len(in.Transactions))
	for i, t := range in.Transactions {
		txnIDs[i] = t.TransactionID
	}
	if taken, err := storage.PayoutIDsTaken(ctx, e.db, in.FileID, txnIDs); err != nil {
		return topics.Reply{}, err
	} else if taken {
		return refuse(CodeInvalid, "File or transaction id is already in use; retry the request.", ""), nil
	}
	wref, err := e.payingWallet(ctx, p, c.MerchantID, in.WalletID, in.Currency)
	if err != nil {
		return topics.Reply{}, err
	}
	if wref == nil {
		return refuse(CodeNotFound, "Wallet not found.", "wallet_id"), nil
	}
	ws, err := e.ask(p, wref, func(corr uint64, reply chan<- wallet.Response) any {
		return wallet.Get{CorrID: corr, Reply: reply}
	})
	if err != nil {
		return topics.Reply{}, err
	}
	w := ws.Result.State
	switch {
	case !w.Exists() || w.MerchantID != c.MerchantID:
		return refuse(CodeNotFound, "Wallet not found.", "wallet_id"), nil
	case w.Currency != in.Currency:
		return refuse(CodeCurrencyMismatch, fmt.Sprintf("The wallet holds %s but the file pays %s.", w.Currency, in.Currency), "currency"), nil
	case !w.CanDisburse:
		return refuse(CodeCannotDisburse, "This wallet cannot be the source of payouts (can_disburse is false).", "wallet_id"), nil
	}
	txns := make([]payoutfile.Txn, len(in.Transactions))
	for i, t := range in.Transactions {
		txns[i] = payoutfile.Txn{TransactionID: t.TransactionID, RequestReferenceID: t.RequestReferenceID, Account: t.Account,
			Amount: t.Amount, Charge: t.Charge, Name: t.Name, IDNumber: t.IDNumber, CategoryName: t.CategoryName,
			Narrative: t.Narrative, AccountType: t.AccountType, AccountReference: t.AccountReference, BankCode: t.BankCode,
			IdempotencyKey: t.IdempotencyKey, RecipientMerchantID: t.RecipientMerchantID,
			RecipientWalletID: t.RecipientWalletID}
	}
	ref := e.spawnFile(p, payoutfile.State{Header: payoutfile.Header{FileID: in.FileID}}, c.MerchantID)
	resp, err := e.askFile(p, ref, payoutfile.Create{Header: payoutfile.Header{
		FileID: in.FileID, TrackingID: in.TrackingID, Nonce: in.Nonce, MerchantID: c.MerchantID, WalletID: w.WalletID,
		Provider: in.Provider, Currency: in.Currency, RequiresApproval: in.RequiresApproval, BatchReference: in.BatchReference,
		DeviceID: in.DeviceID, CallbackURL: in.CallbackURL,
	}, Txns: txns, At: b.at})
	if err != nil {
		return topics.Reply{}, err
	}
	if resp.Err != nil {
		e.dropFile(p, in.FileID, ref)
		return refuse(CodeInvalid, "Invalid payment file: "+resp.Err.Error(), ""), nil
	}
	if !in.RequiresApproval {
		// Approved in the same command. If the wallet cannot cover it the file never
		// comes to be (a 400 changes nothing): approveFile records the creation only
		// once the money is held, and the actor is dropped here otherwise.
		r, err := e.approveFile(ctx, p, b, c, ref, resp.After, wref, &resp)
		if err == nil && r.Error != nil {
			e.dropFile(p, in.FileID, ref)
		}
		return r, err
	}
	b.touchPayout(resp.Before, resp.After, resp.Delta.Changed)
	b.outbox = append(b.outbox, e.sendMoneyEvent(c, b.at, resp.After))
	e.callback(b, c, resp.After, resp.Delta.Changed)
	return fileReply(resp.After, w.View()), nil
}

// payingWallet is the named wallet, or the merchant's settlement wallet of currency.
func (e *Engine) payingWallet(ctx context.Context, p *partition, merchantID, walletID, currency string) (*actorRef, error) {
	if walletID != "" {
		return p.wallets[walletID], nil
	}
	return e.settlementWallet(ctx, p, merchantID, currency)
}

// approvePayout approves a file awaiting approval.
func (e *Engine) approvePayout(ctx context.Context, p *partition, b *batch, c *topics.Command, in topics.PayoutApprove) (topics.Reply, error) {
	ref := p.payouts[in.FileID]
	if ref == nil {
		return refuse(CodeNotFound, "Payment file not found.", "file_id"), nil
	}
	cur, err := e.getFile(p, ref)
	if err != nil {
		return topics.Reply{}, err
	}
	st := cur.After
	if st.MerchantID != c.MerchantID {
		return refuse(CodeNotFound, "Payment file not found.", "file_id"), nil
	}
	if in.Nonce != "" && in.Nonce != st.Nonce {
		return refuse(CodeNonceMismatch, "The nonce does not match this file.", "nonce"), nil
	}
	if st.Status != payoutfile.StatusPreview {
		return refuse(CodeNotAwaitingApproval, "The file is not awaiting approval: its status is "+st.Status+".", "file_id"), nil
	}
	wref := p.wallets[st.WalletID]
	if wref == nil {
		found, err := storage.LoadWallets(ctx, e.db, st.MerchantID, []string{st.WalletID})
		if err != nil {
			return topics.Reply{}, err
		}
		s, ok := found[st.WalletID]
		if !ok {
			return topics.Reply{}, errors.New("engine: wallet of payment file " + st.FileID + " is gone")
		}
		wref = e.spawn(p, s)
	}
	return e.approveFile(ctx, p, b, c, ref, st, wref, nil)
}

// approveFile holds the file's money and queues its transactions. When the wallet
// cannot cover it, it refuses (insufficient_balance) and changes nothing: the
// file still awaits approval, nothing is held, no event or callback is queued, so
// the merchant can top the wallet up and approve again. The refusal's text derives
// from the wallet's state and the file only, so a re-applied command answers the
// same. created is the file's creation when initiation approves in the same
// command: it is recorded in the batch only once the approval goes ahead.
func (e *Engine) approveFile(ctx context.Context, p *partition, b *batch, c *topics.Command, ref *actorRef, st payoutfile.State, wref *actorRef, created *payoutfile.Response) (topics.Reply, error) {
	rejected, err := e.rejectedKeys(ctx, p, st)
	if err != nil {
		return topics.Reply{}, err
	}
	hold := payoutfile.HoldFor(st, rejected)
	var wbefore, wafter wallet.State
	if hold.Sign() > 0 {
		wr, err := e.ask(p, wref, func(corr uint64, reply chan<- wallet.Response) any {
			return wallet.Request{CorrID: corr, Reply: reply, Cmd: wallet.Hold{MerchantID: st.MerchantID, Amount: hold, At: b.at}}
		})
		if err != nil {
			return topics.Reply{}, err
		}
		var short wallet.InsufficientFundsError
		if errors.As(wr.Err, &short) {
			// The wallet refused the hold and did not change.
			after := "Nothing was held; the file still awaits approval."
			if created != nil {
				after = "Nothing was held and no file was created."
			}
			return refuse(CodeInsufficientBalance, fmt.Sprintf("Insufficient balance in wallet %s: available %s, the file needs %s "+
				"(amounts plus charges). %s", st.WalletID, short.Available, short.Requested, after), "wallet_id"), nil
		}
		if wr.Err != nil {
			return topics.Reply{}, fmt.Errorf("engine: hold for file %s: %w", st.FileID, wr.Err)
		}
		wbefore, wafter = wr.Before, wr.Result.State
	} else {
		wr, err := e.ask(p, wref, func(corr uint64, reply chan<- wallet.Response) any {
			return wallet.Get{CorrID: corr, Reply: reply}
		})
		if err != nil {
			return topics.Reply{}, err
		}
		wafter = wr.Result.State
	}
	resp, err := e.askFile(p, ref, payoutfile.Approve{Rejected: rejected, SubmitNow: st.Provider == payoutfile.ProviderP2P, At: b.at})
	if err == nil && resp.Err != nil {
		err = resp.Err
	}
	if err != nil {
		if hold.Sign() > 0 {
			if rerr := e.restore(p, wref, wbefore); rerr != nil {
				return topics.Reply{}, rerr
			}
		}
		return topics.Reply{}, err
	}
	if created != nil {
		b.touchPayout(created.Before, created.After, created.Delta.Changed)
	}
	if hold.Sign() > 0 {
		b.touch(wbefore, wafter)
	}
	f := resp.After
	// A transaction that now holds its idempotency key must have its row written with
	// claims_key in this batch, even if approval changed nothing else about it: once
	// the batch commits the in-memory key is dropped and the table alone answers for
	// it. Left unwritten, a second file with the same key approved before this one's
	// outcomes arrive would be paid too.
	written := slices.Clone(resp.Delta.Changed)
	for i, t := range f.Txns {
		if storage.ClaimsKey(f.Header, t) {
			k := f.MerchantID + "\x00" + t.IdempotencyKey
			p.payoutKeys[k] = t.TransactionID
			b.newKeys = append(b.newKeys, k)
			written = append(written, i)
		}
	}
	b.touchPayout(resp.Before, f, written)
	b.countPayouts(f.Provider, 0, len(rejected))
	e.queuePayouts(b, c, f, rejected)
	b.outbox = append(b.outbox, e.sendMoneyEvent(c, b.at, f))
	e.callback(b, c, f, resp.Delta.Changed)
	return fileReply(f, wafter.View()), nil
}

// rejectedKeys finds the transactions whose idempotency key is already held: by
// an earlier transaction of the file, by a transaction applied but not committed
// yet, or by a stored one.
func (e *Engine) rejectedKeys(ctx context.Context, p *partition, st payoutfile.State) (map[string]string, error) {
	rejected := map[string]string{}
	first := map[string]string{}
	var ask []string
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
		if holder, ok := p.payoutKeys[st.MerchantID+"\x00"+k]; ok {
			rejected[t.TransactionID] = "Duplicate idempotency_key: already used by transaction " + holder + "."
			continue
		}
		ask = append(ask, k)
	}
	if len(ask) == 0 {
		return rejected, nil
	}
	held, err := storage.ClaimedPayoutKeys(ctx, e.db, st.MerchantID, ask)
	if err != nil {
		return nil, err
	}
	for _, t := range st.Txns {
		if holder, ok := held[t.IdempotencyKey]; ok && t.IdempotencyKey != "" && rejected[t.TransactionID] == "" && holder != t.TransactionID {
			rejected[t.TransactionID] = "Duplicate idempotency_key: already used by transaction " + holder + "."
		}
	}
	return rejected, nil
}

// queuePayouts sends the payable transactions to their rail: rail requests of at
// most topics.PayoutChunk transactions, or, for P2P, one credit command per
// transaction keyed by the recipient merchant. All go through the outbox, in the
// batch's transaction, with ids derived from the command, so a re-applied command
// queues the same records.
func (e *Engine) queuePayouts(b *batch, c *topics.Command, f payoutfile.State, rejected map[string]string) {
	if f.Provider == payoutfile.ProviderP2P {
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
				Version: 1, MerchantID: t.RecipientMerchantID, IssuedAt: b.at, Environment: c.Environment, Payload: payload}
			body, err := topics.EncodeCommand(cmd)
			if err != nil {
				panic(err) // our own types only
			}
			b.outbox = append(b.outbox, storage.OutboxEvent{EventID: ids.DeriveUUID(c.ID, "p2p", t.TransactionID),
				Topic: topics.CommandsTopic, Key: t.RecipientMerchantID, MerchantID: f.MerchantID, Body: body})
		}
		return
	}
	var chunk []topics.PayoutRailTxn
	n := 0
	flush := func() {
		if len(chunk) == 0 {
			return
		}
		req := topics.PayoutRailRequest{FileID: f.FileID, MerchantID: f.MerchantID, Provider: f.Provider, Currency: f.Currency,
			Chunk: n, Transactions: chunk}
		b.outbox = append(b.outbox, storage.OutboxEvent{EventID: ids.DeriveUUID(c.ID, "payout-rail", fmt.Sprint(n)),
			Topic: topics.RailsPayoutTopic, Key: f.FileID, MerchantID: f.MerchantID, Body: mustJSON(req)})
		chunk = nil
		n++
	}
	for _, t := range f.Txns {
		if _, no := rejected[t.TransactionID]; no {
			continue
		}
		chunk = append(chunk, topics.PayoutRailTxn{TransactionID: t.TransactionID, Account: t.Account, Amount: t.Amount,
			Name: t.Name, IDNumber: t.IDNumber, Narrative: t.Narrative, AccountType: t.AccountType,
			AccountReference: t.AccountReference, BankCode: t.BankCode})
		if len(chunk) == topics.PayoutChunk {
			flush()
		}
	}
	flush()
}

// cancelPayout cancels a file awaiting approval; nothing was held, so no money moves.
func (e *Engine) cancelPayout(ctx context.Context, p *partition, b *batch, c *topics.Command, in topics.PayoutCancel) (topics.Reply, error) {
	ref := p.payouts[in.FileID]
	if ref == nil {
		return refuse(CodeNotFound, "Payment file not found.", "file_id"), nil
	}
	resp, err := e.askFile(p, ref, payoutfile.Cancel{At: b.at})
	if err != nil {
		return topics.Reply{}, err
	}
	if resp.Before.MerchantID != c.MerchantID {
		if rerr := e.restoreFile(p, ref, resp.Before); rerr != nil {
			return topics.Reply{}, rerr
		}
		return refuse(CodeNotFound, "Payment file not found.", "file_id"), nil
	}
	if resp.Err != nil {
		return refuse(CodeNotCancellable, "The file cannot be cancelled: its status is "+resp.Before.Status+
			"; only a file awaiting approval (PREVIEW-AND-APPROVE) can be.", "file_id"), nil
	}
	w, err := e.walletView(ctx, p, resp.After.MerchantID, resp.After.WalletID)
	if err != nil {
		return topics.Reply{}, err
	}
	b.touchPayout(resp.Before, resp.After, resp.Delta.Changed)
	b.outbox = append(b.outbox, e.sendMoneyEvent(c, b.at, resp.After))
	e.callback(b, c, resp.After, resp.Delta.Changed)
	return fileReply(resp.After, w), nil
}

// walletView reads a wallet's state through its actor.
func (e *Engine) walletView(ctx context.Context, p *partition, merchantID, walletID string) (wallet.View, error) {
	wref, err := e.walletRef(ctx, p, merchantID, walletID)
	if err != nil {
		return wallet.View{}, err
	}
	wr, err := e.ask(p, wref, func(corr uint64, reply chan<- wallet.Response) any {
		return wallet.Get{CorrID: corr, Reply: reply}
	})
	return wr.Result.State.View(), err
}

// walletRef returns the live actor of one of the merchant's wallets, hydrating it.
func (e *Engine) walletRef(ctx context.Context, p *partition, merchantID, walletID string) (*actorRef, error) {
	if ref := p.wallets[walletID]; ref != nil {
		return ref, nil
	}
	found, err := storage.LoadWallets(ctx, e.db, merchantID, []string{walletID})
	if err != nil {
		return nil, err
	}
	s, ok := found[walletID]
	if !ok {
		return nil, errors.New("engine: wallet " + walletID + " is gone")
	}
	return e.spawn(p, s), nil
}

// payoutResults applies a rail's outcomes: paid transactions leave the hold
// through the ledger, failed ones go back to the available balance, in the batch's
// transaction.
func (e *Engine) payoutResults(ctx context.Context, p *partition, b *batch, c *topics.Command, in topics.PayoutResults) (topics.Reply, error) {
	ref := p.payouts[in.FileID]
	if ref == nil || !ref.ownedBy(c.MerchantID) {
		return refuse(CodeNotFound, "Payment file not found.", "file_id"), nil
	}
	outs := make([]payoutfile.Outcome, len(in.Results))
	for i, r := range in.Results {
		outs[i] = payoutfile.Outcome{TransactionID: r.TransactionID, Success: r.Success, Description: r.Description,
			ProviderReference: r.ProviderReference, ProviderAccountName: r.ProviderAccountName}
	}
	resp, err := e.askFile(p, ref, payoutfile.Results{Final: in.Stage == topics.PayoutStageFinal, Outcomes: outs, At: b.at})
	if err != nil {
		return topics.Reply{}, err
	}
	if resp.Err != nil {
		return refuse(CodeInvalid, resp.Err.Error(), "file_id"), nil
	}
	f, d := resp.After, resp.Delta
	if len(d.Unsubmitted) > 0 {
		// Only a forged or misrouted result names a transaction no rail has yet.
		e.log.Warn("payout results for transactions never submitted: ignored", "file_id", in.FileID,
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
		return reply, nil
	}
	if len(d.Paid) > 0 || d.Release.Sign() > 0 {
		wref, err := e.walletRef(ctx, p, f.MerchantID, f.WalletID)
		if err != nil {
			return topics.Reply{}, err
		}
		if err := e.settlePayouts(p, b, c, wref, f, d); err != nil {
			if rerr := e.restoreFile(p, ref, resp.Before); rerr != nil {
				return topics.Reply{}, rerr
			}
			return topics.Reply{}, err
		}
	}
	b.touchPayout(resp.Before, f, d.Changed)
	if in.Stage == topics.PayoutStageFinal {
		b.countPayouts(f.Provider, len(d.Paid), len(d.Changed)-len(d.Paid))
	}
	if d.Moved {
		b.outbox = append(b.outbox, e.sendMoneyEvent(c, b.at, f))
	}
	e.callback(b, c, f, d.Changed)
	return reply, nil
}

// settlePayouts moves a result's money in the wallet: payments out of the hold
// (ledger entries), failures back to available. On error the wallet is restored.
func (e *Engine) settlePayouts(p *partition, b *batch, c *topics.Command, wref *actorRef, f payoutfile.State, d payoutfile.Delta) error {
	var before wallet.State
	var after wallet.State
	var entries []ledger.Entry
	step := func(cmd any) error {
		wr, err := e.ask(p, wref, func(corr uint64, reply chan<- wallet.Response) any {
			return wallet.Request{CorrID: corr, Reply: reply, Cmd: cmd}
		})
		if err != nil {
			return err
		}
		if before.Version == 0 {
			before = wr.Before
		}
		if wr.Err != nil {
			return fmt.Errorf("engine: payment file %s: %w", f.FileID, wr.Err)
		}
		after = wr.Result.State
		entries = append(entries, wr.Result.Entries...)
		return nil
	}
	fail := func(err error) error {
		if before.Version != 0 {
			if rerr := e.restore(p, wref, before); rerr != nil {
				return rerr
			}
		}
		return err
	}
	if len(d.Paid) > 0 {
		items := make([]wallet.Disbursement, len(d.Paid))
		for i, pd := range d.Paid {
			items[i] = wallet.Disbursement{TransactionID: pd.TransactionID, Amount: pd.Amount, Charge: pd.Charge,
				Narrative: "Payout " + f.Provider + " " + pd.Account + " file " + f.FileID}
		}
		if err := step(wallet.Disburse{MerchantID: f.MerchantID, Items: items, Clearing: clearingOf(f.Provider), At: b.at}); err != nil {
			return fail(err)
		}
	}
	if d.Release.Sign() > 0 {
		if err := step(wallet.Release{MerchantID: f.MerchantID, Amount: d.Release, At: b.at}); err != nil {
			return fail(err)
		}
	}
	if err := ledger.Balanced(entries); err != nil {
		return fail(err)
	}
	b.touch(before, after)
	b.addEntries(c.ID, entries)
	return nil
}

// p2pCredit credits a recipient's wallet with a P2P payout (in the recipient's
// partition) and sends the outcome back to the payer's file as a payout.results.
// A wallet that is not the recipient's, or of another currency, fails the payout
// without moving money.
func (e *Engine) p2pCredit(ctx context.Context, p *partition, b *batch, c *topics.Command, in topics.PayoutP2PCredit) (topics.Reply, error) {
	result := topics.PayoutTxnResult{TransactionID: in.TransactionID}
	// Money never crosses environments: a live file cannot pay a sandbox wallet
	// (whose balance is play money) nor the reverse. The API refuses such files;
	// this holds whatever produced the command. The wallet is then "not found",
	// as the other environment's wallets are to the API.
	sameEnv, err := e.sameEnvironment(ctx, in.PayerMerchantID, c.MerchantID)
	if err != nil {
		return topics.Reply{}, err
	}
	// A disabled recipient receives nothing: the payout fails and the payer's
	// hold is released (the guard let the command through for the payer, whose
	// money is already in motion).
	recipient, err := e.merchants.get(ctx, e, c.MerchantID)
	if err != nil {
		return topics.Reply{}, err
	}
	var wref *actorRef
	if in.WalletID != "" && sameEnv && recipient.enabled {
		var err error
		if wref = p.wallets[in.WalletID]; wref == nil {
			found, err2 := storage.LoadWallets(ctx, e.db, c.MerchantID, []string{in.WalletID})
			if err = err2; err == nil {
				if s, ok := found[in.WalletID]; ok {
					wref = e.spawn(p, s)
				}
			}
		}
		if err != nil {
			return topics.Reply{}, err
		}
	}
	// What the payer called the recipient: its descriptions never show the wallet
	// an email resolved to.
	named := in.Account
	if named == "" {
		named = in.WalletID
	}
	if wref == nil {
		result.Description = "Recipient " + named + " not found."
	} else {
		wr, err := e.ask(p, wref, func(corr uint64, reply chan<- wallet.Response) any {
			return wallet.Request{CorrID: corr, Reply: reply, Cmd: wallet.Collect{
				MerchantID: c.MerchantID, TransactionID: in.TransactionID, Value: in.Amount, Charges: money.Zero(), NetAmount: in.Amount,
				Clearing: ledger.P2PClearing, Narrative: "P2P payout from " + in.PayerMerchantID + " file " + in.FileID,
				TransType: wallet.TransTypeP2P, At: b.at,
			}}
		})
		if err != nil {
			return topics.Reply{}, err
		}
		switch {
		case wr.Err != nil:
			result.Description = "Recipient wallet cannot receive this payout."
		case wr.Result.State.Currency != in.Currency:
			if rerr := e.restore(p, wref, wr.Before); rerr != nil {
				return topics.Reply{}, rerr
			}
			result.Description = "Recipient " + named + " cannot receive " + in.Currency + "."
		default:
			if err := ledger.Balanced(wr.Result.Entries); err != nil {
				if rerr := e.restore(p, wref, wr.Before); rerr != nil {
					return topics.Reply{}, rerr
				}
				return topics.Reply{}, err
			}
			b.touch(wr.Before, wr.Result.State)
			b.addEntries(c.ID, wr.Result.Entries)
			result.Success, result.Description = true, "Credited to "+named+"."
			result.ProviderReference = ids.Derive(10, "p2p", in.FileID, in.TransactionID)
			result.ProviderAccountName = wr.Result.State.Label
		}
	}
	payload := mustJSON(topics.PayoutResults{FileID: in.FileID, MerchantID: in.PayerMerchantID, Stage: topics.PayoutStageFinal, Batch: "p2p-" + in.TransactionID,
		Results: []topics.PayoutTxnResult{result}})
	cmd := topics.Command{ID: topics.PayoutResultCommandID(in.FileID, topics.PayoutStageFinal, "p2p-"+in.TransactionID),
		Type: topics.CmdPayoutResults, Version: 1, MerchantID: in.PayerMerchantID, IssuedAt: b.at, Environment: c.Environment, Payload: payload}
	body, err := topics.EncodeCommand(cmd)
	if err != nil {
		return topics.Reply{}, err
	}
	b.outbox = append(b.outbox, storage.OutboxEvent{EventID: ids.DeriveUUID(c.ID, "p2p-result"), Topic: topics.CommandsTopic,
		Key: in.PayerMerchantID, MerchantID: c.MerchantID, Body: body})
	return topics.Reply{Result: mustJSON(result)}, nil
}

// sameEnvironment reports whether two merchants exist and share an environment.
func (e *Engine) sameEnvironment(ctx context.Context, a, b string) (bool, error) {
	ma, err := e.merchants.get(ctx, e, a)
	if err != nil || !ma.exists {
		return false, err
	}
	mb, err := e.merchants.get(ctx, e, b)
	if err != nil || !mb.exists {
		return false, err
	}
	return ma.environment == mb.environment, nil
}

func (e *Engine) sendMoneyEvent(c *topics.Command, at time.Time, f payoutfile.State) storage.OutboxEvent {
	opt := func(v string) *string {
		if v == "" {
			return nil
		}
		return &v
	}
	ev := topics.SendMoney{ID: f.FileID, FileID: f.FileID, TrackingID: f.TrackingID, State: topics.SendMoneyState(f.Status),
		Status: f.Status, StatusCode: f.StatusCode,
		Provider: f.Provider, Currency: f.Currency, TotalAmount: f.TotalAmount.String(), ChargeEstimate: f.ChargeEstimate.String(),
		PaidAmount: f.PaidAmount.String(), FailedAmount: f.FailedAmount.String(), ActualCharges: f.ActualCharges.String(),
		TransactionsCount: f.Count, BatchReference: opt(f.BatchReference), FailedReason: opt(f.FailedReason),
		CreatedAt: f.CreatedAt, UpdatedAt: f.UpdatedAt}
	// Keyed (and so ordered) by file. The id derives from the command and the file, so
	// each command reports a file once: an initiation without approval, which moves
	// the file twice, reports only where it ended (PROCESSING, or COMPLETE when every
	// transaction was refused).
	out := e.event(c, at, topics.SendMoneyEvent, f.FileID, ev)
	return out
}

// callback queues the merchant's callback_url notification of a change: the file
// header and the transactions changed (topics.CallbackTopic; the dispatcher role
// signs and delivers it).
func (e *Engine) callback(b *batch, c *topics.Command, f payoutfile.State, changed []int) {
	if f.CallbackURL == "" {
		return
	}
	sorted := append([]int(nil), changed...)
	sort.Ints(sorted)
	txns := make([]payoutfile.Txn, 0, len(sorted))
	for _, i := range sorted {
		txns = append(txns, f.Txns[i])
	}
	view := f.View(nil, txns)
	view.Nonce = "" // it signs the callback
	body := mustJSON(struct {
		Topic string              `json:"topic"`
		Data  payoutfile.FileView `json:"data"`
	}{topics.SendMoneyEvent, view})
	cb := topics.Callback{ID: ids.DeriveUUID(c.ID, "callback", f.FileID, fmt.Sprint(f.Version)), MerchantID: f.MerchantID,
		URL: f.CallbackURL, FileID: f.FileID, OccurredAt: b.at, Body: body}
	b.outbox = append(b.outbox, storage.OutboxEvent{EventID: cb.ID, Topic: topics.CallbackTopic, Key: f.FileID,
		MerchantID: f.MerchantID, Body: mustJSON(cb)})
}

// touchPayout records a file's new state and which of its transactions changed in
// the batch's payout writes, and notes a file that became final (its actor can go
// once the batch commits).
func (b *batch) touchPayout(before, after payoutfile.State, changed []int) {
	writes(b, storage.PayoutKind, storage.NewPayoutWrites).Touch(before, after, changed)
	if final := after.Status == payoutfile.StatusComplete || after.Status == payoutfile.StatusCancelled ||
		after.Status == payoutfile.StatusFailed; final && !slices.Contains(b.finished, after.FileID) {
		b.finished = append(b.finished, after.FileID)
	}
}
