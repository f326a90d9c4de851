package payout

import (
	"strings"
	"testing"
)

func TestBanks(t *testing.T) {
	t.Parallel()

	t.Run("SortedByName_UniqueNumericCodes", func(t *testing.T) {
		t.Parallel()
		bs := Banks()
		if len(bs) < 30 {
			t.Fatalf("Banks() has %d banks, want at least 30", len(bs))
		}
		codes, names := map[string]bool{}, map[string]bool{}
		for i, b := range bs {
			if i > 0 && bs[i-1].BankName >= b.BankName {
				t.Errorf("not sorted by name: %q before %q", bs[i-1].BankName, b.BankName)
			}
			if len(b.BankCode) != 2 || !isDigits(b.BankCode, 2, 2) {
				t.Errorf("%s: code %q is not two digits", b.BankName, b.BankCode)
			}
			if strings.TrimSpace(b.BankName) != b.BankName || b.BankName == "" {
				t.Errorf("code %s: bad name %q", b.BankCode, b.BankName)
			}
			if codes[b.BankCode] {
				t.Errorf("code %s listed twice", b.BankCode)
			}
			if names[b.BankName] {
				t.Errorf("name %q listed twice", b.BankName)
			}
			codes[b.BankCode], names[b.BankName] = true, true
		}
	})

	t.Run("ReturnsACopy", func(t *testing.T) {
		t.Parallel()
		bs := Banks()
		first := bs[0]
		bs[0] = Bank{BankName: "changed", BankCode: "99"}
		if got := Banks()[0]; got != first {
			t.Fatalf("Banks()[0] = %+v after the caller changed its copy, want %+v", got, first)
		}
	})

	t.Run("BankByCode", func(t *testing.T) {
		t.Parallel()
		for code, word := range map[string]string{
			"01": "KCB", "02": "Standard Chartered", "03": "Absa", "07": "NCBA", "11": "Co-operative",
			"12": "National Bank", "31": "Stanbic", "57": "I&M", "63": "Diamond Trust", "68": "Equity",
			"70": "Family", "72": "Gulf African", "74": "First Community", "76": "UBA",
		} {
			b, ok := BankByCode(code)
			if !ok || b.BankCode != code || !strings.Contains(b.BankName, word) {
				t.Errorf("BankByCode(%q) = %+v, %v; want a bank named like %q", code, b, ok, word)
			}
		}
		// Codes are numbers: unpadded or zero-padded, they name the published code.
		for code, want := range map[string]string{"2": "02", "02": "02", "002": "02", "068": "68", "0000000001": "01", "11": "11"} {
			if b, ok := BankByCode(code); !ok || b.BankCode != want {
				t.Errorf("BankByCode(%q) = %+v, %v; want code %s", code, b, ok, want)
			}
		}
		for _, code := range []string{"", "0", "00", "99", "8", "68 ", " 68", "+68", "-2", "6e1", "6.8", "00000000002", "６８"} {
			if b, ok := BankByCode(code); ok {
				t.Errorf("BankByCode(%q) = %+v, want not found", code, b)
			}
		}
		for _, b := range Banks() {
			if got, ok := BankByCode(b.BankCode); !ok || got != b {
				t.Errorf("BankByCode(%q) = %+v, %v; want %+v", b.BankCode, got, ok, b)
			}
		}
	})
}
