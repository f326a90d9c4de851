package pages

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path"

	"github.com/labstack/echo/v4"

	"paysvc/api/edge"
)

//go:embed *.html static/*
var pageFiles embed.FS

// staticAsset is one file served under /static/: its bytes, type and content hash.
type staticAsset struct {
	body        []byte
	contentType string
	version     string // first 12 hex digits of the SHA-256 of body
}

var (
	staticAssets  = loadStaticAssets()
	pageTemplates = loadPageTemplates()
)

func loadStaticAssets() map[string]staticAsset {
	types := map[string]string{".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8",
		".svg": "image/svg+xml"}
	out := map[string]staticAsset{}
	entries, err := fs.ReadDir(pageFiles, "static")
	if err != nil {
		panic(err)
	}
	for _, e := range entries {
		body, err := pageFiles.ReadFile("static/" + e.Name())
		if err != nil {
			panic(err)
		}
		ct, ok := types[path.Ext(e.Name())]
		if !ok {
			panic("pages: static file " + e.Name() + " has no known content type")
		}
		sum := sha256.Sum256(body)
		out[e.Name()] = staticAsset{body: body, contentType: ct, version: hex.EncodeToString(sum[:])[:12]}
	}
	return out
}

// AssetURL is a static file's address with its content hash: a new release changes
// the address, so browsers may cache each version for good.
func AssetURL(name string) (string, error) {
	a, ok := staticAssets[name]
	if !ok {
		return "", &edge.Error{Status: http.StatusInternalServerError, Type: "server_error", Code: "error", Detail: "no asset " + name}
	}
	return "/static/" + name + "?v=" + a.version, nil
}

// loadPageTemplates parses every page with the shared layout: each page file defines
// "title" and "content", layout.html the document around them.
func loadPageTemplates() map[string]*template.Template {
	return edge.ParseWithLayout(pageFiles, template.FuncMap{"asset": AssetURL})
}

// Page is what every hosted page's layout shows: who is paid, and whether money is
// real. Data is the page's own view.
type Page struct {
	Title    string
	Merchant string // merchants.name: the customer must see whom they pay
	Sandbox  bool   // a test-mode banner: no real money moves
	// Static pages (a closed link, an error) take no payment: they load no script
	// and do not ask for one.
	Static bool
	Data   any
}

// Render writes a hosted page with status. It renders into a buffer first, so a
// template error is the generic 500, never half a page.
func Render(c echo.Context, status int, name string, p Page) error {
	t, ok := pageTemplates[name]
	if !ok {
		return edge.ErrInternal
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout.html", p); err != nil {
		return err
	}
	h := c.Response().Header()
	edge.PageHeaders(h)
	// A page carries a fresh signature and the session's live state: never cached.
	h.Set("Cache-Control", "no-store")
	return c.HTMLBlob(status, buf.Bytes())
}

// ServeStatic serves the pages' stylesheet, script and images from the binary. An
// address with the current content hash may be cached for good; any other for a
// short while (an old page open during a release still gets working files).
func ServeStatic(c echo.Context) error {
	a, ok := staticAssets[c.Param("name")]
	if !ok {
		return edge.NotFound("Not found.")
	}
	h := c.Response().Header()
	edge.PageHeaders(h)
	if c.QueryParam("v") == a.version {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "public, max-age=300")
	}
	return c.Blob(http.StatusOK, a.contentType, a.body)
}

// Redirect is a redirect URL a page may send the customer to after paying, with
// the host to name on the "Continue" link; "" when there is none or it is unsafe: only
// an absolute https address (http too in the sandbox, for local development), with no
// credentials in it. html/template would neutralise a javascript: URL in href, but
// the script navigates to it too, so it is checked here.
func Redirect(raw string, sandbox bool) (string, string) {
	if raw == "" || len(raw) > 400 {
		return "", ""
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil || u.Opaque != "" {
		return "", ""
	}
	if u.Scheme != "https" && (u.Scheme != "http" || !sandbox) {
		return "", ""
	}
	return u.String(), u.Hostname()
}
