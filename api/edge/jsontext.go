package edge

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The request-text check. PostgreSQL cannot store a NUL character in text or jsonb
// (22P05, 22021), and a value it refuses inside the engine's batch stalls the whole
// command partition. Go's encoding/json does not help: it keeps "\u0000" as a NUL,
// and silently turns invalid UTF-8 and unpaired surrogate escapes ("\ud800") into
// U+FFFD, so a handler cannot even see that the client sent something else. The
// only faithful place to look is the raw body, before any decoding: every string
// literal of it, member names included, is checked once here, for every endpoint,
// and the refusal names the field by its path (customer.email, transactions[3].name).

// textProblem is why a string was refused; "" means it is acceptable.
type textProblem string

const (
	textOK        textProblem = ""
	textNUL       textProblem = "Must not contain NUL characters."
	textBadUTF8   textProblem = "Must be valid UTF-8 text."
	textSurrogate textProblem = "Contains an unpaired UTF-16 surrogate escape."
	textControl   textProblem = "Contains a raw control character; escape it."
)

// maxScanDepth matches encoding/json's nesting limit: deeper bodies are refused by
// the decoder anyway, so the scanner stops there rather than recurse further.
const maxScanDepth = 10000

// maxAttrRunes bounds how much of a client's member name an error repeats.
const maxAttrRunes = 64

// textError is a refused string: the path of the field and the reason.
type textError struct {
	path    string
	problem textProblem
}

// checkJSONText scans the first JSON value of raw and returns the first string
// (value or member name) that may not be stored. A body that is not JSON at all is
// not its business: it returns nil and the decoder refuses the body as it always did.
func checkJSONText(raw []byte) *textError {
	sc := scanner{b: raw}
	sc.ws()
	if sc.value() {
		return nil
	}
	return sc.bad
}

// scanner is a small recursive-descent JSON reader that only validates: it keeps the
// path as a stack of segments and formats it only when a string is refused.
type scanner struct {
	b     []byte
	i     int
	depth int
	path  []segment
	bad   *textError
}

// segment is one step of a path: a member name (raw, still escaped) or an index.
type segment struct {
	key   []byte
	index int
	isKey bool
}

// value reads one value; false means stop (a refused string or a syntax error;
// bad is set only for the first).
func (s *scanner) value() bool {
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object()
	case c == '[':
		return s.array()
	case c == '"':
		_, ok := s.str(false)
		return ok
	case c == '-' || (c >= '0' && c <= '9'):
		for s.i < len(s.b) && strings.IndexByte("+-.eE0123456789", s.b[s.i]) >= 0 {
			s.i++
		}
		return true
	default:
		for _, lit := range []string{"true", "false", "null"} {
			if strings.HasPrefix(string(s.b[s.i:min(len(s.b), s.i+5)]), lit) {
				s.i += len(lit)
				return true
			}
		}
		return false
	}
}

func (s *scanner) ws() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\n' || s.b[s.i] == '\r') {
		s.i++
	}
}

// after reads what follows a member or an element: a comma (more follows) or the
// container's closing byte (done, well formed); anything else is malformed.
func (s *scanner) after(closing byte) (more, ok bool) {
	s.ws()
	if s.i >= len(s.b) {
		return false, false
	}
	switch s.b[s.i] {
	case ',':
		s.i++
		return true, true
	case closing:
		s.i++
		s.depth--
		return false, true
	}
	return false, false
}

func (s *scanner) object() bool {
	if s.depth++; s.depth > maxScanDepth {
		return false
	}
	s.i++ // {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		s.depth--
		return true
	}
	for {
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return false
		}
		key, ok := s.str(true)
		if !ok {
			return false
		}
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return false
		}
		s.i++
		s.ws()
		s.path = append(s.path, segment{key: key, isKey: true})
		if !s.value() {
			return false
		}
		s.path = s.path[:len(s.path)-1]
		if more, ok := s.after('}'); !more {
			return ok
		}
	}
}

func (s *scanner) array() bool {
	if s.depth++; s.depth > maxScanDepth {
		return false
	}
	s.i++ // [
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		s.depth--
		return true
	}
	for n := 0; ; n++ {
		s.ws()
		s.path = append(s.path, segment{index: n})
		if !s.value() {
			return false
		}
		s.path = s.path[:len(s.path)-1]
		if more, ok := s.after(']'); !more {
			return ok
		}
	}
}

// str reads a string literal at s.i (the opening quote) and returns its raw
// contents. A refused string sets bad, naming the member itself when it is a key.
func (s *scanner) str(isKey bool) ([]byte, bool) {
	start := s.i + 1
	j := start
	for j < len(s.b) {
		c := s.b[j]
		switch {
		case c == '"':
			s.i = j + 1
			return s.b[start:j], true
		case c == '\\':
			n, p := escape(s.b[j:])
			if p != textOK {
				return nil, s.refuse(isKey, s.b[start:min(len(s.b), j+n)], p)
			}
			if n == 0 {
				return nil, false // not an escape JSON knows: a syntax error
			}
			j += n
		case c < 0x20:
			return nil, s.refuse(isKey, s.b[start:j], textControl)
		case c < utf8.RuneSelf:
			j++
		default:
			r, n := utf8.DecodeRune(s.b[j:])
			if r == utf8.RuneError && n == 1 {
				return nil, s.refuse(isKey, s.b[start:j+1], textBadUTF8)
			}
			j += n
		}
	}
	return nil, false // unterminated
}

// escape measures the escape sequence at the start of b and says whether its
// character may be stored. n == 0 with textOK means the sequence is not valid JSON.
func escape(b []byte) (n int, p textProblem) {
	if len(b) < 2 {
		return 0, textOK
	}
	switch b[1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, textOK
	case 'u':
	default:
		return 0, textOK
	}
	r, ok := hex4(b[2:])
	if !ok {
		return 0, textOK
	}
	switch {
	case r == 0:
		return 6, textNUL
	case r >= 0xDC00 && r <= 0xDFFF:
		return 6, textSurrogate // a low half with no high half before it
	case r >= 0xD800 && r <= 0xDBFF:
		// A high half must be followed at once by an escaped low half.
		if len(b) >= 12 && b[6] == '\\' && b[7] == 'u' {
			if lo, ok := hex4(b[8:]); ok && lo >= 0xDC00 && lo <= 0xDFFF {
				return 12, textOK
			}
		}
		return 6, textSurrogate
	}
	return 6, textOK
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b[:4]), 16, 32)
	if err != nil {
		return 0, false
	}
	return rune(v), true
}

// refuse records the first refused string and stops the scan.
func (s *scanner) refuse(isKey bool, rawKey []byte, p textProblem) bool {
	path := s.path
	if isKey {
		// The member itself is named, by what can be read of its name.
		path = append(path[:len(path):len(path)], segment{key: rawKey, isKey: true})
	}
	s.bad = &textError{path: formatPath(path), problem: p}
	return false
}

// formatPath renders segments as the API's field paths: a.b, a[2].c, [0].
func formatPath(segs []segment) string {
	var sb strings.Builder
	for _, seg := range segs {
		if !seg.isKey {
			sb.WriteString("[" + strconv.Itoa(seg.index) + "]")
			continue
		}
		if sb.Len() > 0 {
			sb.WriteByte('.')
		}
		sb.WriteString(readableKey(seg.key))
	}
	if sb.Len() == 0 {
		return "body"
	}
	return sb.String()
}

// readableKey decodes a member name for an error message: what cannot be shown
// (NUL, invalid UTF-8, unpaired surrogates, which Go already turns into U+FFFD)
// becomes U+FFFD, and a long name is cut.
func readableKey(raw []byte) string {
	var k string
	quoted := make([]byte, 0, len(raw)+2)
	quoted = append(append(append(quoted, '"'), raw...), '"')
	if err := json.Unmarshal(quoted, &k); err != nil {
		k = string(raw)
	}
	return SafeAttr(k)
}

// safeAttr makes a client's name showable in an error: NUL and other control
// characters and invalid UTF-8 become U+FFFD, and a long name is cut.
func SafeAttr(k string) string {
	k = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '\uFFFD'
		}
		return r
	}, strings.ToValidUTF8(k, "\uFFFD"))
	if utf8.RuneCountInString(k) > maxAttrRunes {
		k = string([]rune(k)[:maxAttrRunes]) + "…"
	}
	return k
}

// storableText reports whether a string from a URL or header can be stored: valid
// UTF-8 and no NUL (PostgreSQL refuses both in text).
func StorableText(v string) bool {
	return utf8.ValidString(v) && strings.IndexByte(v, 0) < 0
}
