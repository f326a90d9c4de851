package sandbox

import (
	"log/slog"

	"github.com/jmoiron/sqlx"
	"github.com/labstack/echo/v4"
	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/actors/outbound/mail"
	"paysvc/topics"
)

// Deps are what the sandbox tools are given by the server that mounts them.
type Deps struct {
	// Environment is sandbox or live; on a live server the tools answer 404.
	Environment string
	DB          *sqlx.DB
	Kafka       *kgo.Client      // lists the event topics' offsets for listen streams
	Brokers     []string         // the Kafka cluster a listen stream consumes from
	Namespace   topics.Namespace // of the event topics
	Sink        *mail.Sink       // the embedded SMTP sink, when the service runs one
	Log         *slog.Logger
	Ready       func() bool // false while the process shuts down: streams end
	// Redraw writes a new row under a fresh id (prefix + the server's id draw),
	// drawing again while the id is taken, as the API does for its resources.
	Redraw func(c echo.Context, prefix string, insert func(id string) error) error
}

// Tools are the sandbox's developer tools. Its handlers are mounted by the
// server's route table, which declares each one's access.
type Tools struct {
	env    string // sandbox or live
	db     *sqlx.DB
	kafka  *kgo.Client
	ns     topics.Namespace
	sink   *mail.Sink
	log    *slog.Logger
	ready  func() bool
	redraw func(c echo.Context, prefix string, insert func(id string) error) error
	listen *listenHub
}

// New builds the tools.
func New(d Deps) *Tools {
	t := &Tools{db: d.DB, kafka: d.Kafka, ns: d.Namespace, sink: d.Sink, log: d.Log, ready: d.Ready, redraw: d.Redraw,
		listen: newListenHub(d.Brokers), env: d.Environment}
	return t
}
