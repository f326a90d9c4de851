package payout

import (
	"sort"
	"strings"
)

// Bank is a Kenyan bank that PESALINK and RTGS payouts can reach.
type Bank struct {
	BankName string `json:"bank_name"`
	BankCode string `json:"bank_code"`
}

// banks are the two-digit bank codes the Central Bank of Kenya assigns and the
// Kenya Bankers Association publishes in its bank and branch code list (the
// first two digits of a five-digit sort code; PesaLink and RTGS address banks by
// them). The list changes: banks merge, are renamed or licensed, and a code may be
// withdrawn, so it is maintained here and served by the API for clients to fetch
// rather than hard-code. Only codes known to be current are listed; a code that
// is missing makes PESALINK and RTGS payouts to that bank fail validation
// (INVALID_BANK_CODE) until it is added.
var banks = []Bank{
	{BankName: "Kenya Commercial Bank (KCB)", BankCode: "01"},
	{BankName: "Standard Chartered Bank Kenya", BankCode: "02"},
	{BankName: "Absa Bank Kenya", BankCode: "03"},
	{BankName: "Bank of India", BankCode: "05"},
	{BankName: "Bank of Baroda (Kenya)", BankCode: "06"},
	{BankName: "NCBA Bank Kenya", BankCode: "07"},
	{BankName: "Prime Bank", BankCode: "10"},
	{BankName: "Co-operative Bank of Kenya", BankCode: "11"},
	{BankName: "National Bank of Kenya", BankCode: "12"},
	{BankName: "Citibank N.A. Kenya", BankCode: "16"},
	{BankName: "Habib Bank AG Zurich", BankCode: "17"},
	{BankName: "Middle East Bank Kenya", BankCode: "18"},
	{BankName: "Bank of Africa Kenya", BankCode: "19"},
	{BankName: "Consolidated Bank of Kenya", BankCode: "23"},
	{BankName: "Credit Bank", BankCode: "25"},
	{BankName: "Access Bank Kenya", BankCode: "26"},
	{BankName: "Stanbic Bank Kenya", BankCode: "31"},
	{BankName: "African Banking Corporation (ABC Bank)", BankCode: "35"},
	{BankName: "Ecobank Kenya", BankCode: "43"},
	{BankName: "Spire Bank", BankCode: "49"},
	{BankName: "Paramount Bank", BankCode: "50"},
	{BankName: "Kingdom Bank", BankCode: "51"},
	{BankName: "Guaranty Trust Bank Kenya", BankCode: "53"},
	{BankName: "Victoria Commercial Bank", BankCode: "54"},
	{BankName: "Guardian Bank", BankCode: "55"},
	{BankName: "I&M Bank", BankCode: "57"},
	{BankName: "Development Bank of Kenya", BankCode: "59"},
	{BankName: "SBM Bank Kenya", BankCode: "60"},
	{BankName: "Housing Finance Company (HFC)", BankCode: "61"},
	{BankName: "Diamond Trust Bank Kenya", BankCode: "63"},
	{BankName: "Sidian Bank", BankCode: "66"},
	{BankName: "Equity Bank Kenya", BankCode: "68"},
	{BankName: "Family Bank", BankCode: "70"},
	{BankName: "Gulf African Bank", BankCode: "72"},
	{BankName: "First Community Bank", BankCode: "74"},
	{BankName: "DIB Bank Kenya", BankCode: "75"},
	{BankName: "UBA Kenya Bank", BankCode: "76"},
	{BankName: "Kenya Women Microfinance Bank (KWFT)", BankCode: "78"},
}

// sortedBanks is banks by name, built once.
var sortedBanks = func() []Bank {
	s := append([]Bank(nil), banks...)
	sort.Slice(s, func(i, j int) bool { return s[i].BankName < s[j].BankName })
	return s
}()

// Banks returns the Kenyan banks payouts can reach, sorted by name. The slice is
// the caller's to keep or change.
func Banks() []Bank {
	return append([]Bank(nil), sortedBanks...)
}

// MaxBankCodeDigits bounds a bank code as clients may write it: the published
// two digits, with as many leading zeros as a form or spreadsheet adds.
const MaxBankCodeDigits = 10

// BankByCode returns the listed bank a code names, if any. Codes are numbers:
// "2", "02" and "002" all name bank 02 (IntaSend's own examples send codes
// unpadded, and a spreadsheet drops the leading zero), so the code is matched by
// its value. Only digits are a code (no sign, space or exponent), at most
// MaxBankCodeDigits of them. The bank returned carries the published form ("02"),
// which is what payouts store and show.
func BankByCode(code string) (Bank, bool) {
	if code == "" || len(code) > MaxBankCodeDigits {
		return Bank{}, false
	}
	for i := 0; i < len(code); i++ {
		if code[i] < '0' || code[i] > '9' {
			return Bank{}, false
		}
	}
	b, ok := byValue[strings.TrimLeft(code, "0")]
	return b, ok
}

// byValue indexes the banks by their code without leading zeros ("2" for "02").
var byValue = func() map[string]Bank {
	m := make(map[string]Bank, len(banks))
	for _, b := range banks {
		m[strings.TrimLeft(b.BankCode, "0")] = b
	}
	return m
}()
