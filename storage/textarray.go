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
func (a textArray) Value() (driver.Value, error) {
	n := 2
	for _, b := range a {
		n += len(b) + 3
	}
	out := make([]byte, 0, n+n/8)
	out = append(out, '{')
	for i, b := range a {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, '"')
		for _, c := range b {
			if c == '"' || c == '\\' {
				out = append(out, '\\')
			}
			out = append(out, c)
		}
		out = append(out, '"')
	}
	return append(out, '}'), nil
}
