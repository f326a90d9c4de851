package engine

import (
	"context"
	"errors"
	"strconv"
	"time"

	"paysvc/actors/ids"
	"paysvc/actors/invoice"
	"paysvc/actors/ledger"
	"paysvc/actors/wallet"
	"paysvc/storage"
	"paysvc/topics"
)

// Reply codes of collection commands.
const (
	CodeWalletNotKES = "wallet_not_kes"
)

// StageSent is the provider-result stage that records the rail's reference for a
// prompt without a state change. The rails role now sends ACCEPTED when Daraja takes
// a prompt (PENDING -> PROCESSING, as in the sandbox); SENT is still applied for
// commands produced before that change.
const StageSent = "SENT"

// StageUnknown is the provider-result stage of a prompt whose fate the rail could
// not learn (a timeout after the request was written, an unreadable answer): the
// invoice waits in PROCESSING for its callback or status query.
const StageUnknown = "UNKNOWN"

// StageAccepted (the prompt reached the payer) and StageFinal (the payment's
// outcome) are the rails' other stages (mpesa.StageAccepted, mpesa.StageFinal).
const (
	StageAccepted = "ACCEPTED"
	StageFinal    = "FINAL"
)

// invoiceIDs are the invoices a command touches, for hydration.
func invoiceIDs(payload any) []string {
	switch p := payload.(type) {
	case *topics.InvoiceSTKPush:
		return []string{p.InvoiceID}
	case *topics.ProviderResult:
		return []string{p.InvoiceID}
	case *topics.InvoiceClear:
		return []string{p.InvoiceID}
	}
	return nil
}

// isCard reports whether a live invoice actor holds a card invoice (known without a
// round trip: the provider is fixed at creation and kept on the ref).
func isCard(ref *actorRef) bool { return ref.provider == "CARD" }

// clearInvoice makes a completed card collection's funds available.
func (e *Engine) clearInvoice(ctx context.Context, p *partition, b *batch, c *topics.Command, in topics.InvoiceClear) (topics.Reply, error) {
	ref := p.invoices[in.InvoiceID]
	if ref == nil || !ref.ownedBy(c.MerchantID) {
		return refuse(CodeNotFound, "Invoice not found.", "invoice_id"), nil
	}
	resp, err := e.askInvoice(p, ref, func(corr uint64, reply chan<- invoice.Response) any {
		return invoice.Request{CorrID: corr, Reply: reply, Cmd: invoice.Clear{At: b.at}}
	})
	if err != nil {
		return topics.Reply{}, err
	}
	if errors.Is(resp.Err, invoice.ErrDuplicate) {
		return topics.Reply{Result: mustJSON(resp.After)}, nil
	}
	if resp.Err != nil {
		return refuse(CodeInvalid, resp.Err.Error(), ""), nil
	}
	inv := resp.After
	wref := p.wallets[inv.WalletID]
	if wref == nil {
		found, err := storage.LoadWallets(ctx, e.db, inv.MerchantID, []string{inv.WalletID})
		if err != nil {
			return topics.Reply{}, err
		}
		s, ok := found[inv.WalletID]
		if !ok {
			return topics.Reply{}, errors.New("engine: wallet of invoice " + inv.InvoiceID + " is gone")
		}
		wref = e.spawn(p, s)
	}
	wresp, err := e.ask(p, wref, func(corr uint64, reply chan<- wallet.Response) any {
		return wallet.Request{CorrID: corr, Reply: reply, Cmd: wallet.Release{MerchantID: inv.MerchantID, Amount: inv.NetAmount, At: b.at}}
	})
	if err != nil {
		return topics.Reply{}, err
	}
	if wresp.Err != nil {
		if rerr := e.restoreInvoice(p, ref, resp.Before); rerr != nil {
			return topics.Reply{}, rerr
		}
		return topics.Reply{}, wresp.Err
	}
	b.touch(wresp.Before, wresp.Result.State)
	b.touchInvoice(resp.Before, inv)
	return topics.Reply{Result: mustJSON(inv)}, nil
}

// stkPush opens a PENDING invoice, and in the same transaction queues the prompt for
// the rails role and emits the collection_event.
func (e *Engine) stkPush(ctx context.Context, p *partition, b *batch, c *topics.Command, in topics.InvoiceSTKPush) (topics.Reply, error) {
	if p.invoices[in.InvoiceID] != nil {
		return refuse(CodeInvalid, "Invoice id is already in use; retry the request.", ""), nil
	}
	target, err := e.receivingWallet(ctx, p, c, in.WalletID)
	if err != nil || target == nil {
		if target == nil && err == nil {
			return refuse(CodeNotFound, "Wallet not found.", "wallet_id"), nil
		}
		return topics.Reply{}, err
	}
	tw, err := e.walletIdentity(p, target)
	if err != nil {
		return topics.Reply{}, err
	}
	if tw.MerchantID != c.MerchantID || !tw.Exists() {
		return refuse(CodeNotFound, "Wallet not found.", "wallet_id"), nil
	}
	if tw.Currency != "KES" {
		return refuse(CodeWalletNotKES, "M-Pesa collections settle in KES: wallet_id must be a KES wallet.", "wallet_id"), nil
	}
	provider := "M-PESA"
	if in.Provider == "CARD" || in.Provider == "PESALINK" {
		provider = in.Provider
	}
	ref := e.spawnInvoice(p, invoice.State{InvoiceID: in.InvoiceID}, c.MerchantID)
	resp, err := e.askInvoice(p, ref, func(corr uint64, reply chan<- invoice.Response) any {
		return invoice.Request{CorrID: corr, Reply: reply, Cmd: invoice.Create{
			InvoiceID: in.InvoiceID, MerchantID: c.MerchantID, WalletID: tw.WalletID, Provider: provider,
			Currency: "KES", Tariff: in.Tariff, Value: in.Value, Charges: in.Charges, NetAmount: in.NetAmount,
			Account: in.Phone, APIRef: in.APIRef, CheckoutID: in.CheckoutID, Email: in.Email,
			CardLast4: in.CardLast4, CardNetwork: in.CardNetwork, Customer: invoice.Customer(in.Customer), Host: in.Host,
			Narrative: in.Narrative, PaymentLinkID: in.PaymentLinkID, At: b.at,
		}}
	})
	if err != nil {
		return topics.Reply{}, err
	}
	if resp.Err != nil {
		return refuse(CodeInvalid, "Invalid invoice: "+resp.Err.Error(), ""), nil
	}
	ref.provider = provider
	b.touchInvoice(resp.Before, resp.After)
	b.outbox = append(b.outbox, e.collectionEvent(c, b.at, resp.After))
	if provider == "CARD" || provider == "PESALINK" {
		topic := topics.RailsCardTopic
		if provider == "PESALINK" {
			topic = topics.RailsPesalinkTopic
		}
		req := topics.CardRequest{InvoiceID: in.InvoiceID, MerchantID: c.MerchantID, Amount: in.Value, Currency: "KES",
			Last4: in.CardLast4, Network: in.CardNetwork, TestOutcome: in.TestOutcome}
		b.outbox = append(b.outbox, storage.OutboxEvent{EventID: ids.DeriveUUID(c.ID, "rail"), Topic: topic,
			Key: c.MerchantID, MerchantID: c.MerchantID, Body: mustJSON(req)})
	} else {
		req := topics.STKRequest{InvoiceID: in.InvoiceID, MerchantID: c.MerchantID, Phone: in.Phone, Amount: in.Value, AccountRef: in.APIRef}
		b.outbox = append(b.outbox, storage.OutboxEvent{EventID: ids.DeriveUUID(c.ID, "stk"), Topic: topics.RailsMpesaSTKTopic,
			Key: c.MerchantID, MerchantID: c.MerchantID, Body: mustJSON(req)})
	}
	return topics.Reply{Result: mustJSON(resp.After)}, nil
}

// receivingWallet is the named wallet, or the merchant's KES settlement wallet.
func (e *Engine) receivingWallet(ctx context.Context, p *partition, c *topics.Command, walletID string) (*actorRef, error) {
	if walletID != "" {
		return p.wallets[walletID], nil
	}
	return e.settlementWallet(ctx, p, c.MerchantID, "KES")
}

// settlementWallet is the merchant's settlement wallet of currency (nil if none).
func (e *Engine) settlementWallet(ctx context.Context, p *partition, merchantID, currency string) (*actorRef, error) {
	key := merchantID + "/" + currency
	if id, ok := p.settlements[key]; ok {
		if ref := p.wallets[id]; ref != nil {
			return ref, nil
		}
	}
	s, err := storage.SettlementWallet(ctx, e.db, merchantID, currency)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	p.settlements[key] = s.WalletID
	if ref := p.wallets[s.WalletID]; ref != nil {
		return ref, nil
	}
	return e.spawn(p, s), nil
}

// providerResult applies a rail's outcome. Completion credits the receiving wallet
// in the same batch; a repeated or late outcome changes nothing.
func (e *Engine) providerResult(ctx context.Context, p *partition, b *batch, c *topics.Command, in topics.ProviderResult) (topics.Reply, error) {
	ref := p.invoices[in.InvoiceID]
	if ref == nil || !ref.ownedBy(c.MerchantID) {
		return refuse(CodeNotFound, "Invoice not found.", "invoice_id"), nil
	}
	var cmd any
	switch {
	case in.Stage != StageFinal && in.Stage != StageSent && in.Stage != StageUnknown && in.Stage != StageAccepted:
		// Only a FINAL outcome settles or fails an invoice: a missing or unknown
		// stage is never read as one (fail closed).
		return refuse(CodeInvalid, "Unknown outcome stage.", "stage"), nil
	case in.Stage == StageSent:
		cmd = invoice.Sent{CheckoutRequestID: in.CheckoutRequestID, At: b.at}
	case in.Stage == StageUnknown:
		cmd = invoice.Unknown{CheckoutRequestID: in.CheckoutRequestID, Reason: in.Description, At: b.at}
	case in.Stage == StageAccepted:
		cmd = invoice.Accept{CheckoutRequestID: in.CheckoutRequestID, At: b.at}
	case in.Code == 0:
		// M-Pesa funds clear at once; card funds when the acquirer settles (invoice.clear).
		// The paid amount, when the provider reports one, is checked by Apply.
		cmd = invoice.Settle{Receipt: in.Receipt, CheckoutRequestID: in.CheckoutRequestID, Cleared: !isCard(ref),
			Paid: in.PaidAmount, At: b.at}
	default:
		cmd = invoice.Fail{Code: strconv.Itoa(in.Code), Reason: in.Description, CheckoutRequestID: in.CheckoutRequestID, At: b.at}
	}
	resp, err := e.askInvoice(p, ref, func(corr uint64, reply chan<- invoice.Response) any {
		return invoice.Request{CorrID: corr, Reply: reply, Cmd: cmd}
	})
	if err != nil {
		return topics.Reply{}, err
	}
	if errors.Is(resp.Err, invoice.ErrDuplicate) || errors.Is(resp.Err, invoice.ErrHeld) {
		return resultAck(resp.After), nil
	}
	if resp.Err != nil {
		if _, success := cmd.(invoice.Settle); success && resp.Before.State == invoice.StateFailed {
			// The rail says the payer paid an invoice the service had failed: the
			// money may be with the merchant's paybill and not in any wallet. It
			// is refused (a final state does not move), but never silently.
			b.after = append(b.after, contradictedOutcomes.Inc)
			e.log.ErrorContext(ctx, "payment reported for a FAILED collection: refused, needs an operator",
				"invoice_id", resp.Before.InvoiceID, "merchant_id", resp.Before.MerchantID, "receipt", in.Receipt,
				"command_id", c.ID)
		}
		return refuse(CodeInvalid, resp.Err.Error(), ""), nil
	}
	inv := resp.After
	if inv.Held && !resp.Before.Held {
		// Not credited: the amount M-Pesa reports differs from what was asked
		// (docs/security.md). The API counted the callback; this is the decision.
		e.log.ErrorContext(ctx, "collection held: paid amount differs from the invoice; nothing credited",
			"invoice_id", inv.InvoiceID, "merchant_id", inv.MerchantID, "value", inv.Value.String(),
			"paid", inv.PaidAmount.String(), "receipt", inv.MpesaReference)
	}
	if in.Stage == StageSent || resp.Before.State == inv.State {
		b.touchInvoice(resp.Before, inv) // no state change (a reference, a hold): no collection_event
		return resultAck(inv), nil
	}
	if inv.State == invoice.StateComplete {
		if err := e.creditCollection(ctx, p, b, c, inv); err != nil {
			if rerr := e.restoreInvoice(p, ref, resp.Before); rerr != nil {
				return topics.Reply{}, rerr
			}
			if errors.Is(err, wallet.ErrBalanceLimit) {
				// Retrying cannot make it fit: a refusal, not a failed batch. The invoice
				// keeps its previous state for an operator (docs/api-decisions.md).
				e.log.ErrorContext(ctx, "collection refused: receiving wallet at its maximum balance", "invoice_id", inv.InvoiceID, "wallet_id", inv.WalletID)
				return walletRefusal(err), nil
			}
			return topics.Reply{}, err
		}
	}
	b.touchInvoice(resp.Before, inv)
	b.outbox = append(b.outbox, e.collectionEvent(c, b.at, inv))
	return resultAck(inv), nil
}

// resultAck answers a provider result with the invoice's id, state and version,
// not the whole invoice. Nobody waits for that answer (a rail's result carries no
// reply-to); it is stored only so that a repeated result is recognised and
// answered alike. The whole invoice, in two of a collection's three replies, was
// ~1 kB of what each collection's commits sent and stored (docs/benchmarks.md).
func resultAck(inv invoice.State) topics.Reply {
	return topics.Reply{Result: mustJSON(struct {
		InvoiceID string `json:"invoice_id"`
		State     string `json:"state"`
		Version   int64  `json:"version"`
	}{inv.InvoiceID, inv.State, inv.Version})}
}

// creditCollection moves a completed invoice's money into its wallet.
func (e *Engine) creditCollection(ctx context.Context, p *partition, b *batch, c *topics.Command, inv invoice.State) error {
	ref := p.wallets[inv.WalletID]
	if ref == nil {
		found, err := storage.LoadWallets(ctx, e.db, inv.MerchantID, []string{inv.WalletID})
		if err != nil {
			return err
		}
		s, ok := found[inv.WalletID]
		if !ok {
			return errors.New("engine: receiving wallet of invoice " + inv.InvoiceID + " is gone")
		}
		ref = e.spawn(p, s)
	}
	resp, err := e.ask(p, ref, func(corr uint64, reply chan<- wallet.Response) any {
		clearing, narrative := ledger.MpesaClearing, "M-Pesa payment "+inv.MpesaReference+" "+inv.APIRef
		switch inv.Provider {
		case "CARD":
			clearing, narrative = ledger.CardClearing, "Card payment "+inv.CardNetwork+" "+inv.CardLast4+" "+inv.APIRef
		case "PESALINK":
			clearing, narrative = ledger.PesalinkClearing, "PesaLink payment "+inv.MpesaReference+" "+inv.APIRef
		}
		return wallet.Request{CorrID: corr, Reply: reply, Cmd: wallet.Collect{
			MerchantID: inv.MerchantID, TransactionID: ids.Derive(10, inv.InvoiceID, "collect"), Value: inv.Value,
			Charges: inv.Charges, NetAmount: inv.NetAmount, Clearing: clearing, Narrative: narrative,
			Uncleared: !inv.Cleared, At: b.at,
		}}
	})
	if err != nil {
		return err
	}
	if resp.Err != nil {
		return resp.Err
	}
	if err := ledger.Balanced(resp.Result.Entries); err != nil {
		if rerr := e.restore(p, ref, resp.Before); rerr != nil {
			return rerr
		}
		return err
	}
	b.touch(resp.Before, resp.Result.State)
	b.addEntries(c.ID, resp.Result.Entries)
	return nil
}

func (e *Engine) restoreInvoice(p *partition, ref *actorRef, s invoice.State) error {
	_, err := e.askInvoice(p, ref, func(corr uint64, reply chan<- invoice.Response) any {
		return invoice.Restore{CorrID: corr, State: s, Reply: reply}
	})
	return err
}

func (e *Engine) collectionEvent(c *topics.Command, at time.Time, s invoice.State) storage.OutboxEvent {
	opt := func(v string) *string {
		if v == "" {
			return nil
		}
		return &v
	}
	ev := topics.Collection{ID: s.InvoiceID, InvoiceID: s.InvoiceID, State: s.State, Provider: topics.CollectionProvider(s.Provider),
		Value: s.Value.String(), Charges: s.Charges.String(), NetAmount: s.NetAmount.String(), Currency: s.Currency,
		Account: opt(s.Account), APIRef: s.APIRef, MpesaReference: opt(s.MpesaReference), FailedReason: opt(s.FailedReason),
		FailedCode: opt(s.FailedCode), CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
	return e.event(c, at, topics.CollectionEvent, s.InvoiceID, ev)
}

// touchInvoice records an invoice's new state in the batch's invoice writes.
func (b *batch) touchInvoice(before, after invoice.State) {
	writes(b, storage.InvoiceKind, storage.NewInvoiceWrites).Touch(before, after)
	b.countCollection(before, after)
	if after.State != before.State && (after.State == invoice.StateComplete || after.State == invoice.StateFailed) {
		b.final = append(b.final, after.InvoiceID)
	}
}
