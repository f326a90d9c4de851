package engine

import (
	"time"

	"context"
	"encoding/json"
	"errors"
	"fmt"

	"paysvc/actors/ids"
	"paysvc/actors/ledger"
	"paysvc/actors/wallet"
	"paysvc/storage"
	"paysvc/topics"
)

// Reply codes of wallet commands; the API maps each to an HTTP status.
const (
	CodeInvalid           = "invalid"
	CodeNotFound          = "not_found"
	CodeDestNotFound      = "destination_not_found"
	CodeInsufficientFunds = "insufficient_funds"
	CodeCurrencyMismatch  = "currency_mismatch"
	CodeSameWallet        = "same_wallet"
	CodeLabelTaken        = "label_taken"
	CodeUnknownCommand    = "unknown_command"
	CodeInternal          = "internal"
	CodeBalanceLimit      = "balance_limit"
)

// decodeBuiltin parses a built-in command's payload into its typed form; nil means
// the type is not built in or the payload malformed. Registered kinds' commands
// are decoded by Engine.decodePayload (aggregates.go).
func decodeBuiltin(c *topics.Command) any {
	var v any
	switch c.Type {
	case topics.CmdWalletCreate:
		v = &topics.WalletCreate{}
	case topics.CmdWalletDeposit:
		v = &topics.WalletDeposit{}
	case topics.CmdWalletTransfer:
		v = &topics.WalletTransferCmd{}
	case topics.CmdInvoiceSTKPush:
		v = &topics.InvoiceSTKPush{}
	case topics.CmdInvoiceProviderResult:
		v = &topics.ProviderResult{}
	case topics.CmdInvoiceClear:
		v = &topics.InvoiceClear{}
	case topics.CmdPayoutInitiate:
		v = &topics.PayoutInitiate{}
	case topics.CmdPayoutApprove:
		v = &topics.PayoutApprove{}
	case topics.CmdPayoutCancel:
		v = &topics.PayoutCancel{}
	case topics.CmdPayoutResults:
		v = &topics.PayoutResults{}
	case topics.CmdPayoutP2PCredit:
		v = &topics.PayoutP2PCredit{}
	default:
		return nil
	}
	if json.Unmarshal(c.Payload, v) != nil {
		return nil
	}
	return v
}

// walletIDs are the wallets a command touches, so the batch can hydrate them at once.
func walletIDs(payload any) []string {
	switch p := payload.(type) {
	case *topics.WalletCreate:
		return []string{p.WalletID}
	case *topics.WalletDeposit:
		return []string{p.WalletID}
	case *topics.WalletTransferCmd:
		return []string{p.From, p.To}
	case *topics.InvoiceSTKPush:
		if p.WalletID != "" {
			return []string{p.WalletID}
		}
	case *topics.PayoutInitiate:
		if p.WalletID != "" {
			return []string{p.WalletID}
		}
	case *topics.PayoutP2PCredit:
		return []string{p.WalletID}
	}
	return nil
}

func refuse(code, detail, attr string) topics.Reply {
	return topics.Reply{Error: &topics.ReplyError{Code: code, Detail: detail, Attr: attr}}
}

// apply runs one command. A domain refusal is a reply; an error fails the batch.
func (e *Engine) apply(ctx context.Context, p *partition, b *batch, c *topics.Command, payload any) (topics.Reply, error) {
	switch in := payload.(type) {
	case *topics.WalletCreate:
		return e.createWallet(ctx, p, b, c, *in)
	case *topics.WalletDeposit:
		return e.deposit(ctx, p, b, c, *in)
	case *topics.WalletTransferCmd:
		return e.transfer(ctx, p, b, c, *in)
	case *topics.InvoiceSTKPush:
		return e.stkPush(ctx, p, b, c, *in)
	case *topics.ProviderResult:
		return e.providerResult(ctx, p, b, c, *in)
	case *topics.InvoiceClear:
		return e.clearInvoice(ctx, p, b, c, *in)
	case *topics.PayoutInitiate:
		return e.initiatePayout(ctx, p, b, c, *in)
	case *topics.PayoutApprove:
		return e.approvePayout(ctx, p, b, c, *in)
	case *topics.PayoutCancel:
		return e.cancelPayout(ctx, p, b, c, *in)
	case *topics.PayoutResults:
		return e.payoutResults(ctx, p, b, c, *in)
	case *topics.PayoutP2PCredit:
		return e.p2pCredit(ctx, p, b, c, *in)
	}
	switch c.Type {
	case topics.CmdWalletCreate, topics.CmdWalletDeposit, topics.CmdWalletTransfer, topics.CmdInvoiceSTKPush, topics.CmdInvoiceProviderResult, topics.CmdInvoiceClear,
		topics.CmdPayoutInitiate, topics.CmdPayoutApprove, topics.CmdPayoutCancel, topics.CmdPayoutResults, topics.CmdPayoutP2PCredit:
		return refuse(CodeInvalid, "malformed "+c.Type+" payload", ""), nil
	}
	// Not built in: a registered aggregate's command, if any kind claims the type.
	if k := e.kinds.byCmd[c.Type]; k != nil {
		return e.applyRegistered(ctx, p, b, c, k, payload)
	}
	return refuse(CodeUnknownCommand, "unknown command type "+c.Type, ""), nil
}

func (e *Engine) createWallet(ctx context.Context, p *partition, b *batch, c *topics.Command, in topics.WalletCreate) (topics.Reply, error) {
	key := labelKey(c.MerchantID, in.Currency, in.Label)
	if b.newLabels[key] || p.inflightLabels[key] {
		return refuse(CodeLabelTaken, "A wallet with this label already exists for this currency.", "label"), nil
	}
	taken, err := storage.LabelTaken(ctx, e.db, c.MerchantID, in.Currency, in.Label)
	if err != nil {
		return topics.Reply{}, err
	}
	if taken {
		return refuse(CodeLabelTaken, "A wallet with this label already exists for this currency.", "label"), nil
	}
	// The id comes from the API; a clash with any merchant's wallet must be a
	// refusal here, not a primary-key failure that would stall the partition.
	if exists, err := storage.WalletIDTaken(ctx, e.db, in.WalletID); err != nil {
		return topics.Reply{}, err
	} else if exists && p.wallets[in.WalletID] == nil {
		return refuse(CodeInvalid, "Wallet id is already in use; retry the request.", "wallet_id"), nil
	}
	ref := p.wallets[in.WalletID]
	if ref == nil {
		ref = e.spawn(p, wallet.State{WalletID: in.WalletID})
	}
	resp, err := e.ask(p, ref, func(corr uint64, reply chan<- wallet.Response) any {
		return wallet.Request{CorrID: corr, Reply: reply, Cmd: wallet.Open{
			WalletID: in.WalletID, MerchantID: c.MerchantID, Currency: in.Currency, WalletType: in.WalletType,
			Label: in.Label, CanDisburse: in.CanDisburse, At: b.at,
		}}
	})
	if err != nil {
		return topics.Reply{}, err
	}
	if resp.Err != nil {
		return walletRefusal(resp.Err), nil
	}
	b.newLabels[key] = true
	b.touch(resp.Before, resp.Result.State)
	if err := e.ensureSettlement(ctx, p, b, c, in.Currency); err != nil {
		return topics.Reply{}, err
	}
	return topics.Reply{Result: mustJSON(resp.Result.State.View())}, nil
}

// SettlementLabel is the label of the service-made settlement wallet of a currency;
// merchants cannot use labels starting with SETTLEMENT.
func SettlementLabel(currency string) string { return "SETTLEMENT " + currency }

// ensureSettlement opens the merchant's settlement wallet of a currency, in the same
// batch, the first time the merchant needs one (the KES one exists from the start).
func (e *Engine) ensureSettlement(ctx context.Context, p *partition, b *batch, c *topics.Command, currency string) error {
	key := labelKey(c.MerchantID, currency, SettlementLabel(currency))
	if b.newLabels[key] || p.inflightLabels[key] {
		return nil
	}
	if _, err := storage.SettlementWallet(ctx, e.db, c.MerchantID, currency); err == nil {
		return nil
	} else if !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	id := ids.Derive(10, c.ID, "settlement", currency)
	ref := e.spawn(p, wallet.State{WalletID: id})
	resp, err := e.ask(p, ref, func(corr uint64, reply chan<- wallet.Response) any {
		return wallet.Request{CorrID: corr, Reply: reply, Cmd: wallet.Open{
			WalletID: id, MerchantID: c.MerchantID, Currency: currency, WalletType: wallet.TypeSettlement,
			Label: SettlementLabel(currency), CanDisburse: true, At: b.at,
		}}
	})
	if err != nil {
		return err
	}
	if resp.Err != nil {
		return fmt.Errorf("open %s settlement wallet: %w", currency, resp.Err)
	}
	b.newLabels[key] = true
	b.touch(resp.Before, resp.Result.State)
	return nil
}

// deposit credits a wallet from nowhere: a sandbox helper only. The API offers it
// only on a sandbox server, but a command log is shared by whatever produces to
// it, so the engine's guard refuses it for a live merchant (guard.go,
// SandboxOnly) before this runs: it would invent money.
func (e *Engine) deposit(ctx context.Context, p *partition, b *batch, c *topics.Command, in topics.WalletDeposit) (topics.Reply, error) {
	ref := p.wallets[in.WalletID]
	if ref == nil {
		return refuse(CodeNotFound, "Wallet not found.", "wallet_id"), nil
	}
	resp, err := e.ask(p, ref, func(corr uint64, reply chan<- wallet.Response) any {
		return wallet.Request{CorrID: corr, Reply: reply, Cmd: wallet.Deposit{
			MerchantID: c.MerchantID, TransactionID: ids.Derive(10, c.ID, "txn"), Amount: in.Amount,
			Narrative: in.Narrative, At: b.at,
		}}
	})
	if err != nil {
		return topics.Reply{}, err
	}
	if resp.Err != nil {
		return walletRefusal(resp.Err), nil
	}
	if err := ledger.Balanced(resp.Result.Entries); err != nil {
		if err := e.restore(p, ref, resp.Before); err != nil {
			return topics.Reply{}, err
		}
		e.log.ErrorContext(ctx, "unbalanced deposit refused", "command_id", c.ID, "err", err)
		return refuse(CodeInternal, "internal error", ""), nil
	}
	b.touch(resp.Before, resp.Result.State)
	b.addEntries(c.ID, resp.Result.Entries)
	return topics.Reply{Result: mustJSON(resp.Result.State.View())}, nil
}

func (e *Engine) transfer(ctx context.Context, p *partition, b *batch, c *topics.Command, in topics.WalletTransferCmd) (topics.Reply, error) {
	src, dst := p.wallets[in.From], p.wallets[in.To]
	if src == nil {
		return refuse(CodeNotFound, "Wallet not found.", "wallet_id"), nil
	}
	if dst == nil {
		return refuse(CodeDestNotFound, "Destination wallet not found.", "wallet_id"), nil
	}
	if in.From == in.To {
		return walletRefusal(wallet.ErrSameWallet), nil
	}
	// The source checks the destination before any money moves: only what never
	// changes once a wallet exists (walletIdentity).
	dstState, err := e.walletIdentity(p, dst)
	if err != nil {
		return topics.Reply{}, err
	}
	txn := ids.Derive(10, c.ID, "txn")
	out, err := e.ask(p, src, func(corr uint64, reply chan<- wallet.Response) any {
		return wallet.Request{CorrID: corr, Reply: reply, Cmd: wallet.TransferOut{
			MerchantID: c.MerchantID, TransactionID: txn, Amount: in.Amount, Narrative: in.Narrative,
			Destination: *dstState, At: b.at,
		}}
	})
	if err != nil {
		return topics.Reply{}, err
	}
	if out.Err != nil {
		return walletRefusal(out.Err), nil
	}
	inResp, err := e.ask(p, dst, func(corr uint64, reply chan<- wallet.Response) any {
		return wallet.Request{CorrID: corr, Reply: reply, Cmd: wallet.TransferIn{
			MerchantID: c.MerchantID, TransactionID: txn, Amount: in.Amount, Narrative: in.Narrative,
			Origin: in.From, Currency: out.Result.State.Currency, At: b.at,
		}}
	})
	if err != nil {
		return topics.Reply{}, err
	}
	if inResp.Err != nil {
		// The destination refused after the source moved: give the source its state back.
		if err := e.restore(p, src, out.Before); err != nil {
			return topics.Reply{}, err
		}
		if errors.Is(inResp.Err, wallet.ErrNotFound) {
			return walletRefusal(wallet.ErrNoDestination), nil
		}
		return walletRefusal(inResp.Err), nil
	}
	entries := append(append([]ledger.Entry{}, out.Result.Entries...), inResp.Result.Entries...)
	if err := ledger.Balanced(entries); err != nil {
		e.log.ErrorContext(ctx, "unbalanced transfer refused", "command_id", c.ID, "err", err)
		if err := e.restore(p, src, out.Before); err != nil {
			return topics.Reply{}, err
		}
		if err := e.restore(p, dst, inResp.Before); err != nil {
			return topics.Reply{}, err
		}
		return refuse(CodeInternal, "internal error", ""), nil
	}
	origin, dest := out.Result.State, inResp.Result.State
	b.touch(out.Before, origin)
	b.touch(inResp.Before, dest)
	b.addEntries(c.ID, entries)
	amount := in.Amount.String()
	ev := topics.WalletTransfer{
		ID: txn, FromCurrency: origin.Currency, ToCurrency: dest.Currency, AmountSent: amount, AmountReceived: amount,
		ExchangeRate: "1.00", Status: "COMPLETE", OriginWallet: origin.WalletID, DestinationWallet: dest.WalletID,
		Narrative: in.Narrative, CreatedAt: b.at,
	}
	b.outbox = append(b.outbox, e.event(c, b.at, topics.WalletTransferEvent, origin.WalletID, ev))
	return topics.Reply{Result: mustJSON(wallet.TransferResult{Origin: origin.View(), Destination: dest.View()})}, nil
}

// walletIdentity is a wallet's state for the checks that use only what never
// changes once a wallet exists: that it exists, its id, merchant and currency. Its
// balances may be stale. The actor is asked once it exists and not again (the
// answer is kept on its reference, and goes with it): one actor round trip of
// three per transfer, one of five per STK collection (docs/benchmarks.md). A
// wallet that does not exist yet is asked every time.
func (e *Engine) walletIdentity(p *partition, ref *actorRef) (*wallet.State, error) {
	if ref.existing != nil {
		ref.lastUsed = time.Now() // used, as an ask would have marked it (passivate)
		return ref.existing, nil
	}
	r, err := e.ask(p, ref, func(corr uint64, reply chan<- wallet.Response) any {
		return wallet.Get{CorrID: corr, Reply: reply}
	})
	if err != nil {
		return nil, err
	}
	s := r.Result.State
	if s.Exists() {
		ref.existing = &s
	}
	return &s, nil
}

func (e *Engine) restore(p *partition, ref *actorRef, s wallet.State) error {
	_, err := e.ask(p, ref, func(corr uint64, reply chan<- wallet.Response) any {
		return wallet.Restore{CorrID: corr, State: s, Reply: reply}
	})
	return err
}

// event builds an outbox record whose body is the exact envelope to publish.
func (e *Engine) event(c *topics.Command, at time.Time, webhookTopic, key string, payload any) storage.OutboxEvent {
	ev := eventEnvelope{
		ID: ids.DeriveUUID(c.ID, webhookTopic, key), Type: webhookTopic, Version: 1, OccurredAt: at,
		MerchantID: c.MerchantID, Key: key, Payload: payload,
	}
	return storage.OutboxEvent{EventID: ev.ID, Topic: topics.EventTopics[webhookTopic], Key: key, MerchantID: c.MerchantID, Body: mustJSON(ev)}
}

// eventEnvelope is topics.Event with the payload as a value, so the event is
// encoded in one pass: a json.RawMessage payload is encoded first and then
// scanned again (validated and compacted) inside the envelope, which measured
// ~1% of the service's CPU under transfer load (docs/benchmarks.md).
// The bytes are the same as topics.Event's (same fields, tags and order;
// TestEventEnvelopeMatchesTopicsEvent).
type eventEnvelope struct {
	ID         string    `json:"id"`
	Type       string    `json:"type"`
	Version    int       `json:"version"`
	OccurredAt time.Time `json:"occurred_at"`
	MerchantID string    `json:"merchant_id"`
	Key        string    `json:"key"`
	Payload    any       `json:"payload"`
}

// walletRefusal maps an Apply error to a reply.
func walletRefusal(err error) topics.Reply {
	var insufficient wallet.InsufficientFundsError
	switch {
	case errors.As(err, &insufficient):
		return refuse(CodeInsufficientFunds, "Insufficient balance: the available balance "+insufficient.Available.String()+
			" is below the requested amount "+insufficient.Requested.String()+".", "amount")
	case errors.Is(err, wallet.ErrNoDestination):
		return refuse(CodeDestNotFound, "Destination wallet not found.", "wallet_id")
	case errors.Is(err, wallet.ErrNotFound):
		return refuse(CodeNotFound, "Wallet not found.", "wallet_id")
	case errors.Is(err, wallet.ErrCurrencyMismatch):
		return refuse(CodeCurrencyMismatch, "Wallets must have the same currency.", "wallet_id")
	case errors.Is(err, wallet.ErrSameWallet):
		return refuse(CodeSameWallet, "Origin and destination wallets must differ.", "wallet_id")
	case errors.Is(err, wallet.ErrInvalidAmount):
		return refuse(CodeInvalid, "Amount must be greater than 0 and at most 999999.00.", "amount")
	case errors.Is(err, wallet.ErrExists):
		return refuse(CodeInvalid, "Wallet already exists.", "wallet_id")
	case errors.Is(err, wallet.ErrBalanceLimit):
		return refuse(CodeBalanceLimit, "The wallet's balance would exceed its maximum of "+wallet.MaxBalance.String()+".", "amount")
	case errors.Is(err, wallet.ErrInvalidWallet):
		return refuse(CodeInvalid, "Invalid wallet definition.", "")
	default:
		return refuse(CodeInternal, "internal error", "")
	}
}
