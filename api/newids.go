package api

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"paysvc/actors/engine"
	"paysvc/actors/values/ids"
	"paysvc/api/edge"
	"paysvc/storage"
	"paysvc/topics"
)

// IDLength is the length of the alias ids drawn here for rows whose id is a
// primary key across merchants (invoices, payment files and their transactions,
// wallets, customers, webhooks, pay requests): 12 characters of the 32-letter
// alias alphabet, 60 random bits, so that a clash is about one in a million at a
// billion ids (docs/api-decisions.md, "Ids"). Ids drawn before (8 or 10
// characters) have the same alphabet and keep working: nothing parses an id's
// length. 12 is also the most Daraja shows as an STK prompt's account reference.
const IDLength = 12

// maxIDDraws is how many ids a request draws before it gives up: at 60 bits a
// second clash in a row means something is wrong with the randomness, not luck.
const maxIDDraws = 3

var idClashes = promauto.NewCounter(prometheus.CounterOpts{
	Name: "paysvc_api_id_clashes_total",
	Help: "New ids the engine refused because another row (any merchant's) holds them; each was drawn again.",
})

// newID draws a new alias id (Config.NewID in tests that force a clash).
func (s *Server) newID() string {
	if s.cfg.NewID != nil {
		return s.cfg.NewID(IDLength)
	}
	return ids.Alias(IDLength)
}

// errIDsTaken is what a request gets when every id it drew was taken: nothing
// was created, and the same request again will draw others.
var errIDsTaken = &edge.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: engine.CodeIDTaken,
	Detail: "The new resource's id was already in use; nothing was created. Retry the request.", RetryAfter: 1}

// freshIDs runs op, which draws the new ids of a resource and sends the command
// that creates it, again with fresh ids each time the engine refuses one of them
// as taken (engine.CodeIDTaken: by this merchant's or another's row). Such a
// refusal changed nothing, so another draw is the same request. With an
// Idempotency-Key each draw gets its own command id, derived from the key's, so a
// retried request replays the same sequence of commands: the draw the engine
// applied answers again, however its ids were drawn this time.
func (s *Server) freshIDs(c echo.Context, op func() error) error {
	base, _ := c.Get(ctxCommandID).(string)
	defer c.Set(ctxCommandID, base)
	for draw := 1; ; draw++ {
		err := op()
		var e *edge.Error
		if !errors.As(err, &e) || e.Code != engine.CodeIDTaken {
			return err
		}
		idClashes.Inc()
		s.log.Warn("new id already in use; drawing another", "request_id", edge.RequestID(c), "draw", draw)
		if draw == maxIDDraws {
			return errIDsTaken
		}
		next := ""
		if base != "" {
			next = ids.DeriveUUID(base, "fresh-id", strconv.Itoa(draw))
		}
		c.Set(ctxCommandID, next)
	}
}

// redraw runs insert, which writes a new row under the id it is given, again
// with a fresh id each time the row's primary key is taken (storage.ErrIDTaken:
// nothing was written).
func (s *Server) redraw(c echo.Context, prefix string, insert func(id string) error) error {
	for draw := 1; ; draw++ {
		err := insert(prefix + s.newID())
		if !errors.Is(err, storage.ErrIDTaken) {
			return err
		}
		idClashes.Inc()
		s.log.Warn("new id already in use; drawing another", "request_id", edge.RequestID(c), "draw", draw)
		if draw == maxIDDraws {
			return errIDsTaken
		}
	}
}

// takenAsError is issue's answer as freshIDs reads it: a refusal of a taken id
// is the error that draws again; any other reply is the caller's to render.
func takenAsError(r topics.Reply, err error) error {
	if err == nil && r.Error != nil && r.Error.Code == engine.CodeIDTaken {
		return refusal(r.Error)
	}
	return err
}

func init() { replyStatus[engine.CodeIDTaken] = http.StatusServiceUnavailable }
