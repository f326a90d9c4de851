// Package pages is the hosted customer pages: the checkout page of a session,
// a payment link's page and its QR code, a plan's subscribe page and a
// subscription's card setup page (their handlers decide what each shows:
// checkout.go, subscription.go), and the page a customer's browser gets when a
// request there is refused (ErrorPage, problems.go). With them is what every
// page shares: the html/template files of this directory embedded in the binary
// with one layout, the stylesheet, script and icon served by paysvc itself under
// /static/ with content-hashed addresses, the security headers and policy of
// every page (edge.PageHeaders), and the check of the redirect a page may send
// the customer to. A customer's browser talks to paysvc and nothing else
// (docs/api-decisions.md, "Hosted pages").
//
// It exists apart from the JSON API so that the pages can change without
// reaching into the API's handlers, and the API without carrying pages. The
// server that mounts it (package api) builds it with New and registers its
// handlers in its own route table, each route declaring the capability its path
// names; every page is given its resource already opened by that capability,
// with the merchant the server admitted (Deps), so no page decides whom a
// capability serves. The pages write nothing: what their script does (open a
// link's session, pay, poll, set up a card, subscribe) is a call of the JSON API.
// The merchant console takes its stylesheet's address from here too.
package pages
