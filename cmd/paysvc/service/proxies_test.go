package service

import (
	"net/netip"
	"reflect"
	"testing"
)

// PAYSVC_TRUSTED_PROXIES takes CIDRs and bare addresses; anything else names itself.
func TestParseProxies(t *testing.T) {
	t.Parallel()
	got, err := parseProxies(" 10.0.0.0/8, 192.168.1.7 ,::ffff:172.16.0.1, 2001:db8::/32,,")
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.1.7/32"),
		netip.MustParsePrefix("172.16.0.1/32"), netip.MustParsePrefix("2001:db8::/32")}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if none, err := parseProxies(""); err != nil || len(none) != 0 {
		t.Fatalf("empty: %v %v", none, err)
	}
	if _, err := parseProxies("10.0.0.0/33"); err == nil {
		t.Fatal("a bad prefix was accepted")
	}
}
