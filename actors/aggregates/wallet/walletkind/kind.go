// Package walletkind registers the wallet aggregate (actors/aggregates/wallet) with the engine
// (docs/adr/0007-one-aggregate-contract.md): its commands (open, sandbox deposit,
// transfer), hydration by id and by key (a label, a currency's settlement wallet),
// and the typed-array commit of the core. Every other kind moves money by asking
// these actors: refund, subscription and payment file through the engine's Tx
// money API, invoice through Wallets (the typed handle) directly.
package walletkind

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/jmoiron/sqlx"

	"paysvc/actors/aggregates/wallet"
	"paysvc/actors/aggregates/wallet/walletstore"
	"paysvc/actors/engine"
	"paysvc/actors/values/ids"
	"paysvc/storage"
	"paysvc/topics"
)

// Name is the wallets' kind.
const Name = storage.WalletKind

// LabelKey is the index key of a wallet's label in its currency (labels are
// unique per merchant and currency, case-insensitively).
func LabelKey(currency, label string) string {
	return "label\x00" + currency + "\x00" + strings.ToLower(label)
}

// SettlementKey is the index key of the merchant's settlement wallet of a currency.
func SettlementKey(currency string) string { return "settlement\x00" + currency }

// SettlementLabel is the label of the service-made settlement wallet of a currency;
// merchants cannot use labels starting with SETTLEMENT.
func SettlementLabel(currency string) string { return "SETTLEMENT " + currency }

// Wallets is the wallet kind as commands use it through a Tx.
const Wallets = engine.Of[wallet.State](Name)

// Kind is the wallet aggregate's registration.
func Kind() engine.Kind {
	return engine.Define[wallet.State](aggregate{},
		engine.On[wallet.State](topics.CmdWalletCreate, engine.Guard{},
			func(p *topics.WalletCreate) []string { return []string{p.WalletID} }, create,
			engine.Needs(needs), engine.Prepare(prepare)),
		// A deposit invents money: sandbox only (docs/security.md).
		engine.On[wallet.State](topics.CmdWalletDeposit,
			engine.Guard{SandboxOnly: true, SandboxDetail: "Deposits exist only in the sandbox; this merchant is live."},
			func(p *topics.WalletDeposit) []string { return []string{p.WalletID} }, deposit),
		engine.On[wallet.State](topics.CmdWalletTransfer, engine.Guard{},
			func(p *topics.WalletTransferCmd) []string { return []string{p.From, p.To} }, transfer),
	)
}

// aggregate is the wallet's definition: hosted (its pure Step), loaded by id,
// by merchant and by key, written by the core's typed arrays.
type aggregate struct{}

func (aggregate) Name() string                         { return Name }
func (aggregate) New(id string) wallet.State           { return wallet.State{WalletID: id} }
func (aggregate) Rows() engine.TypedRows[wallet.State] { return rows{storage.NewWalletWrites()} }

func (aggregate) Step(s wallet.State, msg any) (wallet.State, any, error) { return wallet.Step(s, msg) }

// needs: opening a wallet checks its label and opens the currency's settlement
// wallet if the merchant has none.
func needs(p *topics.WalletCreate) []engine.Ref {
	return []engine.Ref{{Kind: Name, Key: LabelKey(p.Currency, p.Label)}, {Kind: Name, Key: SettlementKey(p.Currency)}}
}

func (aggregate) Index(s wallet.State) []string {
	if !s.Exists() {
		return nil
	}
	if s.WalletType == wallet.TypeSettlement {
		return []string{LabelKey(s.Currency, s.Label), SettlementKey(s.Currency)}
	}
	return []string{LabelKey(s.Currency, s.Label)}
}

func stored(s wallet.State) engine.Stored[wallet.State] {
	return engine.Stored[wallet.State]{ID: s.WalletID, Version: s.Version, State: s}
}

func (aggregate) LoadOwned(ctx context.Context, q sqlx.QueryerContext, want storage.Owned) (map[string]engine.Stored[wallet.State], error) {
	found, err := walletstore.LoadOwned(ctx, q, want)
	if err != nil {
		return nil, err
	}
	out := make(map[string]engine.Stored[wallet.State], len(found))
	for _, s := range found {
		out[engine.InstanceKey(s.MerchantID, s.WalletID)] = stored(s)
	}
	return out, nil
}

func (aggregate) Load(ctx context.Context, q sqlx.QueryerContext, merchantID string, idList []string) ([]engine.Stored[wallet.State], error) {
	found, err := walletstore.Load(ctx, q, merchantID, idList)
	if err != nil {
		return nil, err
	}
	out := make([]engine.Stored[wallet.State], 0, len(found))
	for _, s := range found {
		out = append(out, stored(s))
	}
	return out, nil
}

func (aggregate) LoadKeys(ctx context.Context, q sqlx.QueryerContext, merchantID string, keys []string) ([]engine.Stored[wallet.State], error) {
	var out []engine.Stored[wallet.State]
	for _, k := range keys {
		parts := strings.SplitN(k, "\x00", 3)
		var s wallet.State
		var err error
		switch {
		case parts[0] == "settlement" && len(parts) == 2:
			s, err = walletstore.Settlement(ctx, q, merchantID, parts[1])
		case parts[0] == "label" && len(parts) == 3:
			s, err = walletstore.ByLabel(ctx, q, merchantID, parts[1], parts[2])
		default:
			return nil, fmt.Errorf("wallet key %q", k)
		}
		if errors.Is(err, storage.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, stored(s))
	}
	return out, nil
}

// idTakenFact: the id of a wallet to open is used by some merchant's wallet.
const idTakenFact = "id-taken"

// prepare reads whether the id of a wallet to open is taken by any merchant's:
// the id comes from the API, and a clash must be a refusal, not a primary-key
// failure that would stall the partition.
func prepare(ctx context.Context, q sqlx.QueryerContext, _ engine.Finder, _ *topics.Command, p *topics.WalletCreate) (map[string]any, error) {
	taken, err := storage.WalletIDTaken(ctx, q, p.WalletID)
	if err != nil {
		return nil, err
	}
	return map[string]any{idTakenFact + "\x00" + p.WalletID: taken}, nil
}

// rows writes wallets as the core's typed arrays (docs/adr/0003-generic-batch-commit.md).
type rows struct{ w *storage.WalletWrites }

func (r rows) Touch(_, _ string, before, after engine.Stored[wallet.State], _ []any) error {
	walletstore.Touch(r.w, before.State, after.State)
	return nil
}

func (r rows) Writes() storage.AggregateRows { return r.w }

// Refusal is the reply to a wallet's refusal.
func Refusal(err error) topics.Reply { return engine.Refuse(wallet.Refusal(err)) }

func create(tx *engine.Tx, c *topics.Command, in *topics.WalletCreate) (topics.Reply, error) {
	if _, taken := tx.Lookup(Name, LabelKey(in.Currency, in.Label)); taken {
		return engine.Refuse(wallet.CodeLabelTaken, "A wallet with this label already exists for this currency.", "label"), nil
	}
	if taken, _ := tx.Fact(idTakenFact + "\x00" + in.WalletID); taken == true && !tx.Live(Name, in.WalletID) {
		return engine.Refuse(engine.CodeIDTaken, "Wallet id is already in use; retry the request.", ""), nil
	}
	r, err := Wallets.Create(tx, in.WalletID, wallet.Open{
		WalletID: in.WalletID, MerchantID: c.MerchantID, Currency: in.Currency, WalletType: in.WalletType,
		Label: in.Label, CanDisburse: in.CanDisburse, At: tx.At(),
	})
	if err != nil {
		return topics.Reply{}, err
	}
	if errors.Is(r.Err, wallet.ErrExists) {
		// Another command of this batch opened the id first (any merchant's: the
		// engine names a partition's actors by id).
		return engine.Refuse(engine.CodeIDTaken, "Wallet id is already in use; retry the request.", ""), nil
	}
	if r.Err != nil {
		return Refusal(r.Err), nil
	}
	if err := ensureSettlement(tx, c, in.Currency); err != nil {
		return topics.Reply{}, err
	}
	return topics.Reply{Result: mustJSON(r.After.View())}, nil
}

// ensureSettlement opens the merchant's settlement wallet of a currency, in the same
// command, the first time the merchant needs one (the KES one exists from the start).
func ensureSettlement(tx *engine.Tx, c *topics.Command, currency string) error {
	if _, ok := tx.Lookup(Name, SettlementKey(currency)); ok {
		return nil
	}
	id := ids.Derive(12, c.ID, "settlement", currency) // 60 bits, as drawn ids (api.IDLength)
	r, err := Wallets.Create(tx, id, wallet.Open{
		WalletID: id, MerchantID: c.MerchantID, Currency: currency, WalletType: wallet.TypeSettlement,
		Label: SettlementLabel(currency), CanDisburse: true, At: tx.At(),
	})
	if err != nil {
		return err
	}
	if r.Err != nil {
		return fmt.Errorf("open %s settlement wallet: %w", currency, r.Err)
	}
	return nil
}

// deposit credits a wallet from nowhere: a sandbox helper only. The API offers it
// only on a sandbox server, but a command log is shared by whatever produces to
// it, so the engine's guard refuses it for a live merchant before this runs: it
// would invent money.
func deposit(tx *engine.Tx, c *topics.Command, in *topics.WalletDeposit) (topics.Reply, error) {
	r, err := Wallets.Ask(tx, in.WalletID, wallet.Deposit{
		MerchantID: c.MerchantID, TransactionID: ids.Derive(10, c.ID, "txn"), Amount: in.Amount,
		Narrative: in.Narrative, At: tx.At(),
	})
	if errors.Is(err, engine.ErrNotFound) {
		return engine.Refuse(engine.CodeNotFound, "Wallet not found.", "wallet_id"), nil
	}
	if err != nil {
		return topics.Reply{}, err
	}
	if r.Err != nil {
		return Refusal(r.Err), nil
	}
	return topics.Reply{Result: mustJSON(r.After.View())}, nil
}

// transfer moves money between two of the merchant's wallets: both or neither
// (a refusal of the credit puts the debit back: Tx).
func transfer(tx *engine.Tx, c *topics.Command, in *topics.WalletTransferCmd) (topics.Reply, error) {
	_, ok := Wallets.Find(tx, in.From)
	if !ok {
		return engine.Refuse(engine.CodeNotFound, "Wallet not found.", "wallet_id"), nil
	}
	dst, ok := Wallets.Find(tx, in.To)
	if !ok {
		return engine.Refuse(wallet.CodeDestNotFound, "Destination wallet not found.", "wallet_id"), nil
	}
	if in.From == in.To {
		return Refusal(wallet.ErrSameWallet), nil
	}
	// The source checks the destination before any money moves.
	txn := ids.Derive(10, c.ID, "txn")
	out, err := Wallets.Ask(tx, in.From, wallet.TransferOut{
		MerchantID: c.MerchantID, TransactionID: txn, Amount: in.Amount, Narrative: in.Narrative,
		Destination: dst, At: tx.At(),
	})
	if err != nil {
		return topics.Reply{}, err
	}
	if out.Err != nil {
		return Refusal(out.Err), nil
	}
	origin := out.After
	inr, err := Wallets.Ask(tx, in.To, wallet.TransferIn{
		MerchantID: c.MerchantID, TransactionID: txn, Amount: in.Amount, Narrative: in.Narrative,
		Origin: in.From, Currency: origin.Currency, At: tx.At(),
	})
	if err != nil {
		return topics.Reply{}, err
	}
	if inr.Err != nil {
		// The destination refused after the source moved: the refusal puts the
		// source back.
		if errors.Is(inr.Err, wallet.ErrNotFound) {
			return Refusal(wallet.ErrNoDestination), nil
		}
		return Refusal(inr.Err), nil
	}
	dest := inr.After
	amount := in.Amount.String()
	tx.Event(topics.WalletTransferEvent, origin.WalletID, topics.WalletTransfer{
		ID: txn, FromCurrency: origin.Currency, ToCurrency: dest.Currency, AmountSent: amount, AmountReceived: amount,
		ExchangeRate: "1.00", Status: "COMPLETE", OriginWallet: origin.WalletID, DestinationWallet: dest.WalletID,
		Narrative: in.Narrative, CreatedAt: tx.At(),
	})
	return topics.Reply{Result: mustJSON(wallet.TransferResult{Origin: origin.View(), Destination: dest.View()})}, nil
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("walletkind: marshal %T: %v", v, err)) // only our own types reach here
	}
	return b
}
