package storage

import (
	"context"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// Owned names aggregates together with their merchants: Merchants[i] owns IDs[i].
// The engine's hydration reads take one, so that every id is read only with the
// merchant its command came from.
type Owned struct {
	Merchants []string
	IDs       []string
}

// Add names one more aggregate.
func (o *Owned) Add(merchantID, id string) {
	o.Merchants = append(o.Merchants, merchantID)
	o.IDs = append(o.IDs, id)
}

// TakenElsewhere reports which of o's (merchant, id) pairs name an id that a row
// of another merchant holds in table, whose column is its primary key across
// merchants, by "merchant\x00id" (engine.InstanceKey). Such an id cannot be
// created for the pair's merchant; nothing else of the other row is read. table
// and column are the caller's constants, never input.
func TakenElsewhere(ctx context.Context, q sqlx.QueryerContext, table, column string, o Owned) (map[string]bool, error) {
	if len(o.IDs) == 0 {
		return nil, nil
	}
	var rows []struct {
		M  string `db:"m"`
		ID string `db:"id"`
	}
	if err := sqlx.SelectContext(ctx, q, &rows, `SELECT k.m, k.id FROM unnest($1::text[], $2::text[]) AS k(m, id)
		JOIN `+table+` t ON t.`+column+` = k.id AND t.merchant_id <> k.m`,
		pq.StringArray(o.Merchants), pq.StringArray(o.IDs)); err != nil {
		return nil, fmt.Errorf("%s ids taken: %w", table, err)
	}
	out := make(map[string]bool, len(rows))
	for _, r := range rows {
		out[r.M+"\x00"+r.ID] = true
	}
	return out, nil
}

// ErrIDTaken is an insert whose new row's id (drawn by the caller) another row
// holds, any merchant's: nothing was written, and the same insert with another
// id will do.
var ErrIDTaken = errors.New("id already in use")

// breaks reports whether err is a violation of the check constraint named
// constraint, which its caller turns into the rule's own error.
func breaks(err error, constraint string) bool {
	var pqErr *pq.Error
	return errors.As(err, &pqErr) && pqErr.Code == "23514" && pqErr.Constraint == constraint
}

// idTaken is err as ErrIDTaken when it is a unique violation of table's primary
// key (named table_pkey), else err.
func idTaken(err error, table string) error {
	var pqErr *pq.Error
	if errors.As(err, &pqErr) && pqErr.Code == "23505" && pqErr.Constraint == table+"_pkey" {
		return ErrIDTaken
	}
	return err
}
