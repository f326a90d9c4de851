// Package pages is the layer every hosted customer page shares (the checkout,
// a payment link's page, a plan's subscribe page, a subscription's card setup
// page, and the page a refused request shows a customer's browser): the
// html/template files of this directory embedded in the binary with one layout,
// the stylesheet, script and icon served by paysvc itself under /static/ with
// content-hashed addresses, the security headers and policy of every page
// (edge.PageHeaders), and the check of the redirect a page may send the
// customer to. A customer's browser talks to paysvc and nothing else
// (docs/api-decisions.md, "Hosted pages").
//
// It exists so that the pages' presentation is one place, apart from the
// handlers that decide what a page shows (package api: each opened by the
// capability its path names) and from the JSON API; the merchant console takes
// its stylesheet's address from here too.
package pages
