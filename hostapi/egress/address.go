package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"syscall"
)

// Which addresses a request may reach. A destination is granted by name,
// but a name resolves to whatever its DNS says, and a redirect or a
// rebinding DNS answer can point a granted name at the host's own
// network. So the address is checked where it cannot be dodged: in the
// dialer's Control hook, on the address the socket is about to connect
// to, for every connection (every redirect hop's, every retry's). An
// address that is not public is refused unless the operator allowed the
// host being dialled by name (PrivateHosts).

// nonPublic are the ranges of addresses a request may reach only on a
// host the operator allowed by name, each with what it is.
var nonPublic = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "an unspecified (\"this network\") address"},
	{netip.MustParsePrefix("10.0.0.0/8"), "a private address"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a shared (carrier-grade NAT) address"},
	{netip.MustParsePrefix("127.0.0.0/8"), "a loopback address"},
	{netip.MustParsePrefix("169.254.0.0/16"), "a link-local address (where cloud metadata services answer)"},
	{netip.MustParsePrefix("172.16.0.0/12"), "a private address"},
	{netip.MustParsePrefix("192.0.0.0/24"), "a reserved address"},
	{netip.MustParsePrefix("192.168.0.0/16"), "a private address"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a reserved (benchmarking) address"},
	{netip.MustParsePrefix("224.0.0.0/4"), "a multicast address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved address"},
	{netip.MustParsePrefix("::/128"), "an unspecified address"},
	{netip.MustParsePrefix("::1/128"), "a loopback address"},
	{netip.MustParsePrefix("::/96"), "an IPv4-compatible address"},
	{netip.MustParsePrefix("100::/64"), "a discard address"},
	{netip.MustParsePrefix("fc00::/7"), "a unique-local (private) address"},
	{netip.MustParsePrefix("fe80::/10"), "a link-local address"},
	{netip.MustParsePrefix("fec0::/10"), "a site-local address"},
	{netip.MustParsePrefix("ff00::/8"), "a multicast address"},
}

// embedsIPv4 are IPv6 ranges that carry an IPv4 address a router may
// reach: NAT64 (the last 32 bits) and 6to4 (bits 16 to 48).
var (
	nat64      = []netip.Prefix{netip.MustParsePrefix("64:ff9b::/96"), netip.MustParsePrefix("64:ff9b:1::/48")}
	sixToFour  = netip.MustParsePrefix("2002::/16")
	teredo     = netip.MustParsePrefix("2001::/32")
	mappedNote = " (as an IPv4-mapped IPv6 address)"
)

// classify says what a is when it is not a public address, "" when it is.
// An IPv4-mapped IPv6 address is its IPv4 address; NAT64 and 6to4
// addresses are what they carry; Teredo is refused whole (it tunnels to
// an address the host cannot see).
func classify(a netip.Addr) string {
	a = a.WithZone("")
	note := ""
	if a.Is4In6() {
		a, note = a.Unmap(), mappedNote
	}
	if a.Is6() {
		b := a.As16()
		for _, p := range nat64 {
			if p.Contains(a) {
				if what := classify(netip.AddrFrom4([4]byte(b[12:16]))); what != "" {
					return what + " (carried in a NAT64 address)"
				}
			}
		}
		if sixToFour.Contains(a) {
			if what := classify(netip.AddrFrom4([4]byte(b[2:6]))); what != "" {
				return what + " (carried in a 6to4 address)"
			}
		}
		if teredo.Contains(a) {
			return "a Teredo tunnel address"
		}
	}
	for _, r := range nonPublic {
		if r.prefix.Contains(a) {
			return r.what + note
		}
	}
	if a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return "the broadcast address"
	}
	return ""
}

// maxAddresses bounds the addresses of one name a dial tries.
const maxAddresses = 8

// Resolver looks up a name's addresses; *net.Resolver is one. Tests give
// their own, to make names resolve where they choose.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// dialer dials the connections of one agent's requests.
type dialer struct {
	resolver Resolver
	// private reports whether the operator allowed host's non-public
	// addresses.
	private func(host string) bool
}

// dial connects to addr ("host:port", the URL's host) for the transport:
// it resolves the host itself (an address is used as it is) and dials
// each address in turn through a Control hook that refuses a non-public
// one unless the host may reach it. It never dials a name, so the address
// checked is the address connected to.
func (d *dialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return nil, err
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		if addrs, err = d.resolver.LookupNetIP(ctx, "ip", host); err != nil {
			return nil, err
		}
		if len(addrs) == 0 {
			return nil, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
		}
	}
	private := d.private(host)
	nd := net.Dialer{Control: func(network, address string, _ syscall.RawConn) error {
		return checkDialled(host, address, private)
	}}
	var first error
	for i, a := range addrs {
		if i == maxAddresses {
			break
		}
		conn, err := nd.DialContext(ctx, network, netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			return conn, nil
		}
		if first == nil {
			first = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, first
}

// checkDialled is the Control hook: address is what the socket connects
// to ("ip:port").
func checkDialled(host, address string, private bool) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &Error{Code: Refused, Message: fmt.Sprintf("the address %s of %s cannot be checked", address, host)}
	}
	what := classify(ap.Addr())
	if what == "" || private {
		return nil
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return &Error{Code: Refused, Message: fmt.Sprintf("%s is %s, which agentrt does not reach unless the operator allows it by name", host, what)}
	}
	return &Error{Code: Refused, Message: fmt.Sprintf("%s resolves to %s, %s, which agentrt does not reach unless the operator allows %s by name", host, ap.Addr().WithZone(""), what, host)}
}

// refusedDial returns the policy's refusal in a dial error, if it is one.
func refusedDial(err error) (*Error, bool) {
	var e *Error
	if errors.As(err, &e) && e.Code == Refused {
		return e, true
	}
	return nil, false
}
