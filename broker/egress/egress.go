// Package egress decides which addresses the agent's browser may reach: the internet,
// not the deployment it runs in. Loopback, private, link-local (the cloud metadata
// services among them) and the other non-public ranges are refused unless an operator
// allows an address, a range or a host by name (AGENTFY_BROWSER_ALLOW); every public
// address is allowed. The broker checks a tool's URL against it before Chromium sends a
// byte; nothing here talks to Chromium.
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// MaxAllow bounds the operator's allow-list.
const MaxAllow = 64

// ErrRefused is an address the agent's browser may not reach. Errors of Check wrap it
// in a *RefusedError that names the rule.
var ErrRefused = errors.New("address refused")

// Rules: the ranges refused unless allowed, each with the name a refusal gives.
var rules = []struct {
	name     string
	prefixes []netip.Prefix
}{
	{"loopback", prefixes("127.0.0.0/8", "::1/128")},
	// The cloud metadata services live here (169.254.169.254, and AWS's IPv6 one).
	{"link-local or cloud metadata", prefixes("169.254.0.0/16", "fe80::/10", "fd00:ec2::254/128")},
	{"private", prefixes("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7")},
	{"shared address space (carrier-grade NAT)", prefixes("100.64.0.0/10")},
	{"unspecified", prefixes("0.0.0.0/8", "::/128")},
	{"multicast or broadcast", prefixes("224.0.0.0/4", "255.255.255.255/32", "ff00::/8")},
	{"reserved", prefixes("240.0.0.0/4", "192.0.0.0/24", "198.18.0.0/15", "64:ff9b:1::/48", "100::/64", "2001:db8::/32")},
}

func prefixes(s ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(s))
	for i, p := range s {
		out[i] = netip.MustParsePrefix(p)
	}
	return out
}

// RefusedError says which rule refused an address. Its message names the host the
// caller asked for and the rule, never a path or a query.
type RefusedError struct {
	Host string // as asked for: a name or an address
	Rule string // the rules' name, as "loopback"
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("%s is a %s address, which the agent's browser may not reach (an operator may allow it with AGENTFY_BROWSER_ALLOW)", e.Host, e.Rule)
}

// Unwrap makes a RefusedError ErrRefused.
func (e *RefusedError) Unwrap() error { return ErrRefused }

// Resolver finds the addresses of a host name; net.DefaultResolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Policy decides which addresses the agent's browser may reach. The zero Policy refuses
// every non-public address and allows every public one, and resolves names with
// net.DefaultResolver.
type Policy struct {
	allow    []allowed
	resolver Resolver
}

// allowed is one entry of the operator's allow-list: a range of addresses, or a host
// name, each with a port or any port (0).
type allowed struct {
	prefix netip.Prefix // valid for an address or range
	host   string       // lower case, for a name
	port   uint16
}

// Parse reads an allow-list: entries separated by commas, each an address
// ("10.1.2.3"), a range ("10.1.0.0/16"), or either with a port ("127.0.0.1:8000",
// "[::1]:8000"), or a host name with a port ("intranet.example:443", "site:8000"), which
// allows that name whatever it resolves to. It refuses more than MaxAllow entries, a
// name without a port and anything else it cannot read.
func Parse(list string) (Policy, error) {
	var p Policy
	for _, raw := range strings.Split(list, ",") {
		entry := strings.TrimSpace(raw)
		if entry == "" {
			continue
		}
		if len(p.allow) == MaxAllow {
			return Policy{}, fmt.Errorf("more than %d entries", MaxAllow)
		}
		a, err := parseEntry(entry)
		if err != nil {
			return Policy{}, fmt.Errorf("%q: %w", entry, err)
		}
		p.allow = append(p.allow, a)
	}
	return p, nil
}

func parseEntry(entry string) (allowed, error) {
	if pfx, err := netip.ParsePrefix(entry); err == nil {
		return allowed{prefix: pfx.Masked()}, nil
	}
	if addr, err := netip.ParseAddr(entry); err == nil {
		return allowed{prefix: netip.PrefixFrom(addr.Unmap(), addr.Unmap().BitLen())}, nil
	}
	host, portText, err := net.SplitHostPort(entry)
	if err != nil {
		return allowed{}, errors.New("want an address, a range, or an address or host name with a port")
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil || port == 0 {
		return allowed{}, fmt.Errorf("port %q is not a port", portText)
	}
	if addr, err := netip.ParseAddr(host); err == nil {
		return allowed{prefix: netip.PrefixFrom(addr.Unmap(), addr.Unmap().BitLen()), port: uint16(port)}, nil
	}
	if !validHostName(host) {
		return allowed{}, fmt.Errorf("%q is not a host name", host)
	}
	return allowed{host: strings.ToLower(strings.TrimSuffix(host, ".")), port: uint16(port)}, nil
}

// validHostName accepts letters, digits, hyphens and dots, as DNS names have.
func validHostName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, r := range h {
		letter := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		digit := r >= '0' && r <= '9'
		if !letter && !digit && r != '-' && r != '.' && r != '_' {
			return false
		}
	}
	return true
}

// WithResolver is p resolving names with r.
func (p Policy) WithResolver(r Resolver) Policy {
	p.resolver = r
	return p
}

// Allow is p allowing entry too (as Parse reads one); for a stack that knows its own
// demo site.
func (p Policy) Allow(entry string) (Policy, error) {
	a, err := parseEntry(entry)
	if err != nil {
		return p, fmt.Errorf("%q: %w", entry, err)
	}
	p.allow = append(p.allow[:len(p.allow):len(p.allow)], a)
	return p, nil
}

// CheckAddr reports a *RefusedError when addr:port is in a refused range and not
// allowed; host is what the caller asked for, for the error (and for entries that allow
// a name).
func (p Policy) CheckAddr(host string, addr netip.Addr, port uint16) error {
	addr = addr.Unmap()
	for _, a := range p.allow {
		if a.port != 0 && a.port != port {
			continue
		}
		if a.prefix.IsValid() && a.prefix.Contains(addr) {
			return nil
		}
	}
	for _, r := range rules {
		for _, pfx := range r.prefixes {
			if pfx.Contains(addr) {
				return &RefusedError{Host: host, Rule: r.name}
			}
		}
	}
	return nil
}

// Check reports a *RefusedError when the agent's browser may not reach host:port: host
// is an address of a refused range, or a name any of whose addresses is. A name the
// allow-list names with this port is allowed without a lookup. Other errors are the
// resolver's (a name that does not resolve is not refused here: the browser will fail
// to reach it alone).
func (p Policy) Check(ctx context.Context, host string, port uint16) error {
	name := strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if addr, err := netip.ParseAddr(name); err == nil {
		return p.CheckAddr(host, addr, port)
	}
	if p.allowsName(name, port) {
		return nil
	}
	r := p.resolver
	if r == nil {
		r = net.DefaultResolver
	}
	addrs, err := r.LookupNetIP(ctx, "ip", name)
	if err != nil {
		var dnsErr *net.DNSError
		if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
			return nil
		}
		return fmt.Errorf("resolve %s: %w", host, err)
	}
	for _, addr := range addrs {
		if err := p.CheckAddr(host, addr, port); err != nil {
			return err
		}
	}
	return nil
}
