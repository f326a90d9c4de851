package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"paysvc/actors/aggregates/payout"
	"paysvc/actors/aggregates/payout/payoutstore"
	"paysvc/actors/aggregates/tariff"
	"paysvc/actors/aggregates/wallet"
	"paysvc/actors/aggregates/wallet/walletstore"
	"paysvc/actors/outbound/webhooks"
	payoutrail "paysvc/actors/rails/payout"
	"paysvc/actors/values/ids"
	"paysvc/actors/values/money"
	"paysvc/api/edge"
	"paysvc/storage"
	"paysvc/topics"
)

// MaxFileTransactions is the most transactions one payment file may carry.
const MaxFileTransactions = 10_000

// payoutLimits are the per-transaction amount limits of each provider (in the
// file's currency; every provider but P2P pays KES). docs/payouts.md lists them.
var payoutLimits = map[string][2]money.Amount{
	payout.ProviderB2C:      {money.MustParse("10"), money.MustParse("150000")},
	payout.ProviderB2B:      {money.MustParse("10"), money.MustParse("999999")},
	payout.ProviderPesalink: {money.MustParse("10"), money.MustParse("999999")},
	payout.ProviderAirtime:  {money.MustParse("10"), money.MustParse("10000")},
	payout.ProviderRTGS:     {money.MustParse("1"), money.MustParse("100000000")},
	payout.ProviderP2P:      {money.MustParse("0.01"), money.MustParse("999999")},
}

var (
	trackingPattern = regexp.MustCompile(`^[0-9a-fA-F-]{36}$`)
	fileIDPattern   = regexp.MustCompile(`^[A-Z0-9-]{1,40}$`)
	textPattern     = regexp.MustCompile(`^[^\x00-\x1f\x7f]*$`)
)

// providerOf reads and normalises the provider (INTASEND is the SDKs' name for P2P).
func providerOf(b edge.Body) (string, error) {
	p, err := b.Str("provider", true, 20, nil)
	if err != nil {
		return "", err
	}
	if p, ok := canonicalProvider(p); ok {
		return p, nil
	}
	return "", errUnknownProvider
}

var errUnknownProvider = edge.Invalid("provider", "provider must be one of MPESA-B2C, MPESA-B2B, PESALINK, P2P (or INTASEND), AIRTIME, RTGS.")

// canonicalProvider is the provider's stored name (INTASEND is stored as P2P), and
// whether it is a payout provider at all.
func canonicalProvider(p string) (string, bool) {
	p = strings.ToUpper(p)
	if p == "INTASEND" {
		p = payout.ProviderP2P
	}
	return p, slices.Contains(payout.Providers, p)
}

// initiatePayoutFile creates a payment file: POST /send-money/initiation/ answers
// 201 and /send-money/initiate 200 (the spec's two spellings of the operation).
func (s *Server) initiatePayoutFile(status int) echo.HandlerFunc {
	return func(c echo.Context) error {
		in, err := s.readPaymentFile(c)
		if err != nil {
			return err
		}
		// The file's and its transactions' ids are the payout tables' primary
		// keys: drawn here, again for each draw the engine finds taken.
		var r topics.Reply
		err = s.freshIDs(c, func() error {
			in.FileID = s.newID()
			for i := range in.Transactions {
				in.Transactions[i].TransactionID = s.newID()
			}
			var err error
			r, err = s.issue(c, topics.CmdPayoutInitiate, in)
			return takenAsError(r, err)
		})
		if err != nil {
			return err
		}
		if r.Error == nil && in.CallbackURL != "" {
			if r.Result, err = s.withCallbackSecret(c.Request().Context(), r.Result); err != nil {
				return err
			}
		}
		return s.walletReply(c, r, status)
	}
}

// withCallbackSecret adds callback_secret to a new file's answer: the key that signs
// its callbacks (webhooks.CallbackSecret), shown only here, once, to the merchant who
// created the file. It derives from the file id the answer names (a replayed answer
// names the file first created, and gets the same secret).
func (s *Server) withCallbackSecret(ctx context.Context, result json.RawMessage) (json.RawMessage, error) {
	var f struct {
		FileID string `json:"file_id"`
	}
	if err := json.Unmarshal(result, &f); err != nil || f.FileID == "" {
		return nil, fmt.Errorf("payout initiation answer without a file id: %v", err)
	}
	key, err := storage.ServiceSecret(ctx, s.db, webhooks.CallbackSecretName)
	if err != nil {
		return nil, err
	}
	// Appended to the object as it is, so the answer keeps its field order.
	obj := bytes.TrimRight(result, " \t\r\n")
	secret, err := json.Marshal(webhooks.CallbackSecret(key, f.FileID))
	if err != nil || len(obj) < 2 || obj[len(obj)-1] != '}' {
		return nil, fmt.Errorf("payout initiation answer is not a JSON object: %v", err)
	}
	out := append(bytes.Clone(obj[:len(obj)-1]), `,"callback_secret":`...)
	return append(append(out, secret...), '}'), nil
}

// readPaymentFile validates a payment file; the payout aggregate prices its
// transactions when it opens the file. Every refusal names its field
// (transactions[i].field for a transaction's).
func (s *Server) readPaymentFile(c echo.Context) (topics.PayoutInitiate, error) {
	var in topics.PayoutInitiate
	b, err := edge.ReadBody(c)
	if err != nil {
		return in, err
	}
	if in.Currency, err = b.Str("currency", true, 3, nil); err != nil {
		return in, err
	}
	if !wallet.Currencies[in.Currency] {
		return in, edge.Invalid("currency", "currency must be one of KES, USD, EUR, GBP.")
	}
	if in.Provider, err = providerOf(b); err != nil {
		return in, err
	}
	if in.Provider != payout.ProviderP2P && in.Currency != "KES" {
		return in, edge.Invalid("currency", in.Provider+" pays out in KES only; only P2P files can be in "+in.Currency+".")
	}
	approval, err := b.Str("requires_approval", false, 3, nil)
	if err != nil {
		return in, err
	}
	switch strings.ToUpper(approval) {
	case "", "YES":
		in.RequiresApproval = true
	case "NO":
	default:
		return in, edge.Invalid("requires_approval", `requires_approval must be "YES" or "NO".`)
	}
	if in.WalletID, err = b.Str("wallet_id", false, 40, walletIDPattern); err != nil {
		return in, err
	}
	if in.BatchReference, err = b.Str("batch_reference", false, 70, textPattern); err != nil {
		return in, err
	}
	if in.DeviceID, err = b.Str("device_id", false, 100, textPattern); err != nil {
		return in, err
	}
	if in.CallbackURL, err = b.Str("callback_url", false, 400, nil); err != nil {
		return in, err
	}
	if in.CallbackURL != "" {
		u, perr := url.Parse(in.CallbackURL)
		secure := perr == nil && u.Scheme == "https"
		plainOK := perr == nil && u.Scheme == "http" && s.cfg.Environment == "sandbox"
		if perr != nil || u.Host == "" || !(secure || plainOK) {
			return in, edge.Invalid("callback_url", "callback_url must be an absolute HTTPS URL.")
		}
	}
	raw, ok := b["transactions"]
	if !ok || string(raw) == "null" {
		return in, edge.Invalid("transactions", "This field is required.")
	}
	var txns []json.RawMessage
	if err := json.Unmarshal(raw, &txns); err != nil {
		return in, edge.Invalid("transactions", "transactions must be an array of transactions.")
	}
	if len(txns) == 0 {
		return in, edge.Invalid("transactions", "A payment file needs at least one transaction.")
	}
	if len(txns) > MaxFileTransactions {
		return in, edge.Invalid("transactions", fmt.Sprintf("A payment file carries at most %d transactions; split it.", MaxFileTransactions))
	}
	in.TrackingID, in.Nonce = ids.UUID(), strings.ToLower(ids.Alias(8)) // the ids: drawIDs
	in.Transactions = make([]topics.PayoutTxnIn, len(txns))
	recipients := map[string]storage.Recipient{} // P2P wallets seen in this file
	for i, rawTxn := range txns {
		t, err := s.readPayoutTxn(c, in, rawTxn, recipients)
		if err != nil {
			var e *edge.Error
			if errors.As(err, &e) {
				at := fmt.Sprintf("transactions[%d]", i)
				if e.Attr != "" {
					at += "." + e.Attr
				}
				return in, &edge.Error{Status: e.Status, Type: e.Type, Code: e.Code, Detail: at + ": " + e.Detail, Attr: at}
			}
			return in, err
		}
		in.Transactions[i] = t
	}
	return in, nil
}

func (s *Server) readPayoutTxn(c echo.Context, f topics.PayoutInitiate, raw json.RawMessage, recipients map[string]storage.Recipient) (topics.PayoutTxnIn, error) {
	var t topics.PayoutTxnIn
	var tb edge.Body
	if err := json.Unmarshal(raw, &tb); err != nil || tb == nil {
		return t, edge.Invalid("", "Each transaction must be a JSON object.")
	}
	var err error
	if t.Account, err = tb.Text("account", true, 64, textPattern); err != nil {
		return t, err
	}
	t.Account = strings.TrimSpace(t.Account)
	amount, _, err := tb.Amount("amount", true)
	if err != nil {
		return t, err
	}
	lim := payoutLimits[f.Provider]
	if amount.Cmp(lim[0]) < 0 || amount.Cmp(lim[1]) > 0 {
		return t, edge.Invalid("amount", fmt.Sprintf("%s amounts must be between %s and %s.", f.Provider, lim[0], lim[1]))
	}
	if f.Provider == payout.ProviderB2C || f.Provider == payout.ProviderB2B || f.Provider == payout.ProviderAirtime {
		if !tariff.RoundUpShillings(amount).Equal(amount) {
			return t, edge.Invalid("amount", "M-Pesa and airtime amounts are whole shillings.")
		}
	}
	t.Amount = amount
	fields := []struct {
		name string
		dst  *string
		max  int
	}{
		{"name", &t.Name, 100}, {"id_number", &t.IDNumber, 30}, {"category_name", &t.CategoryName, 60},
		{"narrative", &t.Narrative, 100}, {"account_type", &t.AccountType, 20}, {"account_reference", &t.AccountReference, 40},
		{"bank_code", &t.BankCode, 10}, {"idempotency_key", &t.IdempotencyKey, 255},
	}
	for _, fl := range fields {
		if *fl.dst, err = tb.Text(fl.name, false, fl.max, textPattern); err != nil {
			return t, err
		}
	}
	switch f.Provider {
	case payout.ProviderP2P:
		key := f.Currency + "\x00" + t.Account
		rec, seen := recipients[key]
		if !seen {
			var err error
			if rec, err = s.p2pRecipient(c.Request().Context(), t.Account, f.Currency); err != nil {
				return t, err
			}
			recipients[key] = rec
		}
		if rec.Currency != f.Currency {
			return t, edge.Invalid("account", "Wallet "+t.Account+" holds "+rec.Currency+"; this file pays "+f.Currency+".")
		}
		// Without wallet_id the file pays from the merchant's settlement wallet of its
		// currency, so that wallet is the payer too.
		paysItself := rec.WalletID == f.WalletID ||
			(f.WalletID == "" && rec.MerchantID == edge.PrincipalOf(c).MerchantID && rec.WalletType == "SETTLEMENT")
		if paysItself {
			return t, edge.Invalid("account", "A P2P payout cannot go to the wallet that pays it.")
		}
		t.RecipientMerchantID = rec.MerchantID
		if rec.WalletID != t.Account {
			t.RecipientWalletID = rec.WalletID
		}
	case payout.ProviderPesalink, payout.ProviderRTGS:
		// Bank codes are numbers: "2" and "02" name the same bank. The file keeps
		// and shows the published form (bank-codes/ke), whatever the client wrote.
		if t.BankCode == "" {
			return t, edge.Invalid("bank_code", "bank_code is required for every "+f.Provider+" transaction.")
		}
		if !bankCodePattern.MatchString(t.BankCode) {
			return t, edge.Invalid("bank_code", fmt.Sprintf("bank_code must be a bank's numeric code (digits only, at most %d) from GET /api/v1/send-money/bank-codes/ke/.",
				payoutrail.MaxBankCodeDigits))
		}
		bank, ok := payoutrail.BankByCode(t.BankCode)
		if !ok {
			return t, edge.Invalid("bank_code", "bank_code "+t.BankCode+" is not a known Kenyan bank code; see GET /api/v1/send-money/bank-codes/ke/.")
		}
		t.BankCode = bank.BankCode
		if err := validAccount(f.Provider, t); err != nil {
			return t, err
		}
	default:
		if f.Provider == payout.ProviderB2B && t.AccountType == "" {
			return t, edge.Invalid("account_type", "account_type is required for MPESA-B2B: PayBill or TillNumber.")
		}
		if f.Provider == payout.ProviderB2B && t.AccountType == "PayBill" && t.AccountReference == "" {
			return t, edge.Invalid("account_reference", "account_reference is required for PayBill payments.")
		}
		if err := validAccount(f.Provider, t); err != nil {
			return t, err
		}
	}
	t.RequestReferenceID = ids.UUID()
	return t, nil
}

// validAccount is the rail's format check of a transaction's account, as a 400
// naming the field.
func validAccount(provider string, t topics.PayoutTxnIn) error {
	if err := payoutrail.ValidAccount(provider, t.Account, t.AccountType, t.BankCode); err != nil {
		var ae *payoutrail.AccountError
		if errors.As(err, &ae) {
			return edge.Invalid(ae.Field, ae.Message)
		}
		return edge.Invalid("account", "The account is not valid for "+provider+".")
	}
	return nil
}

var (
	bankCodePattern = regexp.MustCompile(`^[0-9]+$`)
	// p2pEmailPattern and p2pPhonePattern tell what a P2P account that is no
	// wallet id was meant to be (docs/payouts.md, "P2P recipients").
	p2pEmailPattern = regexp.MustCompile(`^[^@\s]+@[^@\s]+\.[^@\s]+$`)
	p2pPhonePattern = regexp.MustCompile(`^\+?[0-9]{9,15}$`)
)

// p2pRecipient resolves a P2P account: a wallet id of this environment (any
// merchant's), else the email of one merchant of this environment (its settlement
// wallet of currency). A phone number names no wallet here. Every refusal is a
// 400 on account that says no more than a payout to it would: not found, unknown
// email, an email two merchants share and a merchant without a wallet in the
// currency all read alike.
func (s *Server) p2pRecipient(ctx context.Context, account, currency string) (storage.Recipient, error) {
	rec, err := storage.WalletRecipient(ctx, s.db, account, s.cfg.Environment)
	if !errors.Is(err, storage.ErrNotFound) {
		return rec, err
	}
	switch {
	case p2pEmailPattern.MatchString(account):
		rec, err = storage.EmailRecipient(ctx, s.db, account, currency, s.cfg.Environment)
		if errors.Is(err, storage.ErrNotFound) {
			return rec, edge.Invalid("account", "No merchant of this service receives "+currency+" P2P payouts at "+account+".")
		}
		return rec, err
	case p2pPhonePattern.MatchString(account):
		return rec, edge.Invalid("account", "A P2P (INTASEND) payout goes to a wallet of this service, named by its wallet id or by "+
			"its merchant's email; a phone number names no wallet here. To pay a phone number, use MPESA-B2C.")
	}
	return rec, edge.Invalid("account", "No wallet "+account+" exists to receive this P2P payoutrail.")
}

// fileRef reads the file of an approve/cancel/status body: file_id or tracking_id,
// checked against the merchant's files (another merchant's is 404).
func (s *Server) fileRef(c echo.Context, b edge.Body, fileRequired bool) (string, error) {
	fileID, err := b.Str("file_id", false, 40, nil)
	if err != nil {
		return "", err
	}
	tracking := ""
	if !fileRequired {
		if tracking, err = b.Str("tracking_id", false, 36, nil); err != nil {
			return "", err
		}
	}
	if fileID == "" && tracking == "" {
		if fileRequired {
			return "", edge.Invalid("file_id", "This field is required.")
		}
		return "", edge.Invalid("tracking_id", "tracking_id (or file_id) is required.")
	}
	if (fileID != "" && !fileIDPattern.MatchString(fileID)) || (tracking != "" && !trackingPattern.MatchString(tracking)) {
		return "", edge.NotFound("Payment file not found.")
	}
	id, err := storage.PayoutFileID(c.Request().Context(), s.db, edge.PrincipalOf(c).MerchantID, fileID, tracking)
	if errors.Is(err, storage.ErrNotFound) {
		return "", edge.NotFound("Payment file not found.")
	}
	return id, err
}

// fileRequest is the common start of approve, cancel and status: the body and the
// merchant's file it names (the key's permission is checked with the route).
func (s *Server) fileRequest(c echo.Context, fileRequired bool) (edge.Body, string, error) {
	b, err := edge.ReadBody(c)
	if err != nil {
		return nil, "", err
	}
	id, err := s.fileRef(c, b, fileRequired)
	return b, id, err
}

// approvePayoutFile approves a file (docs/compat.md: by tracking_id or file_id, nonce
// checked when given, other fields ignored: SDKs post the whole initiation reply).
func (s *Server) approvePayoutFile(c echo.Context) error {
	b, id, err := s.fileRequest(c, false)
	if err != nil {
		return err
	}
	nonce, err := b.Str("nonce", false, 64, nil)
	if err != nil {
		return err
	}
	r, err := s.issue(c, topics.CmdPayoutApprove, topics.PayoutApprove{FileID: id, Nonce: nonce})
	if err != nil {
		return err
	}
	return s.walletReply(c, r, http.StatusOK)
}

// cancelPayoutFile cancels a file awaiting approval.
func (s *Server) cancelPayoutFile(c echo.Context) error {
	_, id, err := s.fileRequest(c, true)
	if err != nil {
		return err
	}
	r, err := s.issue(c, topics.CmdPayoutCancel, topics.PayoutCancel{FileID: id})
	if err != nil {
		return err
	}
	return s.walletReply(c, r, http.StatusOK)
}

// payoutStatus returns the whole file, read from its stored snapshot.
func (s *Server) payoutStatus(c echo.Context) error {
	_, id, err := s.fileRequest(c, false)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	merchant := edge.PrincipalOf(c).MerchantID
	f, err := payoutstore.Get(ctx, s.db, merchant, id)
	if err != nil {
		return err
	}
	w, err := walletstore.Get(ctx, s.db, merchant, f.WalletID)
	if err != nil {
		return err
	}
	v := w.View()
	return c.JSON(http.StatusOK, f.View(&v, nil))
}

// validateAccount answers synchronously from the rail (the sandbox simulator) on
// a sandbox server, and with a format check only on a live one; P2P destinations
// are wallets of this service and of its environment, checked here.
func (s *Server) validateAccount(c echo.Context) error {
	b, err := edge.ReadBody(c)
	if err != nil {
		return err
	}
	provider, err := providerOf(b)
	if err != nil {
		return err
	}
	account, err := b.Text("account", true, 64, textPattern)
	if err != nil {
		return err
	}
	accountType, err := b.Str("account_type", false, 20, nil)
	if err != nil {
		return err
	}
	bankCode, err := b.Text("bank_code", false, 10, nil)
	if err != nil {
		return err
	}
	switch {
	case provider == payout.ProviderB2B && accountType == "":
		return edge.Invalid("account_type", "account_type is required for MPESA-B2B: PayBill or TillNumber.")
	case (provider == payout.ProviderPesalink || provider == payout.ProviderRTGS) && bankCode == "":
		return edge.Invalid("bank_code", "bank_code is required for bank accounts.")
	}
	if provider == payout.ProviderP2P {
		// Resolved as a payout resolves it; an email names a settlement wallet of
		// currency (KES unless given).
		currency, err := b.Str("currency", false, 3, nil)
		if err != nil {
			return err
		}
		if currency == "" {
			currency = "KES"
		}
		if !wallet.Currencies[currency] {
			return edge.Invalid("currency", "currency must be one of KES, USD, EUR, GBP.")
		}
		v := payoutrail.Validation{Account: account, Status: payoutrail.StatusSuccess}
		rec, err := s.p2pRecipient(c.Request().Context(), account, currency)
		var refused *edge.Error
		switch {
		case errors.As(err, &refused):
			v.Status, v.Description = payoutrail.StatusInvalidAccount, refused.Detail
		case err != nil:
			return err
		default:
			v.Name = rec.MerchantName
		}
		return c.JSON(http.StatusOK, v)
	}
	if s.cfg.Environment != "sandbox" {
		// The rails' lookup is the sandbox simulator's: its names are made up and
		// every well-formed account "exists". A live server has no provider lookup
		// yet, so it checks what it can (the format) and says that the rest was
		// not checked, never a made-up SUCCESS (docs/payouts.md).
		v := payoutrail.Validation{Account: account, Status: StatusValidationUnavailable,
			Description: "Account lookup is not available for " + provider + " on this server; the account is well formed. The payout's result reports whether the provider accepts it."}
		if err := payoutrail.ValidAccount(provider, account, accountType, bankCode); err != nil {
			var ae *payoutrail.AccountError
			if !errors.As(err, &ae) {
				return err
			}
			v.Status, v.Description = ae.Status, ae.Message
		}
		return c.JSON(http.StatusOK, v)
	}
	return c.JSON(http.StatusOK, payoutrail.Validate(provider, account, accountType, bankCode))
}

// StatusValidationUnavailable is validate-account's status on a live server for a
// well-formed account of a provider it cannot look accounts up with.
const StatusValidationUnavailable = "VALIDATION_UNAVAILABLE"

// bankCodes is public: the list changes, so clients fetch it.
func (s *Server) bankCodes(c echo.Context) error {
	return c.JSON(http.StatusOK, payoutrail.Banks())
}

type beneficiaryJSON struct {
	ID               string `json:"id"`
	Name             string `json:"name"`
	Account          string `json:"account"`
	Provider         string `json:"provider"`
	AccountReference string `json:"account_reference"`
	BankCode         string `json:"bank_code,omitempty"`
	IsActive         bool   `json:"is_active"`
}

// beneficiaries lists the recipients of the merchant's completed payouts.
func (s *Server) beneficiaries(c echo.Context) error {
	provider := c.QueryParam("provider")
	if provider != "" {
		var ok bool
		if provider, ok = canonicalProvider(provider); !ok {
			return errUnknownProvider
		}
	}
	rows, err := storage.FrequentBeneficiaries(c.Request().Context(), s.db, edge.PrincipalOf(c).MerchantID, provider, 50)
	if err != nil {
		return err
	}
	out := make([]beneficiaryJSON, len(rows))
	for i, r := range rows {
		sum := sha256.Sum256([]byte(r.Provider + "\x00" + r.Account + "\x00" + r.AccountReference + "\x00" + r.BankCode))
		out[i] = beneficiaryJSON{ID: hex.EncodeToString(sum[:8]), Name: r.Name, Account: r.Account, Provider: r.Provider,
			AccountReference: r.AccountReference, BankCode: r.BankCode, IsActive: true}
	}
	return c.JSON(http.StatusOK, out)
}
