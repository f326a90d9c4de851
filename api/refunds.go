package api

import (
	"errors"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"paysvc/actors/aggregates/refund"
	"paysvc/actors/aggregates/refund/refundstore"
	"paysvc/api/edge"
	"paysvc/storage"
)

// Refunds (chargebacks): docs/api-decisions.md "Refunds". The engine's refund
// aggregate (actors/aggregates/refund) decides; these handlers read, check the request's
// shape and issue its commands.

var refundIDPattern = regexp.MustCompile(`^[0-9]{1,18}$`)

// maxRefund bounds one refund's amount like every other amount of the interface;
// the invoice's value bounds it first.
var maxRefund = maxDeposit

func (s *Server) listRefunds(c echo.Context) error {
	return listOwn(s, c, refundstore.List, func(r refund.Refund) refund.View {
		v := r.View()
		hideRefundPayer(c, &v)
		return v
	})
}

// pathRefund reads the merchant's refund named by the path: another merchant's is
// 404 exactly like one that does not exist.
func (s *Server) pathRefund(c echo.Context) (refund.Refund, error) {
	raw := c.Param("refund_id")
	if !refundIDPattern.MatchString(raw) {
		return refund.Refund{}, edge.NotFound("Refund not found.")
	}
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		return refund.Refund{}, edge.NotFound("Refund not found.")
	}
	r, err := refundstore.Get(c.Request().Context(), s.db, edge.PrincipalOf(c).MerchantID, id)
	if errors.Is(err, storage.ErrNotFound) {
		return r, edge.NotFound("Refund not found.")
	}
	return r, err
}

func (s *Server) getRefund(c echo.Context) error {
	r, err := s.pathRefund(c)
	if err != nil {
		return err
	}
	v := r.View()
	hideRefundPayer(c, &v)
	return c.JSON(http.StatusOK, v)
}

func (s *Server) createRefund(c echo.Context) error {
	b, err := edge.ReadBody(c)
	if err != nil {
		return err
	}
	inv, err := b.Text("invoice", true, 40, walletIDPattern)
	if err != nil {
		return err
	}
	amount, _, err := b.Amount("amount", true)
	if err != nil {
		return err
	}
	if amount.Sign() <= 0 || amount.Cmp(maxRefund) > 0 {
		return edge.Invalid("amount", "Amount must be greater than 0 and at most "+maxRefund.String()+".")
	}
	reason, err := b.Str("reason", true, 40, nil)
	if err != nil {
		return err
	}
	if !slices.Contains(refund.Reasons, reason) {
		return edge.Invalid("reason", "reason must be one of: "+strings.Join(refund.Reasons, ", ")+".")
	}
	details, err := b.Str("reason_details", false, refund.MaxReasonDetails, nil)
	if err != nil {
		return err
	}
	id, err := storage.NextRefundID(c.Request().Context(), s.db)
	if err != nil {
		return err
	}
	r, err := s.issue(c, refund.CmdCreate, refund.Create{RefundID: id, InvoiceID: inv, Amount: amount, Reason: reason, ReasonDetails: details})
	if err != nil {
		return err
	}
	return s.refundReply(c, r, http.StatusCreated)
}

// cancelRefund withdraws a refund the rail has not taken (PENDING, untaken): its
// hold goes back to the available balance. The engine decides (refund.cancel is
// the merchant's command; docs/state-machines.md): a refund that is with the
// rail (taken, DISPUTED, OVERDUE) or final is 400 not_cancellable and unchanged.
func (s *Server) cancelRefund(c echo.Context) error {
	cur, err := s.pathRefund(c)
	if err != nil {
		return err
	}
	r, err := s.issue(c, refund.CmdCancel, refund.Cancel{RefundID: cur.ID, InvoiceID: cur.InvoiceID})
	if err != nil {
		return err
	}
	return s.refundReply(c, r, http.StatusOK)
}
