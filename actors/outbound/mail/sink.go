package mail

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"mime"
	"net"
	netmail "net/mail"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Sink limits and magic addresses.
const (
	// SinkMaxMessageSize is the largest message DATA accepts (larger: 552).
	SinkMaxMessageSize = 10 << 20
	// SinkMaxMessages is how many messages the sink keeps (the most recent).
	SinkMaxMessages = 1000
	// SinkMaxStoredBytes bounds the total size of the kept messages; the
	// oldest are dropped first.
	SinkMaxStoredBytes = 256 << 20
	// SinkMaxRecipients is the number of RCPT TO per message (more: 452).
	SinkMaxRecipients = 100
	// SinkMaxConns is the number of concurrent connections (more: 421).
	SinkMaxConns = 256

	// RefusedDomain: RCPT TO any address @refused.example answers
	// "550 5.1.1 ... no such user", a permanent refusal.
	RefusedDomain = "refused.example"
	// TempFailDomain: RCPT TO any address @tempfail.example answers
	// "451 4.3.0 ... try again later", a temporary refusal.
	TempFailDomain = "tempfail.example"

	sinkIdleTimeout = 5 * time.Minute
	sinkMaxLine     = 4096 // command lines (RFC 5321 asks for at least 512)
	sinkMaxErrors   = 20   // bad commands before the sink hangs up
)

// Received is a message the sink accepted.
type Received struct {
	ID      uint64   // 1, 2, 3, ... in order of acceptance
	From    string   // envelope sender (MAIL FROM), "" for the null sender
	To      []string // envelope recipients (RCPT TO)
	Subject string   // decoded Subject header, "" if none or unparsable
	Data    []byte   // the message as received, dot-unstuffed, CRLF line ends
	At      time.Time
}

// Sink is a small SMTP server that keeps what it receives instead of
// delivering it: the service runs one when PAYSVC_SMTP_URL is not set, so
// that mails can be read by developers (Messages), and tests use it as a real
// peer for SMTPSender.
//
// It implements EHLO/HELO, MAIL FROM, RCPT TO, DATA (dot-unstuffing, 552 above
// SinkMaxMessageSize), RSET, NOOP and QUIT, and answers 502 to anything else
// (including STARTTLS and AUTH, which it does not offer). Recipients
// @refused.example, and those passed to Refuse, get 550 5.1.1; recipients
// @tempfail.example get 451 4.3.0. It serves connections concurrently and keeps
// the last SinkMaxMessages messages. It has no authentication: listen on a
// loopback address.
type Sink struct {
	ln   net.Listener
	name string

	mu      sync.Mutex
	msgs    []Received // oldest first
	size    int        // total len(Data) of msgs
	nextID  uint64
	refused map[string]bool
	conns   map[net.Conn]struct{}
	closed  bool

	wg sync.WaitGroup
}

// NewSink listens on addr ("127.0.0.1:0" when empty) and starts serving.
func NewSink(addr string) (*Sink, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("mail: sink: %w", err)
	}
	s := &Sink{
		ln:      ln,
		name:    "paysvc-sink.localhost",
		refused: map[string]bool{},
		conns:   map[net.Conn]struct{}{},
	}
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

// Addr is the address the sink listens on, as host:port.
func (s *Sink) Addr() string { return s.ln.Addr().String() }

// URL is an SMTP URL for the sink, suitable for ParseURL.
func (s *Sink) URL() string { return "smtp://" + s.Addr() + "?starttls=optional" }

// Refuse makes RCPT TO rcpt (compared case-insensitively) answer
// 550 5.1.1 from now on.
func (s *Sink) Refuse(rcpt string) {
	s.mu.Lock()
	s.refused[strings.ToLower(strings.TrimSpace(rcpt))] = true
	s.mu.Unlock()
}

// Messages returns the kept messages, oldest first. The Data slices are
// shared with the sink and must not be modified.
func (s *Sink) Messages() []Received {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Received, len(s.msgs))
	for i, m := range s.msgs {
		m.To = append([]string(nil), m.To...)
		out[i] = m
	}
	return out
}

// Close stops listening, drops open connections (a transaction in progress is
// lost) and waits for the connection handlers to finish. Kept messages remain
// readable. Close is idempotent.
func (s *Sink) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	err := s.ln.Close()
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

func (s *Sink) acceptLoop() {
	defer s.wg.Done()
	backoff := 5 * time.Millisecond
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed || errors.Is(err, net.ErrClosed) {
				return
			}
			// Transient (e.g. out of file descriptors): back off and retry.
			time.Sleep(backoff)
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = conn.Close()
			return
		}
		if len(s.conns) >= SinkMaxConns {
			s.mu.Unlock()
			_ = conn.SetWriteDeadline(time.Now().Add(time.Second))
			_, _ = conn.Write([]byte("421 4.3.2 too many connections, try again later\r\n"))
			_ = conn.Close()
			continue
		}
		s.conns[conn] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(conn)
	}
}

// session is one connection's SMTP state.
type session struct {
	s      *Sink
	conn   net.Conn
	r      *bufio.Reader
	w      *bufio.Writer
	greet  bool // EHLO/HELO seen
	inTx   bool // MAIL FROM accepted
	from   string
	rcpts  []string
	errors int
}

var errLineTooLong = errors.New("line too long")

func (s *Sink) serve(conn net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, conn)
		s.mu.Unlock()
		_ = conn.Close()
	}()
	ss := &session{s: s, conn: conn, r: bufio.NewReaderSize(conn, sinkMaxLine), w: bufio.NewWriter(conn)}
	if ss.reply("220 "+s.name+" ESMTP paysvc sink (messages are kept, never delivered)") != nil {
		return
	}
	for {
		_ = conn.SetReadDeadline(time.Now().Add(sinkIdleTimeout))
		line, err := ss.readLine()
		if errors.Is(err, errLineTooLong) {
			if !ss.bad("500 5.5.2 line too long") {
				return
			}
			continue
		}
		if err != nil {
			return
		}
		verb, arg, _ := strings.Cut(line, " ")
		arg = strings.TrimSpace(arg)
		var ok bool
		switch strings.ToUpper(verb) {
		case "EHLO", "HELO":
			ok = ss.hello(strings.ToUpper(verb), arg)
		case "MAIL":
			ok = ss.mail(arg)
		case "RCPT":
			ok = ss.rcpt(arg)
		case "DATA":
			ok = ss.data(arg)
		case "RSET":
			ss.reset()
			ok = ss.reply("250 2.0.0 OK") == nil
		case "NOOP":
			ok = ss.reply("250 2.0.0 OK") == nil
		case "QUIT":
			_ = ss.reply("221 2.0.0 " + s.name + " closing connection")
			return
		default:
			ok = ss.bad("502 5.5.2 command not recognized")
		}
		if !ok {
			return
		}
	}
}

// reply writes one or more reply lines (already formatted) and flushes.
func (ss *session) reply(lines ...string) error {
	_ = ss.conn.SetWriteDeadline(time.Now().Add(sinkIdleTimeout))
	for _, l := range lines {
		ss.w.WriteString(l)
		ss.w.WriteString("\r\n")
	}
	return ss.w.Flush()
}

// bad answers an erroneous command and reports whether to carry on.
func (ss *session) bad(line string) bool {
	ss.errors++
	if ss.errors > sinkMaxErrors {
		_ = ss.reply("421 4.7.0 too many errors, closing connection")
		return false
	}
	return ss.reply(line) == nil
}

func (ss *session) reset() {
	ss.inTx, ss.from, ss.rcpts = false, "", nil
}

// readLine reads a command line without its line ending.
func (ss *session) readLine() (string, error) {
	var buf []byte
	tooLong := false
	for {
		chunk, err := ss.r.ReadSlice('\n')
		if !tooLong {
			if len(buf)+len(chunk) > sinkMaxLine {
				tooLong, buf = true, nil
			} else {
				buf = append(buf, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			return "", err
		}
		if tooLong {
			return "", errLineTooLong
		}
		return strings.TrimRight(string(buf), "\r\n"), nil
	}
}

func (ss *session) hello(verb, arg string) bool {
	if arg == "" {
		return ss.bad("501 5.5.4 " + verb + " requires a domain")
	}
	ss.reset()
	ss.greet = true
	if verb == "HELO" {
		return ss.reply("250 "+ss.s.name) == nil
	}
	return ss.reply(
		"250-"+ss.s.name+" greets "+sanitizeArg(arg),
		"250-SIZE "+strconv.Itoa(SinkMaxMessageSize),
		"250-8BITMIME",
		"250-SMTPUTF8",
		"250 ENHANCEDSTATUSCODES",
	) == nil
}

func (ss *session) mail(arg string) bool {
	if !ss.greet {
		return ss.bad("503 5.5.1 send EHLO or HELO first")
	}
	if ss.inTx {
		return ss.bad("503 5.5.1 sender already given (RSET to start over)")
	}
	path, params, ok := parsePath(arg, "FROM:")
	if !ok {
		return ss.bad("501 5.5.4 syntax: MAIL FROM:<address>")
	}
	for _, p := range strings.Fields(params) {
		k, v, _ := strings.Cut(p, "=")
		if strings.EqualFold(k, "SIZE") {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > SinkMaxMessageSize {
				return ss.bad("552 5.3.4 message size exceeds fixed maximum message size")
			}
		}
	}
	ss.inTx, ss.from, ss.rcpts = true, path, nil
	return ss.reply("250 2.1.0 sender OK") == nil
}

func (ss *session) rcpt(arg string) bool {
	if !ss.inTx {
		return ss.bad("503 5.5.1 send MAIL FROM first")
	}
	path, _, ok := parsePath(arg, "TO:")
	if !ok || path == "" {
		return ss.bad("501 5.5.4 syntax: RCPT TO:<address>")
	}
	if len(ss.rcpts) >= SinkMaxRecipients {
		return ss.reply("452 4.5.3 too many recipients") == nil
	}
	addr := strings.ToLower(path)
	domain := ""
	if at := strings.LastIndexByte(addr, '@'); at >= 0 {
		domain = addr[at+1:]
	}
	ss.s.mu.Lock()
	refused := ss.s.refused[addr]
	ss.s.mu.Unlock()
	switch {
	case refused || domain == RefusedDomain:
		return ss.reply("550 5.1.1 <"+sanitizeArg(path)+">: no such user") == nil
	case domain == TempFailDomain:
		return ss.reply("451 4.3.0 <"+sanitizeArg(path)+">: temporary failure, try again later") == nil
	}
	ss.rcpts = append(ss.rcpts, path)
	return ss.reply("250 2.1.5 recipient OK") == nil
}

func (ss *session) data(arg string) bool {
	if arg != "" {
		return ss.bad("501 5.5.4 DATA takes no arguments")
	}
	if !ss.inTx || len(ss.rcpts) == 0 {
		return ss.bad("503 5.5.1 no valid recipients")
	}
	if ss.reply("354 end data with <CR><LF>.<CR><LF>") != nil {
		return false
	}
	var body bytes.Buffer
	tooBig := false
	atLineStart := true
	for {
		_ = ss.conn.SetReadDeadline(time.Now().Add(sinkIdleTimeout))
		chunk, err := ss.r.ReadSlice('\n')
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return false // connection gone mid-message: nothing is kept
		}
		if atLineStart && len(chunk) > 0 && chunk[0] == '.' {
			if string(chunk) == ".\r\n" || string(chunk) == ".\n" {
				break
			}
			chunk = chunk[1:] // dot-unstuffing (RFC 5321 4.5.2)
		}
		atLineStart = err == nil // the chunk ended with '\n'
		if tooBig {
			continue
		}
		if body.Len()+len(chunk) > SinkMaxMessageSize {
			tooBig = true
			body = bytes.Buffer{}
			continue
		}
		body.Write(chunk)
	}
	from, rcpts := ss.from, ss.rcpts
	ss.reset()
	if tooBig {
		return ss.reply("552 5.3.4 message size exceeds fixed maximum message size") == nil
	}
	id := ss.s.store(from, rcpts, body.Bytes())
	return ss.reply("250 2.0.0 OK: queued as "+strconv.FormatUint(id, 10)) == nil
}

func (s *Sink) store(from string, rcpts []string, data []byte) uint64 {
	r := Received{From: from, To: rcpts, Subject: parseSubject(data), Data: data, At: time.Now()}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	r.ID = s.nextID
	s.msgs = append(s.msgs, r)
	s.size += len(data)
	for len(s.msgs) > SinkMaxMessages || s.size > SinkMaxStoredBytes && len(s.msgs) > 1 {
		s.size -= len(s.msgs[0].Data)
		s.msgs[0] = Received{} // let the data be collected
		s.msgs = s.msgs[1:]
	}
	return r.ID
}

// parsePath parses "FROM:<addr> params" (or "TO:..."), also accepting a space
// after the colon and a bare address without angle brackets.
func parsePath(arg, prefix string) (path, params string, ok bool) {
	if len(arg) < len(prefix) || !strings.EqualFold(arg[:len(prefix)], prefix) {
		return "", "", false
	}
	rest := strings.TrimSpace(arg[len(prefix):])
	if strings.HasPrefix(rest, "<") {
		end := strings.IndexByte(rest, '>')
		if end < 0 {
			return "", "", false
		}
		path, params = rest[1:end], strings.TrimSpace(rest[end+1:])
	} else {
		path, params, _ = strings.Cut(rest, " ")
		if path == "" {
			return "", "", false
		}
	}
	if strings.ContainsAny(path, " \t<>") || len(path) > 320 {
		return "", "", false
	}
	// Source routes (<@a,@b:user@c>) are obsolete; keep the mailbox.
	if strings.HasPrefix(path, "@") {
		if i := strings.IndexByte(path, ':'); i >= 0 {
			path = path[i+1:]
		}
	}
	return path, params, true
}

// sanitizeArg keeps client text echoed in replies printable and short.
func sanitizeArg(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x21 || r > 0x7e {
			return '?'
		}
		return r
	}, s)
	if len(s) > 100 {
		s = s[:100]
	}
	return s
}

func parseSubject(data []byte) string {
	msg, err := netmail.ReadMessage(bytes.NewReader(data))
	if err != nil {
		return ""
	}
	subj := msg.Header.Get("Subject")
	if dec, err := new(mime.WordDecoder).DecodeHeader(subj); err == nil {
		return dec
	}
	return subj
}
