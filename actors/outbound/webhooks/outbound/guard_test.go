package outbound

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"
)

func TestIsForbidden(t *testing.T) {
	cases := []struct {
		ip   string
		want bool
	}{
		// loopback
		{"127.0.0.1", true},
		{"127.255.255.254", true},
		{"::1", true},
		// private
		{"10.0.0.1", true},
		{"10.255.255.255", true},
		{"172.16.0.1", true},
		{"172.31.255.255", true},
		{"192.168.1.1", true},
		{"fc00::1", true},
		{"fd12:3456:789a::1", true},
		// link-local and cloud metadata
		{"169.254.0.1", true},
		{"169.254.169.254", true},
		{"fe80::1", true},
		{"fe80::1%eth0", true},
		{"febf:ffff::1", true},
		// unspecified and "this network"
		{"0.0.0.0", true},
		{"0.1.2.3", true},
		{"::", true},
		// multicast
		{"224.0.0.1", true},
		{"239.255.255.250", true},
		{"ff02::1", true},
		{"ff0e::1", true},
		// CGNAT
		{"100.64.0.1", true},
		{"100.127.255.255", true},
		// reserved and broadcast
		{"240.0.0.1", true},
		{"255.255.255.255", true},
		// special-purpose, benchmarking, documentation
		{"192.0.0.8", true},
		{"192.0.2.1", true},
		{"192.88.99.1", true},
		{"198.18.0.1", true},
		{"198.19.255.255", true},
		{"198.51.100.7", true},
		{"203.0.113.9", true},
		{"100::1", true},
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", true}, // Teredo
		{"2001:db8::1", true},
		// IPv4-mapped IPv6 forms
		{"::ffff:127.0.0.1", true},
		{"::ffff:7f00:1", true},
		{"::ffff:10.0.0.1", true},
		{"::ffff:169.254.169.254", true},
		{"::ffff:192.168.0.1", true},
		{"::ffff:100.64.0.1", true},
		{"::ffff:0.0.0.0", true},
		{"::ffff:224.0.0.1", true},
		// deprecated IPv4-compatible, IPv4-translated, NAT64, 6to4 embeddings
		{"::127.0.0.1", true},
		{"::ffff:0:7f00:1", true},
		{"64:ff9b::127.0.0.1", true},
		{"64:ff9b::169.254.169.254", true},
		{"64:ff9b:1::1", true},
		{"2002:7f00:1::1", true},
		{"2002:a9fe:a9fe::1", true},
		{"fec0::1", true},
		// public
		{"8.8.8.8", false},
		{"1.1.1.1", false},
		{"93.184.216.34", false},
		{"100.63.255.255", false},
		{"100.128.0.0", false},
		{"172.15.255.255", false},
		{"172.32.0.0", false},
		{"169.253.255.255", false},
		{"11.0.0.1", false},
		{"223.255.255.255", false},
		{"198.17.255.255", false},
		{"198.20.0.0", false},
		{"192.0.1.1", false},
		{"2001:1::1", false},
		{"::ffff:8.8.8.8", false},
		{"64:ff9b::8.8.8.8", false},
		{"2002:808:808::1", false},
		{"2001:4860:4860::8888", false},
		{"2606:4700:4700::1111", false},
	}
	for _, c := range cases {
		ip, err := netip.ParseAddr(c.ip)
		if err != nil {
			t.Fatalf("parse %s: %v", c.ip, err)
		}
		if got := isForbidden(ip); got != c.want {
			t.Errorf("isForbidden(%s) = %v, want %v", c.ip, got, c.want)
		}
	}
	if !isForbidden(netip.Addr{}) {
		t.Error("the zero Addr must be forbidden")
	}
}

func TestCheckResolvedRefusesAnyForbiddenAnswer(t *testing.T) {
	public := netip.MustParseAddr("93.184.216.34")
	meta := netip.MustParseAddr("169.254.169.254")
	if err := checkResolved("ok.example", []netip.Addr{public}); err != nil {
		t.Fatalf("public only: %v", err)
	}
	// One internal answer among public ones is enough to refuse the host.
	err := checkResolved("mixed.example", []netip.Addr{public, meta})
	if !errors.Is(err, ErrForbiddenAddress) {
		t.Fatalf("mixed answers: got %v, want ErrForbiddenAddress", err)
	}
	if err := checkResolved("empty.example", nil); err == nil {
		t.Fatal("no answers: want an error")
	}
}

func TestControlCheck(t *testing.T) {
	if err := controlCheck("tcp4", "127.0.0.1:443", nil); !errors.Is(err, ErrForbiddenAddress) {
		t.Fatalf("loopback: %v", err)
	}
	if err := controlCheck("tcp6", "[::ffff:10.0.0.1]:443", nil); !errors.Is(err, ErrForbiddenAddress) {
		t.Fatalf("mapped private: %v", err)
	}
	if err := controlCheck("tcp4", "8.8.8.8:443", nil); err != nil {
		t.Fatalf("public: %v", err)
	}
}

// The Control hook sees the socket's real remote address: even a dial that
// skips our resolver (an IP handed straight to the net.Dialer) is refused.
func TestDialerControlRefusesLoopbackSocket(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	g := newGuardedDialer(false, time.Second)
	_, err = g.dialer.DialContext(context.Background(), "tcp", ln.Addr().String())
	if !errors.Is(err, ErrForbiddenAddress) {
		t.Fatalf("got %v, want ErrForbiddenAddress", err)
	}
	_, err = g.DialContext(context.Background(), "tcp", ln.Addr().String())
	if !errors.Is(err, ErrForbiddenAddress) {
		t.Fatalf("DialContext: got %v, want ErrForbiddenAddress", err)
	}
	open := newGuardedDialer(true, time.Second)
	c, err := open.DialContext(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("AllowPrivate: %v", err)
	}
	c.Close()
	if _, err := open.DialContext(context.Background(), "udp", ln.Addr().String()); err == nil {
		t.Fatal("udp must be refused")
	}
}
