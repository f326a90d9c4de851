package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"paysvc/api/pages"
)

// The hosted pages (checkout, payment links, subscription setup and plan
// subscribe: subpages.go) decide here what a page shows; package api/pages lays
// it out, under the pages' security headers, with the assets paysvc serves
// under /static/.

// renderPage writes a hosted page.
func (s *Server) renderPage(c echo.Context, name string, p pages.Page) error {
	return s.renderPageStatus(c, http.StatusOK, name, p)
}

// renderPageStatus is renderPage with the status a page that refuses (a closed
// link, an error page) answers with.
func (s *Server) renderPageStatus(c echo.Context, status int, name string, p pages.Page) error {
	p.Sandbox = s.cfg.Environment == "sandbox"
	return pages.Render(c, status, name, p)
}

// pageRedirect is a redirect URL a page may send the customer to after paying, with
// the host to name on the "Continue" link ("" when unsafe: pages.Redirect).
func (s *Server) pageRedirect(raw string) (string, string) {
	return pages.Redirect(raw, s.cfg.Environment == "sandbox")
}
