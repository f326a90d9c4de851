package api

import (
	"errors"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/labstack/echo/v4"

	"paysvc/actors/aggregates/wallet"
	"paysvc/actors/aggregates/wallet/walletstore"
	"paysvc/actors/values/money"
	"paysvc/api/edge"
	"paysvc/storage"
	"paysvc/topics"
)

var (
	labelPattern     = regexp.MustCompile(`^[a-zA-Z0-9\-_ ]+$`)
	walletIDPattern  = regexp.MustCompile(`^[a-zA-Z0-9\-_ ]{1,40}$`)
	narrativePattern = regexp.MustCompile(`^[\p{L}\p{N} .,\-_'/&()#:;!?@+%]+$`)
	maxDeposit       = money.MustParse("10000000.00")
)

func (s *Server) listWallets(c echo.Context) error {
	return listOwn(s, c, walletstore.List, wallet.State.View)
}

// pathWallet reads the path wallet id and the merchant's wallet with it: another
// merchant's wallet is 404 exactly like a wallet that does not exist.
func (s *Server) pathWallet(c echo.Context) (wallet.State, error) {
	id := c.Param("wallet_id")
	if !walletIDPattern.MatchString(id) {
		return wallet.State{}, edge.NotFound("Wallet not found.")
	}
	w, err := walletstore.Get(c.Request().Context(), s.db, edge.PrincipalOf(c).MerchantID, id)
	if errors.Is(err, storage.ErrNotFound) {
		return w, edge.NotFound("Wallet not found.")
	}
	return w, err
}

func (s *Server) getWallet(c echo.Context) error {
	w, err := s.pathWallet(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, w.View())
}

type statementJSON struct {
	TransactionID  string       `json:"transaction_id"`
	Currency       string       `json:"currency"`
	Value          money.Amount `json:"value"`
	RunningBalance money.Amount `json:"running_balance"`
	Narrative      string       `json:"narrative"`
	TransType      string       `json:"trans_type"`
	Status         string       `json:"status"`
	CreatedAt      time.Time    `json:"created_at"`
	UpdatedAt      time.Time    `json:"updated_at"`
}

func (s *Server) walletTransactions(c echo.Context) error {
	w, err := s.pathWallet(c)
	if err != nil {
		return err
	}
	pg, err := pageOf(c)
	if err != nil {
		return err
	}
	rows, total, err := listed(c.Request().Context(), s.db, func(q sqlx.QueryerContext) ([]storage.StatementRow, int, error) {
		return storage.Statement(c.Request().Context(), q, edge.PrincipalOf(c).MerchantID, w.WalletID, pg.size, pg.offset())
	})
	if err != nil {
		return err
	}
	out := make([]statementJSON, len(rows))
	for i, r := range rows {
		out[i] = statementJSON{TransactionID: r.TransactionID, Currency: r.Currency, Value: r.Value,
			RunningBalance: r.RunningBalance, Narrative: r.Narrative, TransType: r.TransType, Status: "AVAILABLE",
			CreatedAt: r.CreatedAt, UpdatedAt: r.CreatedAt}
	}
	return c.JSON(http.StatusOK, pg.list(c, total, out))
}

func (s *Server) createWallet(c echo.Context) error {
	b, err := edge.ReadBody(c)
	if err != nil {
		return err
	}
	currency, err := b.Str("currency", true, 3, nil)
	if err != nil {
		return err
	}
	if !wallet.Currencies[currency] {
		return edge.Invalid("currency", "Currency must be one of KES, USD, EUR, GBP.")
	}
	typ, err := b.Str("wallet_type", false, 20, nil)
	if err != nil {
		return err
	}
	switch typ {
	case "", wallet.TypeWorking:
		typ = wallet.TypeWorking
	case wallet.TypeSettlement:
		return edge.Invalid("wallet_type", "SETTLEMENT wallets are created by the service and cannot be created.")
	default:
		return edge.Invalid("wallet_type", "wallet_type must be WORKING.")
	}
	label, err := b.Str("label", true, 100, labelPattern)
	if err != nil {
		return err
	}
	if strings.HasPrefix(strings.ToUpper(strings.TrimSpace(label)), "SETTLEMENT") {
		return edge.Invalid("label", "Labels starting with SETTLEMENT are reserved for settlement wallets.")
	}
	canDisburse, err := b.Bool("can_disburse", false)
	if err != nil {
		return err
	}
	var r topics.Reply
	err = s.freshIDs(c, func() error {
		var err error
		r, err = s.issue(c, topics.CmdWalletCreate, topics.WalletCreate{
			WalletID: s.newID(), Currency: currency, WalletType: typ, Label: label, CanDisburse: canDisburse,
		})
		return takenAsError(r, err)
	})
	if err != nil {
		return err
	}
	return s.walletReply(c, r, http.StatusCreated)
}

// walletReply sends the engine's result as it is: it is already the merchant-facing
// JSON (a wallet.View, or a wallet.TransferResult), so it is not decoded and
// re-encoded on the hot path.
func (s *Server) walletReply(c echo.Context, r topics.Reply, status int) error {
	if r.Error != nil {
		return refusal(r.Error)
	}
	return c.JSONBlob(status, r.Result)
}

func (s *Server) intraTransfer(c echo.Context) error {
	from := c.Param("wallet_id")
	if !walletIDPattern.MatchString(from) {
		return edge.NotFound("Wallet not found.")
	}
	b, err := edge.ReadBody(c)
	if err != nil {
		return err
	}
	to, err := b.Str("wallet_id", true, 40, walletIDPattern)
	if err != nil {
		return err
	}
	amount, _, err := b.Amount("amount", true)
	if err != nil {
		return err
	}
	if amount.Sign() <= 0 || amount.Cmp(wallet.MaxTransfer) > 0 {
		return edge.Invalid("amount", "Amount must be greater than 0 and at most 999999.00.")
	}
	narrative, err := b.Str("narrative", true, 200, narrativePattern)
	if err != nil {
		return err
	}
	r, err := s.issue(c, topics.CmdWalletTransfer, topics.WalletTransferCmd{From: from, To: to, Amount: amount, Narrative: narrative})
	if err != nil {
		return err
	}
	return s.walletReply(c, r, http.StatusOK)
}

func (s *Server) sandboxDeposit(c echo.Context) error {
	id := c.Param("wallet_id")
	if !walletIDPattern.MatchString(id) {
		return edge.NotFound("Wallet not found.")
	}
	b, err := edge.ReadBody(c)
	if err != nil {
		return err
	}
	amount, _, err := b.Amount("amount", true)
	if err != nil {
		return err
	}
	if amount.Sign() <= 0 || amount.Cmp(maxDeposit) > 0 {
		return edge.Invalid("amount", "Amount must be greater than 0 and at most 10000000.00.")
	}
	narrative, err := b.Str("narrative", false, 200, narrativePattern)
	if err != nil {
		return err
	}
	if narrative == "" {
		narrative = "Sandbox deposit"
	}
	r, err := s.issue(c, topics.CmdWalletDeposit, topics.WalletDeposit{WalletID: id, Amount: amount, Narrative: narrative})
	if err != nil {
		return err
	}
	return s.walletReply(c, r, http.StatusOK)
}
