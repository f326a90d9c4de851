package payout

import (
	"fmt"
	"strings"
)

// Providers the sandbox rail pays out through (the provider of a payment file).
const (
	ProviderMpesaB2C = "MPESA-B2C"
	ProviderMpesaB2B = "MPESA-B2B"
	ProviderPesalink = "PESALINK"
	ProviderAirtime  = "AIRTIME"
	ProviderRTGS     = "RTGS"
)

// IsProvider reports whether provider is one of the rail's providers. P2P
// (INTASEND) is not: the engine handles it without a rail.
func IsProvider(provider string) bool {
	switch provider {
	case ProviderMpesaB2C, ProviderMpesaB2B, ProviderPesalink, ProviderAirtime, ProviderRTGS:
		return true
	}
	return false
}

// Account types of MPESA-B2B recipients (the transaction's account_type),
// spelled as the API takes them.
const (
	AccountTypePayBill    = "PayBill"
	AccountTypeTillNumber = "TillNumber"
)

// Statuses of a Validation.
const (
	StatusSuccess             = "SUCCESS"
	StatusInvalidAccount      = "INVALID_ACCOUNT"
	StatusUnsupportedProvider = "UNSUPPORTED_PROVIDER"
	StatusInvalidBankCode     = "INVALID_BANK_CODE"
	StatusInvalidAccountType  = "INVALID_ACCOUNT_TYPE"
)

// Validation is the answer of POST /api/v1/send-money/validate-account/.
type Validation struct {
	Account     string `json:"account"`
	Name        string `json:"name"`
	Status      string `json:"status"`
	Description string `json:"description,omitempty"`
}

// AccountError is a recipient that cannot be paid through a provider, whatever the
// provider would answer: an unsupported provider or a malformed field. Message
// names the field and is fit to show to the merchant as it is.
type AccountError struct {
	Field   string // "provider", "account", "account_type" or "bank_code"
	Status  string // the Validation status it stands for (StatusInvalidAccount, ...)
	Message string
}

func (e *AccountError) Error() string { return e.Message }

// ValidAccount checks the format of a recipient for provider, as the API does for
// every transaction of a payment file at initiation; it returns an *AccountError
// naming the bad field, or nil. It does not look the account up: the sandbox's
// magic accounts are well formed and pass. P2P is not a rail provider and is
// refused here: the API checks a P2P destination wallet itself.
func ValidAccount(provider, account, accountType, bankCode string) error {
	if err := checkAccount(provider, account, accountType, bankCode); err != nil {
		return err
	}
	return nil
}

// Validate looks a recipient up as the provider would and answers with its
// registered name (Status SUCCESS) or with an error status and a description.
// In the sandbox the registered name is derived from the account, and an account
// ending in SuffixInvalidAccount does not exist (INVALID_ACCOUNT). P2P is not
// supported (UNSUPPORTED_PROVIDER): the API validates a wallet destination itself.
func Validate(provider, account, accountType, bankCode string) Validation {
	v := Validation{Account: account}
	if err := checkAccount(provider, account, accountType, bankCode); err != nil {
		v.Status, v.Description = err.Status, err.Message
		return v
	}
	if strings.HasSuffix(account, SuffixInvalidAccount) {
		v.Status, v.Description = StatusInvalidAccount, "No such account at the provider"
		return v
	}
	v.Status, v.Name = StatusSuccess, registeredName(provider, account)
	return v
}

// checkAccount is the format check shared by Validate and ValidAccount.
func checkAccount(provider, account, accountType, bankCode string) *AccountError {
	switch provider {
	case ProviderMpesaB2C, ProviderAirtime:
		if !isKenyanPhone(account) {
			return &AccountError{Field: "account", Status: StatusInvalidAccount,
				Message: "account must be a phone number in international format, e.g. 254712345678"}
		}
	case ProviderMpesaB2B:
		if accountType != AccountTypePayBill && accountType != AccountTypeTillNumber {
			return &AccountError{Field: "account_type", Status: StatusInvalidAccountType,
				Message: fmt.Sprintf("account_type must be %s or %s for %s", AccountTypePayBill, AccountTypeTillNumber, provider)}
		}
		if !isDigits(account, 5, 7) {
			return &AccountError{Field: "account", Status: StatusInvalidAccount,
				Message: fmt.Sprintf("account must be a %s number of 5 to 7 digits", accountType)}
		}
	case ProviderPesalink, ProviderRTGS:
		if bankCode == "" {
			return &AccountError{Field: "bank_code", Status: StatusInvalidBankCode,
				Message: fmt.Sprintf("bank_code is required for %s", provider)}
		}
		if _, ok := BankByCode(bankCode); !ok {
			return &AccountError{Field: "bank_code", Status: StatusInvalidBankCode,
				Message: fmt.Sprintf("bank_code %q is not a known Kenyan bank code", bankCode)}
		}
		if !isDigits(account, 6, 20) {
			return &AccountError{Field: "account", Status: StatusInvalidAccount,
				Message: "account must be a bank account number of 6 to 20 digits"}
		}
	default:
		return &AccountError{Field: "provider", Status: StatusUnsupportedProvider,
			Message: fmt.Sprintf("provider %q does not support account validation", provider)}
	}
	return nil
}

// registeredName is the sandbox's registered name of a well-formed account.
func registeredName(provider, account string) string {
	switch provider {
	case ProviderMpesaB2B:
		return "SANDBOX BUSINESS " + account
	case ProviderPesalink, ProviderRTGS:
		return "SANDBOX ACCOUNT HOLDER " + last4(account)
	default: // phones
		return "SANDBOX USER " + last4(account)
	}
}

// isKenyanPhone: 12 digits starting 2547 or 2541 (Safaricom, Airtel and Telkom
// mobile numbers in international format, without the +).
func isKenyanPhone(s string) bool {
	return isDigits(s, 12, 12) && (strings.HasPrefix(s, "2547") || strings.HasPrefix(s, "2541"))
}

// isDigits reports whether s is lo to hi ASCII digits.
func isDigits(s string, lo, hi int) bool {
	if len(s) < lo || len(s) > hi {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func last4(s string) string {
	if len(s) <= 4 {
		return s
	}
	return s[len(s)-4:]
}
