package api

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"paysvc/api/openapi"
)

// openapiAuth names each route kind as the description does.
var openapiAuth = map[routeKind]openapi.Auth{
	kindSecret: openapi.AuthSecret, kindPublicOrSecret: openapi.AuthPublicOrSecret, kindCollection: openapi.AuthCollection,
	kindStatus: openapi.AuthStatus, kindPublicKey: openapi.AuthPublicKey, kindSandbox: openapi.AuthSandbox,
	kindCallback: openapi.AuthCallback, kindOpen: openapi.AuthNone, kindConsole: openapi.AuthConsole,
}

// describeRoutes builds the OpenAPI description from the route table, once, when the
// server is made: the table is fixed from then on, so the document cannot disagree
// with the router (api/openapi's doc.go). The catch-all 404 is no operation.
func (s *Server) describeRoutes() *openapi.Document {
	var routes []openapi.Route
	for key, a := range s.declared {
		method, path, _ := strings.Cut(key, " ")
		if method == echo.RouteNotFound {
			continue
		}
		r := openapi.Route{Method: method, Path: path, Auth: openapiAuth[a.kind], Permission: a.perm, Idempotent: a.idempotent}
		if a.capability != nil {
			r.Capability = a.capability.name
		}
		routes = append(routes, r)
	}
	doc, err := openapi.Build(routes, InterfaceVersion)
	if err != nil {
		// Only the embedded files can fail to parse: a defect of the build, which
		// every test that makes a server reports at once.
		panic(err)
	}
	return doc
}

// OpenAPIProblems is what the description lacks or has too much (routes without a
// hand-written entry, entries without a route): empty when it is whole.
func (s *Server) OpenAPIProblems() []string { return s.openapi.Problems }

// OpenAPIDocument is the API document exactly as GET /api/v1/openapi.json serves
// it (api/openapi/openapi.json is its committed copy).
func (s *Server) OpenAPIDocument() []byte { return s.openapi.JSON }

// ConsoleOpenAPIDocument describes the merchant console's pages and forms, which
// the API document leaves out: HTML for a browser, no interface a client is
// generated from. It is not served; api/openapi/console.json is its committed copy.
func (s *Server) ConsoleOpenAPIDocument() []byte { return s.openapi.ConsoleJSON }

func (s *Server) openapiJSON(c echo.Context) error {
	return s.serveDescription(c, echo.MIMEApplicationJSON, s.openapi.JSON, s.openapi.JSONETag)
}

func (s *Server) openapiYAML(c echo.Context) error {
	return s.serveDescription(c, "application/yaml", s.openapi.YAML, s.openapi.YAMLETag)
}

// serveDescription serves the document with a strong ETag: it changes only with the
// binary, so clients may keep it for a while and revalidate cheaply afterwards.
func (s *Server) serveDescription(c echo.Context, contentType string, body []byte, etag string) error {
	h := c.Response().Header()
	h.Set("ETag", etag)
	h.Set("Cache-Control", "public, max-age=300")
	if etagMatches(c.Request().Header.Get("If-None-Match"), etag) {
		return c.NoContent(http.StatusNotModified)
	}
	return c.Blob(http.StatusOK, contentType, body)
}

// etagMatches reports whether an If-None-Match list names etag (or is "*").
func etagMatches(header, etag string) bool {
	for _, v := range strings.Split(header, ",") {
		v = strings.TrimPrefix(strings.TrimSpace(v), "W/")
		if v == etag || v == "*" {
			return true
		}
	}
	return false
}
