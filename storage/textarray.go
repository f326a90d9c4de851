package storage

import "database/sql/driver"

// textArray sends byte strings that are UTF-8 text (the JSON of replies and
// events) as a PostgreSQL text[] literal, built in one buffer. pq.ByteaArray would
// write every byte as two hex digits, and pq.StringArray needs each []byte copied
// into a string first: on the commit path, the largest allocator of the service,
// that is one more copy of every reply and event (migration 0035 says why).
//
// The bytes are not checked here: PostgreSQL refuses invalid UTF-8 or a NUL in
// text with SQLSTATE 22021, a data error, so the engine sets that command aside
// and answers it like any other that fails on its own, and the partition goes on.
type textArray [][]byte

// Value implements driver.Valuer: {"a","b"} with '"' and '\' escaped, returned as
// []byte, which lib/pq sends as it is for a text[] parameter.
func (a textArray) Value() (driver.Value, error) { return arrayLiteral(a), nil }

// stringArray is pq.StringArray for the commit's arguments, built the same way as
// textArray: sized once and returned as []byte. pq.StringArray grows its buffer
// from three bytes an element and copies it into a string at the end; its Value
// was 2.5% of the service's CPU under STK load, for the ids, merchants and amounts
// of every row of a commit (docs/benchmarks-history.md). A nil array is NULL,
// as with pq.StringArray.
type stringArray []string

// Value implements driver.Valuer: {"a","b"} with '"' and '\' escaped.
func (a stringArray) Value() (driver.Value, error) {
	if a == nil {
		return nil, nil
	}
	return arrayLiteral(a), nil
}

// arrayLiteral is the text[] literal of a: every element quoted, '"' and '\'
// escaped, in one buffer sized for the usual case of few escapes.
func arrayLiteral[E string | []byte](a []E) []byte {
	n := 2
	for _, e := range a {
		n += len(e) + 3
	}
	out := make([]byte, 0, n+n/8)
	out = append(out, '{')
	for i, e := range a {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, '"')
		for j := 0; j < len(e); j++ {
			if c := e[j]; c == '"' || c == '\\' {
				out = append(out, '\\')
			}
			out = append(out, e[j])
		}
		out = append(out, '"')
	}
	return append(out, '}')
}
