package tariff

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"paysvc/actors/values/money"
)

var m = money.MustParse

func TestDefaultSchedule(t *testing.T) {
	t.Parallel()
	s := DefaultSchedule()
	const want = "CARD=3.5%;M-PESA=1.5%;PAYOUT-AIRTIME=0%;PAYOUT-MPESA-B2B=1%,min=10.00,max=200.00;" +
		"PAYOUT-MPESA-B2C=1%,min=10.00,max=100.00;PAYOUT-P2P=0%;PAYOUT-PESALINK=0%+50.00;PAYOUT-RTGS=0%+500.00;" +
		"PESALINK=0.5%,min=10.00,max=200.00"
	if got := s.String(); got != want {
		t.Fatalf("DefaultSchedule().String() = %q, want %q", got, want)
	}
	back, err := ParseSchedule(want)
	if err != nil || back.String() != want {
		t.Fatalf("ParseSchedule(%q) = %v, %v", want, back, err)
	}
	r, ok := s.Rule(MethodMpesa)
	if !ok || r.Percent != "0.015" || !r.Fixed.IsZero() || !r.Min.IsZero() || !r.Max.IsZero() {
		t.Fatalf("Rule(M-PESA) = %+v, %v", r, ok)
	}
}

func TestFee(t *testing.T) {
	t.Parallel()
	custom, err := ParseSchedule("CARD=1%+5.00,min=6.00,max=8.00;M-PESA=0.5%;PESALINK=0%+25.00")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		s      *Schedule
		method string
		amount string
		want   string
	}{
		{"mpesa 1000", DefaultSchedule(), MethodMpesa, "1000", "15.00"},
		{"mpesa half-up 15.015", DefaultSchedule(), MethodMpesa, "1001.00", "15.02"},
		{"mpesa below half 15.0045", DefaultSchedule(), MethodMpesa, "1000.30", "15.00"},
		{"mpesa above half 15.0051", DefaultSchedule(), MethodMpesa, "1000.34", "15.01"},
		{"mpesa tiny rounds to zero", DefaultSchedule(), MethodMpesa, "0.33", "0.00"},
		{"mpesa tiny rounds up", DefaultSchedule(), MethodMpesa, "0.34", "0.01"},
		{"mpesa spec max", DefaultSchedule(), MethodMpesa, "150000", "2250.00"},
		{"pesalink min", DefaultSchedule(), MethodPesalink, "1000", "10.00"},
		{"pesalink at min", DefaultSchedule(), MethodPesalink, "2000", "10.00"},
		{"pesalink between", DefaultSchedule(), MethodPesalink, "10000", "50.00"},
		{"pesalink at cap", DefaultSchedule(), MethodPesalink, "40000", "200.00"},
		{"pesalink capped", DefaultSchedule(), MethodPesalink, "50000", "200.00"},
		{"card", DefaultSchedule(), MethodCard, "1000", "35.00"},
		{"card half-up 0.035", DefaultSchedule(), MethodCard, "1.00", "0.04"},
		{"exact half 0.005", custom, MethodMpesa, "1.00", "0.01"},
		{"exact half 0.015", custom, MethodMpesa, "3.00", "0.02"},
		{"below half 0.0045", custom, MethodMpesa, "0.90", "0.00"},
		{"fixed raised to min", custom, MethodCard, "50", "6.00"},
		{"fixed plus percent", custom, MethodCard, "200", "7.00"},
		{"fixed plus percent capped", custom, MethodCard, "1000", "8.00"},
		{"fixed only", custom, MethodPesalink, "123456.78", "25.00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.s.Fee(tt.method, m(tt.amount))
			if err != nil || got.String() != tt.want {
				t.Fatalf("Fee(%s, %s) = %s, %v; want %s", tt.method, tt.amount, got, err, tt.want)
			}
		})
	}
}

// TestPayoutFee: a payout method the schedule leaves out is priced by the
// default schedule, one it has by its own rule.
func TestPayoutFee(t *testing.T) {
	t.Parallel()
	collectionsOnly, err := ParseSchedule("M-PESA=2%")
	if err != nil {
		t.Fatal(err)
	}
	ownB2C, err := ParseSchedule("PAYOUT-MPESA-B2C=0%+7.00")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		s        *Schedule
		provider string
		amount   string
		want     string
	}{
		{"default b2c min", DefaultSchedule(), "MPESA-B2C", "100", "10.00"},
		{"default b2c cap", DefaultSchedule(), "MPESA-B2C", "150000", "100.00"},
		{"left out falls back", collectionsOnly, "RTGS", "1000", "500.00"},
		{"nil schedule is the default", nil, "PESALINK", "1000", "50.00"},
		{"own rule", ownB2C, "MPESA-B2C", "100", "7.00"},
		{"own rule leaves others to the default", ownB2C, "MPESA-B2B", "5000", "50.00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.s.PayoutFee(tt.provider, m(tt.amount))
			if err != nil || got.String() != tt.want {
				t.Fatalf("PayoutFee(%s, %s) = %s, %v; want %s", tt.provider, tt.amount, got, err, tt.want)
			}
		})
	}
	if _, err := DefaultSchedule().PayoutFee("PIGEON", m("10")); !errors.Is(err, ErrUnknownMethod) {
		t.Fatalf("PayoutFee of an unknown provider: %v, want ErrUnknownMethod", err)
	}
}

func TestFeeErrors(t *testing.T) {
	t.Parallel()
	pesalinkOnly, err := ParseSchedule("PESALINK=0.5%")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		s       *Schedule
		method  string
		amount  money.Amount
		wantErr error
		wantMsg string
	}{
		{"unknown method", DefaultSchedule(), "MPESA", m("100"), ErrUnknownMethod, `"MPESA"`},
		{"lower case method", DefaultSchedule(), "m-pesa", m("100"), ErrUnknownMethod, `"m-pesa"`},
		{"method not configured", pesalinkOnly, MethodMpesa, m("100"), ErrUnknownMethod, `"M-PESA"`},
		{"nil schedule", nil, MethodMpesa, m("100"), ErrUnknownMethod, `"M-PESA"`},
		{"zero amount", DefaultSchedule(), MethodMpesa, money.Zero(), ErrInvalidAmount, "0.00"},
		{"zero value amount", DefaultSchedule(), MethodMpesa, money.Amount{}, ErrInvalidAmount, "0.00"},
		{"negative amount", DefaultSchedule(), MethodCard, m("-5"), ErrInvalidAmount, "-5.00"},
		{"long method clipped", DefaultSchedule(), strings.Repeat("X", 1000), m("1"), ErrUnknownMethod, "(1000 bytes)"},
		{"escaped method clipped", DefaultSchedule(), strings.Repeat("\xa1", 1000), m("1"), ErrUnknownMethod, `"\xa1\xa1\xa1\xa1\xa1\xa1\xa1\xa1\xa1\xa1"... (1000 bytes)`},
		{"control characters escaped", DefaultSchedule(), "M-PESA\nlevel=error", m("1"), ErrUnknownMethod, `"M-PESA\nlevel=error"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := tt.s.Fee(tt.method, tt.amount)
			if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("Fee error = %v; want %v containing %q", err, tt.wantErr, tt.wantMsg)
			}
			if len(err.Error()) > 150 {
				t.Fatalf("error message is %d bytes", len(err.Error()))
			}
		})
	}
}

func TestQuote(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                 string
		method, tariff       string
		amount               string
		value, charges, nett string
	}{
		{"mpesa business pays", MethodMpesa, BusinessPays, "1000", "1000.00", "15.00", "985.00"},
		{"mpesa customer pays", MethodMpesa, CustomerPays, "1000", "1015.00", "15.00", "1000.00"},
		{"empty tariff is business pays", MethodMpesa, "", "1000", "1000.00", "15.00", "985.00"},
		{"customer pays fee on requested amount", MethodMpesa, CustomerPays, "1001", "1016.02", "15.02", "1001.00"},
		{"pesalink min business", MethodPesalink, BusinessPays, "10.01", "10.01", "10.00", "0.01"},
		{"pesalink min customer", MethodPesalink, CustomerPays, "10.00", "20.00", "10.00", "10.00"},
		{"pesalink cap customer", MethodPesalink, CustomerPays, "100000", "100200.00", "200.00", "100000.00"},
		{"card business", MethodCard, BusinessPays, "12950.00", "12950.00", "453.25", "12496.75"},
		{"zero fee", MethodMpesa, BusinessPays, "0.01", "0.01", "0.00", "0.01"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q, err := DefaultSchedule().Quote(tt.method, tt.tariff, m(tt.amount))
			if err != nil {
				t.Fatal(err)
			}
			if q.Value.String() != tt.value || q.Charges.String() != tt.charges || q.NetAmount.String() != tt.nett {
				t.Fatalf("Quote = value %s charges %s net %s; want %s %s %s", q.Value, q.Charges, q.NetAmount, tt.value, tt.charges, tt.nett)
			}
			if !q.Value.Equal(q.NetAmount.Add(q.Charges)) {
				t.Fatalf("Value %s != NetAmount %s + Charges %s", q.Value, q.NetAmount, q.Charges)
			}
		})
	}
}

func TestQuoteErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		method, tariff string
		amount         money.Amount
		wantErr        error
		wantMsg        string
	}{
		{"unknown tariff", MethodMpesa, "SPLIT", m("100"), ErrUnknownTariff, `"SPLIT"`},
		{"lower case tariff", MethodMpesa, "business-pays", m("100"), ErrUnknownTariff, `"business-pays"`},
		{"misspelled like the API field", MethodMpesa, "CUSTOMER_PAYS", m("100"), ErrUnknownTariff, `"CUSTOMER_PAYS"`},
		{"unknown method", "AIRTEL", BusinessPays, m("100"), ErrUnknownMethod, `"AIRTEL"`},
		{"fee equals amount", MethodPesalink, BusinessPays, m("10.00"), ErrFeeExceedsAmount, "fee 10.00 on 10.00 leaves 0.00"},
		{"fee above amount", MethodPesalink, "", m("5.00"), ErrFeeExceedsAmount, "leaves -5.00"},
		{"zero amount", MethodMpesa, CustomerPays, money.Zero(), ErrInvalidAmount, "0.00"},
		{"negative amount", MethodMpesa, BusinessPays, m("-100"), ErrInvalidAmount, "-100.00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q, err := DefaultSchedule().Quote(tt.method, tt.tariff, tt.amount)
			if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("Quote error = %v; want %v containing %q", err, tt.wantErr, tt.wantMsg)
			}
			if !q.Value.IsZero() || !q.Charges.IsZero() || !q.NetAmount.IsZero() {
				t.Fatalf("failed Quote returned %+v", q)
			}
		})
	}
}

// TestDocExamples pins the numbers docs/fees.md shows, so the document
// cannot drift from the code unnoticed.
func TestDocExamples(t *testing.T) {
	t.Parallel()
	s, fx := DefaultSchedule(), DefaultRates()
	quote := func(method, tariff, amount string) string {
		q, err := s.Quote(method, tariff, m(amount))
		if err != nil {
			return err.Error()
		}
		return fmt.Sprintf("%s/%s/%s", q.Value, q.Charges, q.NetAmount)
	}
	kes := func(cur, amount string) string {
		k, rate, err := fx.ToKES(cur, m(amount))
		if err != nil {
			return err.Error()
		}
		return k.String() + "@" + rate
	}
	tests := []struct{ got, want string }{
		{quote(MethodMpesa, BusinessPays, "1000"), "1000.00/15.00/985.00"},
		{quote(MethodMpesa, CustomerPays, "1000"), "1015.00/15.00/1000.00"},
		{quote(MethodMpesa, BusinessPays, RoundUpShillings(m("999.30")).String()), "1000.00/15.00/985.00"},
		{quote(MethodMpesa, CustomerPays, "1001"), "1016.02/15.02/1001.00"},
		{quote(MethodMpesa, BusinessPays, "1000.30"), "1000.30/15.00/985.30"},
		{quote(MethodPesalink, BusinessPays, "1000"), "1000.00/10.00/990.00"},
		{quote(MethodPesalink, BusinessPays, "20000"), "20000.00/100.00/19900.00"},
		{quote(MethodPesalink, BusinessPays, "50000"), "50000.00/200.00/49800.00"},
		{quote(MethodCard, BusinessPays, "5000"), "5000.00/175.00/4825.00"},
		{kes("USD", "100"), "12950.00@129.5"},
		{kes("EUR", "100"), "15120.00@151.2"},
		{kes("GBP", "100"), "17480.00@174.8"},
		{kes("USD", "10.01"), "1296.30@129.5"},
		{quote(MethodCard, CustomerPays, "12950.00"), "13403.25/453.25/12950.00"},
	}
	for i, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("example %d: got %s, want %s", i, tt.got, tt.want)
		}
	}

	// The "Amount | M-PESA | PESALINK | CARD" table.
	table := map[string][3]string{
		"1000":  {"15.00", "10.00", "35.00"},
		"5000":  {"75.00", "25.00", "175.00"},
		"20000": {"300.00", "100.00", "700.00"},
		"50000": {"750.00", "200.00", "1750.00"},
		"10":    {"0.15", "10.00", "0.35"}, // the prose: KES 10 by M-Pesa costs 0.15
	}
	for amount, fees := range table {
		for i, method := range []string{MethodMpesa, MethodPesalink, MethodCard} {
			if got, err := s.Fee(method, m(amount)); err != nil || got.String() != fees[i] {
				t.Errorf("Fee(%s, %s) = %s, %v; docs say %s", method, amount, got, err, fees[i])
			}
		}
	}
	if q, err := s.Quote(MethodPesalink, BusinessPays, m("10.00")); !errors.Is(err, ErrFeeExceedsAmount) {
		t.Errorf("PESALINK 10.00 BUSINESS-PAYS = %+v, %v; docs say it is refused", q, err)
	}
	for in, want := range map[string]string{"10.01": "11.00", "10.00": "10.00", "999.30": "1000.00"} {
		if got := RoundUpShillings(m(in)).String(); got != want {
			t.Errorf("RoundUpShillings(%s) = %s; docs say %s", in, got, want)
		}
	}
	if got, err := s.Fee(MethodMpesa, m("0.33")); err != nil || !got.IsZero() {
		t.Errorf("Fee(M-PESA, 0.33) = %s, %v; docs say 0.00", got, err)
	}
}

func TestParseSchedule(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"M-PESA=1.5%+0.00,min=0;CARD=3.5%;PESALINK=0.5%,min=10.00,max=200.00", "CARD=3.5%;M-PESA=1.5%;PESALINK=0.5%,min=10.00,max=200.00"},
		{"M-PESA=1.5%", "M-PESA=1.5%"},
		{" M-PESA = 1.5 % + 2 , min = 3 , max = 40 ; ", "M-PESA=1.5%+2.00,min=3.00,max=40.00"},
		{"CARD=3.5%;;", "CARD=3.5%"},
		{"CARD=0%+25", "CARD=0%+25.00"},
		{"CARD=0%", "CARD=0%"},
		{"CARD=100%", "CARD=100%"},
		{"CARD=100.000%", "CARD=100%"},
		{"CARD=0.25%", "CARD=0.25%"},
		{"CARD=0.0001%", "CARD=0.0001%"},
		{"CARD=01.50%", "CARD=1.5%"},
		{"CARD=2.9%+0.30", "CARD=2.9%+0.30"},
		{"CARD=1%,max=0", "CARD=1%"},
		{"CARD=1%,max=5,min=5", "CARD=1%,min=5.00,max=5.00"},
		{"CARD=1%,min=0.00", "CARD=1%"},
		{"CARD=1." + strings.Repeat("0", 15) + "1%", "CARD=1." + strings.Repeat("0", 15) + "1%"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			s, err := ParseSchedule(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.String(); got != tt.want {
				t.Fatalf("String() = %q, want %q", got, tt.want)
			}
			back, err := ParseSchedule(s.String())
			if err != nil || back.String() != tt.want {
				t.Fatalf("round trip = %v, %v", back, err)
			}
		})
	}
}

func TestParseScheduleErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, wantMsg string }{
		{"", `no entries in ""`},
		{" ; ;", "no entries"},
		{"MPESA=1.5%", `method "MPESA" is not one of CARD, M-PESA, PESALINK`},
		{"m-pesa=1.5%", `method "m-pesa"`},
		{"CARD", `entry 1 "CARD": want METHOD=FEE`},
		{"CARD=3.5", `fee "3.5": want a percentage`},
		{"CARD=", `fee "": want a percentage`},
		{"CARD=%", `percentage "%": empty`},
		{"CARD=abc%", `percentage "abc%": want a plain decimal`},
		{"CARD=-1%", `percentage "-1%"`},
		{"CARD=+1%", `fee "+1%": want a percentage`},
		{"CARD=1e2%", `percentage "1e2%"`},
		{"CARD=.5%", `percentage ".5%"`},
		{"CARD=1.%", `percentage "1.%"`},
		{"CARD=101%", `percentage "101%": above 100%`},
		{"CARD=100.01%", `percentage "100.01%": above 100%`},
		{"CARD=1." + strings.Repeat("0", 16) + "1%", "more than 16 decimal places"},
		{"CARD=1.5%+", `fixed part "": money: invalid amount: empty`},
		{"CARD=1.5%+-1", `fixed part "-1": -1.00 is negative`},
		{"CARD=1.5%+1.234", `fixed part "1.234": money: too many decimal places`},
		{"CARD=1.5%+1+2", `fixed part "1+2"`},
		{"CARD=1.5%,min=5,max=4", "min 5.00 is above max 4.00"},
		{"CARD=1.5%,foo=1", `option "foo=1": want min=AMOUNT or max=AMOUNT`},
		{"CARD=1.5%,min", `option "min": want min=AMOUNT`},
		{"CARD=1.5%,", `option "": want min=AMOUNT`},
		{"CARD=1.5%,min=1,min=2", "option min given twice"},
		{"CARD=1.5%,max=-3", `option "max=-3": -3.00 is negative`},
		{"CARD=1.5%,min=1.001", `option "min=1.001": money: too many decimal places`},
		{"CARD=1.5%;CARD=2%", `entry 2 "CARD=2%": method CARD listed twice`},
		{"CARD=1.5%;M-PESA=x%", `entry 2 "M-PESA=x%"`},
		// P2P files may be in USD: a KES fixed part would be charged in dollars.
		{"PAYOUT-P2P=0%+25.00", "PAYOUT-P2P: only a percentage"},
		{"PAYOUT-P2P=1%,min=5", "PAYOUT-P2P: only a percentage"},
		{"PAYOUT-P2P=1%,max=50", "PAYOUT-P2P: only a percentage"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			s, err := ParseSchedule(tt.in)
			if !errors.Is(err, ErrBadSchedule) || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("ParseSchedule(%q) = %v, %v; want ErrBadSchedule containing %q", tt.in, s, err, tt.wantMsg)
			}
		})
	}
}

func TestNewSchedule(t *testing.T) {
	t.Parallel()
	rules := map[string]Rule{MethodCard: {Percent: "0.0350", Fixed: m("1")}}
	s, err := NewSchedule(rules)
	if err != nil {
		t.Fatal(err)
	}
	rules[MethodCard] = Rule{Percent: "1"} // must not reach s
	rules[MethodMpesa] = Rule{Percent: "0"}
	if got := s.String(); got != "CARD=3.5%+1.00" {
		t.Fatalf("String() = %q after mutating the input map", got)
	}
	if r, _ := s.Rule(MethodCard); r.Percent != "0.035" {
		t.Fatalf("Percent not canonical: %q", r.Percent)
	}

	tests := []struct {
		name    string
		rules   map[string]Rule
		wantMsg string
	}{
		{"nil", nil, "no methods"},
		{"unknown method", map[string]Rule{"PAYPAL": {Percent: "0.01"}}, `method "PAYPAL"`},
		{"empty percent", map[string]Rule{MethodCard: {}}, `CARD: percent rate "": empty`},
		{"percent written as percentage", map[string]Rule{MethodCard: {Percent: "3.5"}}, `percent rate "3.5" is above 1`},
		{"percent with sign", map[string]Rule{MethodCard: {Percent: "-0.01"}}, `percent rate "-0.01"`},
		{"percent with space", map[string]Rule{MethodCard: {Percent: "0.01 "}}, `percent rate "0.01 "`},
		{"percent with percent sign", map[string]Rule{MethodCard: {Percent: "1%"}}, `percent rate "1%"`},
		{"too precise", map[string]Rule{MethodCard: {Percent: "0." + strings.Repeat("1", 19)}}, "more than 18 decimal places"},
		{"negative fixed", map[string]Rule{MethodCard: {Percent: "0", Fixed: m("-1")}}, "fixed -1.00 is negative"},
		{"negative min", map[string]Rule{MethodCard: {Percent: "0", Min: m("-1")}}, "min -1.00 is negative"},
		{"negative max", map[string]Rule{MethodCard: {Percent: "0", Max: m("-1")}}, "max -1.00 is negative"},
		{"min above max", map[string]Rule{MethodCard: {Percent: "0", Min: m("2"), Max: m("1")}}, "min 2.00 is above max 1.00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := NewSchedule(tt.rules)
			if !errors.Is(err, ErrBadSchedule) || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("NewSchedule = %v, %v; want ErrBadSchedule containing %q", s, err, tt.wantMsg)
			}
		})
	}
}

func TestRoundUpShillings(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"10.01", "11.00"},
		{"10.00", "10.00"},
		{"10.99", "11.00"},
		{"10.50", "11.00"},
		{"0.01", "1.00"},
		{"0", "0.00"},
		{"999.30", "1000.00"},
		{"149999.99", "150000.00"},
		{"-10.50", "-10.00"},
		{"-0.01", "0.00"},
		{"999999999999999.01", "1000000000000000.00"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got := RoundUpShillings(m(tt.in))
			if got.String() != tt.want {
				t.Fatalf("RoundUpShillings(%s) = %s, want %s", tt.in, got, tt.want)
			}
			if ref, err := money.ParseRoundUp(tt.in); err == nil && !ref.Equal(got) {
				t.Fatalf("RoundUpShillings(%s) = %s but ParseRoundUp gives %s", tt.in, got, ref)
			}
		})
	}
	// Beyond the parser's 15 digits it still works.
	big := m("999999999999999.99").Add(m("999999999999999.99"))
	if got := RoundUpShillings(big).String(); got != "2000000000000000.00" {
		t.Fatalf("RoundUpShillings(%s) = %s", big, got)
	}
	if got := RoundUpShillings(money.Amount{}).String(); got != "0.00" {
		t.Fatalf("RoundUpShillings(Amount{}) = %s", got)
	}
}

func TestPercentRateConversion(t *testing.T) {
	t.Parallel()
	tests := []struct{ pct, rate string }{
		{"0", "0"},
		{"1.5", "0.015"},
		{"0.5", "0.005"},
		{"3.5", "0.035"},
		{"100", "1"},
		{"10", "0.1"},
		{"0.0001", "0.000001"},
		{"12.345", "0.12345"},
		{"000.50", "0.005"},
	}
	for _, tt := range tests {
		t.Run(tt.pct, func(t *testing.T) {
			t.Parallel()
			r, err := percentToRate(tt.pct)
			if err != nil || r != tt.rate {
				t.Fatalf("percentToRate(%q) = %q, %v; want %q", tt.pct, r, err, tt.rate)
			}
			want, _ := canonRate(tt.pct)
			if p := rateToPercent(r); p != want {
				t.Fatalf("rateToPercent(%q) = %q, want %q", r, p, want)
			}
		})
	}
}

// TestConcurrentUse shares one Schedule and one Rates between goroutines;
// run with -race.
func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	s, fx := DefaultSchedule(), DefaultRates()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 200 {
				amount := money.FromUnits(int64(100000 + i*1000 + j))
				kes, _, err := fx.ToKES("USD", amount)
				if err != nil {
					t.Error(err)
					return
				}
				q, err := s.Quote(knownMethods[j%len(knownMethods)], CustomerPays, kes)
				if err != nil || !q.Value.Equal(q.NetAmount.Add(q.Charges)) {
					t.Errorf("Quote = %+v, %v", q, err)
					return
				}
				_ = s.String() + fx.String()
			}
		})
	}
	wg.Wait()
}
