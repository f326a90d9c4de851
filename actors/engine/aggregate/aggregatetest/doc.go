// Package aggregatetest runs one aggregate actor in a test: its kind's Step in
// the shell of package aggregate, alone in a hollywood engine, with the requests a
// test sends answered in order. The wallet's and the payment file's actor tests
// share it, so the shell is driven one way and each test speaks only of its kind.
package aggregatetest
