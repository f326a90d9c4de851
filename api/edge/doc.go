// Package edge is what every product surface of paysvc's HTTP server shares at
// its edge: who a request acts for (Principal) and how a caller inside the
// process hands one over (WithCaller), the permission catalogue a restricted key
// draws from, the key format, the one error shape (Error and its constructors),
// the request id every answer carries, the security headers of every HTML
// page, and the reading of a JSON request body (Body, ReadBody), whose text check
// (jsontext.go) every route's body passes before any field is decoded.
//
// It exists so that the JSON API (package api) and the merchant console
// (package api/console) meet here rather than in each other: the console renders
// pages and calls the API's routes in-process, and both name principals,
// permissions and refusals the same way. edge holds no handlers and no rules of
// the business, and of paysvc it imports only values (ids, money).
package edge
