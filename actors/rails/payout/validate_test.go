package payout

import (
	"errors"
	"testing"
)

func TestValidate(t *testing.T) {
	t.Parallel()
	const phoneMsg = "account must be a phone number in international format, e.g. 254712345678"
	cases := []struct {
		name                                 string
		provider, account, accountType, bank string
		status, accName, desc                string
	}{
		{"MpesaB2C_Success", ProviderMpesaB2C, "254712345678", "", "", StatusSuccess, "SANDBOX USER 5678", ""},
		{"MpesaB2C_Airtel2541_Success", ProviderMpesaB2C, "254112349876", "", "", StatusSuccess, "SANDBOX USER 9876", ""},
		{"Airtime_Success", ProviderAirtime, "254722000001", "", "", StatusSuccess, "SANDBOX USER 0001", ""},
		{"MpesaB2C_LocalFormat", ProviderMpesaB2C, "0712345678", "", "", StatusInvalidAccount, "", phoneMsg},
		{"MpesaB2C_Plus", ProviderMpesaB2C, "+254712345678", "", "", StatusInvalidAccount, "", phoneMsg},
		{"MpesaB2C_TooLong", ProviderMpesaB2C, "2547123456789", "", "", StatusInvalidAccount, "", phoneMsg},
		{"MpesaB2C_NotMobile", ProviderMpesaB2C, "254201234567", "", "", StatusInvalidAccount, "", phoneMsg},
		{"Airtime_Letters", ProviderAirtime, "25471234567a", "", "", StatusInvalidAccount, "", phoneMsg},
		{"MpesaB2C_Magic0011", ProviderMpesaB2C, "254712340011", "", "", StatusInvalidAccount, "", "No such account at the provider"},
		{"Airtime_Magic0011", ProviderAirtime, "254712340011", "", "", StatusInvalidAccount, "", "No such account at the provider"},
		{"MpesaB2C_OtherMagicValidates", ProviderMpesaB2C, "254712340014", "", "", StatusSuccess, "SANDBOX USER 0014", ""},

		{"MpesaB2B_PayBill", ProviderMpesaB2B, "247247", AccountTypePayBill, "", StatusSuccess, "SANDBOX BUSINESS 247247", ""},
		{"MpesaB2B_Till", ProviderMpesaB2B, "12345", AccountTypeTillNumber, "", StatusSuccess, "SANDBOX BUSINESS 12345", ""},
		{"MpesaB2B_NoType", ProviderMpesaB2B, "247247", "", "", StatusInvalidAccountType, "", "account_type must be PayBill or TillNumber for MPESA-B2B"},
		{"MpesaB2B_WrongCaseType", ProviderMpesaB2B, "247247", "paybill", "", StatusInvalidAccountType, "", "account_type must be PayBill or TillNumber for MPESA-B2B"},
		{"MpesaB2B_TypeBeforeAccount", ProviderMpesaB2B, "x", "Bank", "", StatusInvalidAccountType, "", "account_type must be PayBill or TillNumber for MPESA-B2B"},
		{"MpesaB2B_TooShort", ProviderMpesaB2B, "1234", AccountTypePayBill, "", StatusInvalidAccount, "", "account must be a PayBill number of 5 to 7 digits"},
		{"MpesaB2B_TooLong", ProviderMpesaB2B, "12345678", AccountTypeTillNumber, "", StatusInvalidAccount, "", "account must be a TillNumber number of 5 to 7 digits"},
		{"MpesaB2B_Magic0011", ProviderMpesaB2B, "1230011", AccountTypePayBill, "", StatusInvalidAccount, "", "No such account at the provider"},

		{"Pesalink_Success", ProviderPesalink, "1234567890", "", "68", StatusSuccess, "SANDBOX ACCOUNT HOLDER 7890", ""},
		{"RTGS_Success20Digits", ProviderRTGS, "12345678901234567890", "", "01", StatusSuccess, "SANDBOX ACCOUNT HOLDER 7890", ""},
		{"Pesalink_NoBankCode", ProviderPesalink, "1234567890", "", "", StatusInvalidBankCode, "", "bank_code is required for PESALINK"},
		{"RTGS_UnknownBankCode", ProviderRTGS, "1234567890", "", "99", StatusInvalidBankCode, "", `bank_code "99" is not a known Kenyan bank code`},
		{"Pesalink_BankBeforeAccount", ProviderPesalink, "x", "", "999", StatusInvalidBankCode, "", `bank_code "999" is not a known Kenyan bank code`},
		{"Pesalink_TooShort", ProviderPesalink, "12345", "", "68", StatusInvalidAccount, "", "account must be a bank account number of 6 to 20 digits"},
		{"RTGS_TooLong", ProviderRTGS, "123456789012345678901", "", "68", StatusInvalidAccount, "", "account must be a bank account number of 6 to 20 digits"},
		{"Pesalink_Letters", ProviderPesalink, "12345A7890", "", "68", StatusInvalidAccount, "", "account must be a bank account number of 6 to 20 digits"},
		{"Pesalink_Magic0011", ProviderPesalink, "9876540011", "", "11", StatusInvalidAccount, "", "No such account at the provider"},

		{"P2P_Unsupported", "P2P", "ABC123", "", "", StatusUnsupportedProvider, "", `provider "P2P" does not support account validation`},
		{"Intasend_Unsupported", "INTASEND", "ABC123", "", "", StatusUnsupportedProvider, "", `provider "INTASEND" does not support account validation`},
		{"LowerCaseProvider_Unsupported", "mpesa-b2c", "254712345678", "", "", StatusUnsupportedProvider, "", `provider "mpesa-b2c" does not support account validation`},
		{"EmptyProvider_Unsupported", "", "254712345678", "", "", StatusUnsupportedProvider, "", `provider "" does not support account validation`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got := Validate(c.provider, c.account, c.accountType, c.bank)
			want := Validation{Account: c.account, Name: c.accName, Status: c.status, Description: c.desc}
			if got != want {
				t.Fatalf("Validate(%q, %q, %q, %q) =\n %+v, want\n %+v", c.provider, c.account, c.accountType, c.bank, got, want)
			}

			// ValidAccount is the format half of Validate: it fails exactly
			// when Validate fails for a reason other than the magic account.
			err := ValidAccount(c.provider, c.account, c.accountType, c.bank)
			formatOK := c.status == StatusSuccess || c.desc == "No such account at the provider"
			if formatOK {
				if err != nil {
					t.Fatalf("ValidAccount = %v, want nil", err)
				}
				return
			}
			var ae *AccountError
			if !errors.As(err, &ae) {
				t.Fatalf("ValidAccount = %v (%T), want an *AccountError", err, err)
			}
			if ae.Error() != c.desc || ae.Status != c.status {
				t.Fatalf("ValidAccount = %q (status %s), want %q (status %s)", ae.Error(), ae.Status, c.desc, c.status)
			}
		})
	}
}

func TestValidAccount_NamesTheField(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		provider, account, accountType, bank, field string
	}{
		{ProviderMpesaB2C, "0712", "", "", "account"},
		{ProviderMpesaB2B, "12345", "Phone", "", "account_type"},
		{ProviderMpesaB2B, "12", AccountTypePayBill, "", "account"},
		{ProviderRTGS, "1234567", "", "", "bank_code"},
		{ProviderRTGS, "12", "", "68", "account"},
		{"P2P", "x", "", "", "provider"},
	} {
		err := ValidAccount(c.provider, c.account, c.accountType, c.bank)
		var ae *AccountError
		if !errors.As(err, &ae) || ae.Field != c.field {
			t.Errorf("ValidAccount(%q, %q, %q, %q) = %v, want an error on %s", c.provider, c.account, c.accountType, c.bank, err, c.field)
		}
	}
}
