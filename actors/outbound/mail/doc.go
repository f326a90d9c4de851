// Package mail sends the service's emails over real SMTP: pay requests (payment
// links mailed to customers, and their reminders) from the api role, and the
// warnings the dispatcher role sends a merchant's email address when a webhook keeps
// failing or is disabled. It also provides an embedded SMTP sink for environments
// without a mail server (one per process: each instance's sink holds only the mail
// that instance sent).
//
// # Why it exists
//
// A pay request is only useful if the customer receives it, and the service
// must record what happened to every send: delivered to the server, refused
// for good (sent_status FAILED with a safe failed_details such as
// "recipient refused: 550 5.1.1 no such user"), or failed for a reason worth
// retrying. Go's net/smtp speaks the protocol but leaves the rest to the
// caller: building a correct MIME message, deciding when TLS is mandatory,
// never sending a password in clear text, honouring a context deadline, and
// telling a permanent refusal from a temporary one. This package does that in
// one place so that the actors that send mail only deal with [Message],
// [Sender] and [IsPermanent].
//
// # Pieces
//
//   - [Message] and [Sender]: what the rest of the service uses.
//   - [SMTPSender]: a Sender that talks to a real server, configured from
//     PAYSVC_SMTP_URL through [ParseURL] (smtp:// with STARTTLS, smtps:// with
//     implicit TLS, AUTH PLAIN; its from= parameter is the sender, overriding
//     PAYSVC_MAIL_FROM). Every server reply that ends a send is an
//     [*SMTPError]; its Permanent method (5xx) says whether retrying can help.
//     Malformed messages wrap [ErrInvalidMessage] and are permanent too;
//     network failures, timeouts and 4xx replies are not.
//   - [Sink]: a small but real SMTP server run inside the process when no
//     server is configured. It keeps the last messages it received (bounded)
//     so developers can read them, and refuses recipients on demand
//     ([Sink.Refuse], or any address @refused.example) so the failure paths
//     can be exercised end to end. It never relays anything anywhere.
//
// # Security notes
//
// Passwords never appear in errors, in [Config.String], or in logs written
// through fmt or log/slog. AUTH is only attempted over TLS, or over plain
// TCP when the peer is a loopback address. The sink has no authentication and
// no TLS: bind it to a loopback address.
package mail
