package api

import (
	"net/url"
	"strconv"

	"github.com/labstack/echo/v4"

	"paysvc/api/edge"
)

const (
	defaultPageSize = 50
	maxPageSize     = 500
)

type page struct {
	number, size int
}

func (p page) offset() int { return (p.number - 1) * p.size }

// pageOf reads ?page= (1-based) and ?page_size=.
func pageOf(c echo.Context) (page, error) {
	p := page{number: 1, size: defaultPageSize}
	if v := c.QueryParam("page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1_000_000 {
			return p, edge.Invalid("page", "Invalid page.")
		}
		p.number = n
	}
	if v := c.QueryParam("page_size"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxPageSize {
			return p, edge.Invalid("page_size", "page_size must be between 1 and 500.")
		}
		p.size = n
	}
	return p, nil
}

// listJSON is the list shape of the interface.
type listJSON struct {
	Count    int     `json:"count"`
	Next     *string `json:"next"`
	Previous *string `json:"previous"`
	Results  any     `json:"results"`
}

func (p page) list(c echo.Context, total int, results any) listJSON {
	out := listJSON{Count: total, Results: results}
	link := func(n int) *string {
		u := url.URL{Scheme: c.Scheme(), Host: c.Request().Host, Path: c.Request().URL.Path}
		q := c.Request().URL.Query()
		q.Set("page", strconv.Itoa(n))
		u.RawQuery = q.Encode()
		s := u.String()
		return &s
	}
	if p.offset()+p.size < total {
		out.Next = link(p.number + 1)
	}
	if p.number > 1 {
		out.Previous = link(p.number - 1)
	}
	return out
}
