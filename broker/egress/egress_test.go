package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
)

// resolver resolves the names it holds; any other name fails the test.
type resolver struct {
	t     *testing.T
	names map[string][]netip.Addr
}

func (r resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r.names[host]; ok {
		return a, nil
	}
	if host == "nowhere.example" {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	r.t.Errorf("unexpected lookup of %q", host)
	return nil, errors.New("unexpected lookup")
}

func TestCheck(t *testing.T) {
	policy, err := Parse(" 127.0.0.1:8000, 10.1.0.0/16 ,site:8000, [::1]:9000,192.168.7.7")
	if err != nil {
		t.Fatal(err)
	}
	policy = policy.WithResolver(resolver{t, map[string][]netip.Addr{
		"localhost":        {netip.MustParseAddr("127.0.0.1")},
		"rebind.example":   {netip.MustParseAddr("93.184.215.14"), netip.MustParseAddr("169.254.169.254")},
		"public.example":   {netip.MustParseAddr("93.184.215.14"), netip.MustParseAddr("2606:2800:21f:cb07:6820:80da:af6b:8b2c")},
		"intranet.example": {netip.MustParseAddr("10.1.2.3")},
		"replica.internal": {netip.MustParseAddr("172.18.0.4")},
		"mapped.example":   {netip.MustParseAddr("::ffff:10.9.9.9")},
	}})
	tests := []struct {
		name     string
		host     string
		port     uint16
		wantRule string // "" allowed
	}{
		{name: "public address", host: "93.184.215.14", port: 443},
		{name: "public name", host: "public.example", port: 443},
		{name: "a name that does not resolve", host: "nowhere.example", port: 80},
		{name: "allowed address and port", host: "127.0.0.1", port: 8000},
		{name: "allowed address, other port", host: "127.0.0.1", port: 8001, wantRule: "loopback"},
		{name: "loopback v6", host: "[::1]", port: 80, wantRule: "loopback"},
		{name: "allowed v6 with port", host: "::1", port: 9000},
		{name: "localhost", host: "localhost", port: 8080, wantRule: "loopback"},
		{name: "metadata", host: "169.254.169.254", port: 80, wantRule: "link-local or cloud metadata"},
		{name: "metadata v6", host: "fd00:ec2::254", port: 80, wantRule: "link-local or cloud metadata"},
		{name: "link-local v6", host: "fe80::1", port: 80, wantRule: "link-local or cloud metadata"},
		{name: "a name with one metadata address", host: "rebind.example", port: 80, wantRule: "link-local or cloud metadata"},
		{name: "private", host: "172.18.0.4", port: 8080, wantRule: "private"},
		{name: "private by name", host: "replica.internal", port: 8080, wantRule: "private"},
		{name: "allowed range, by name", host: "intranet.example", port: 443},
		{name: "allowed address, any port", host: "192.168.7.7", port: 1},
		{name: "allowed name and port", host: "SITE", port: 8000},
		{name: "allowed name, other port", host: "site", port: 8001, wantRule: "private"},
		{name: "v4-mapped private", host: "mapped.example", port: 80, wantRule: "private"},
		{name: "v4-mapped loopback literal", host: "::ffff:127.0.0.2", port: 80, wantRule: "loopback"},
		{name: "carrier-grade NAT", host: "100.64.0.1", port: 80, wantRule: "shared address space (carrier-grade NAT)"},
		{name: "unspecified", host: "0.0.0.0", port: 80, wantRule: "unspecified"},
		{name: "broadcast", host: "255.255.255.255", port: 80, wantRule: "multicast or broadcast"},
		{name: "ULA", host: "fd12::1", port: 80, wantRule: "private"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "allowed name, other port" {
				// site resolves to a private address when its port is not the allowed one.
				p := policy.WithResolver(resolver{t, map[string][]netip.Addr{"site": {netip.MustParseAddr("172.20.0.2")}}})
				checkRule(t, p.Check(t.Context(), tt.host, tt.port), tt.wantRule)
				return
			}
			checkRule(t, policy.Check(t.Context(), tt.host, tt.port), tt.wantRule)
		})
	}
}

func checkRule(t *testing.T, err error, wantRule string) {
	t.Helper()
	var refused *RefusedError
	switch {
	case wantRule == "" && err != nil:
		t.Errorf("Check() = %v, want allowed", err)
	case wantRule != "" && (!errors.As(err, &refused) || refused.Rule != wantRule || !errors.Is(err, ErrRefused)):
		t.Errorf("Check() = %v, want refused by %q", err, wantRule)
	}
}

// TestZeroPolicy: the zero policy refuses the deployment's ranges and allows the
// internet.
func TestZeroPolicy(t *testing.T) {
	var p Policy
	if err := p.CheckAddr("127.0.0.1", netip.MustParseAddr("127.0.0.1"), 80); !errors.Is(err, ErrRefused) {
		t.Errorf("loopback: %v", err)
	}
	if err := p.CheckAddr("1.1.1.1", netip.MustParseAddr("1.1.1.1"), 443); err != nil {
		t.Errorf("public: %v", err)
	}
}

func TestParse(t *testing.T) {
	for _, bad := range []string{"site", "site:0", "site:70000", "a b:80", "10.0.0.0/33", "http://x:80", "[::1]"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted it", bad)
		}
	}
	many := ""
	for range MaxAllow + 1 {
		many += "10.0.0.1,"
	}
	if _, err := Parse(many); err == nil {
		t.Errorf("Parse accepted %d entries", MaxAllow+1)
	}
	if p, err := Parse(" , "); err != nil || len(p.allow) != 0 {
		t.Errorf("Parse of blanks = %v, %v", p, err)
	}
}
