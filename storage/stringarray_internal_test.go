package storage

import (
	"testing"

	"github.com/lib/pq"
)

// stringArray writes the literal pq.StringArray writes (as bytes, not a string),
// and NULL for a nil array.
func TestStringArrayIsPQStringArray(t *testing.T) {
	for _, a := range [][]string{
		{}, {""}, {"a"}, {"a", "b"}, {`quo"te`, `back\slash`, `both\"`, "{,}", "NULL", "caf\u00e9", " spaced ", "\t"},
		{"12.50", "2026-11-26T16:28:48.055541Z", "MER3FNQYTUCM"},
	} {
		want, err := pq.StringArray(a).Value()
		if err != nil {
			t.Fatal(err)
		}
		got, err := stringArray(a).Value()
		if err != nil {
			t.Fatal(err)
		}
		b, ok := got.([]byte)
		if !ok || string(b) != want.(string) {
			t.Errorf("%q: got %v, want %q", a, got, want)
		}
	}
	if v, err := stringArray(nil).Value(); v != nil || err != nil {
		t.Errorf("nil array: %v, %v; want NULL", v, err)
	}
}

func BenchmarkStringArray(b *testing.B) {
	a := make([]string, 96)
	for i := range a {
		a[i] = "4f9c0e8e-7d1e-4b7a-9f5e-1c2d3e4f5a6b"
	}
	b.Run("stringArray", func(b *testing.B) {
		for b.Loop() {
			_, _ = stringArray(a).Value()
		}
	})
	b.Run("pq.StringArray", func(b *testing.B) {
		for b.Loop() {
			_, _ = pq.StringArray(a).Value()
		}
	})
}
