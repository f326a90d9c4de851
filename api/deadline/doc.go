// Package deadline bounds how long one request may hold a connection of the public
// listener, so a client cannot tie connections up by sending slowly (a body
// dribbled a byte at a time) or by not reading its answer.
//
// A fixed read timeout cannot do it here: a payment file of 10,000 transactions
// is a body of several megabytes that an honest merchant on a slow link needs
// minutes to send, while a dribbler needs only the same fixed time per connection.
// So the body must keep arriving at a minimum average rate (after a short grace),
// whatever its size; a body that falls behind has its connection closed. The
// answer's write deadline is counted from the end of the body, not from the end of
// the headers, so a slow but honest upload does not eat the time the handler has
// to answer. A handler that streams on purpose (the sandbox listen stream) lifts
// both deadlines itself with http.ResponseController.
package deadline
