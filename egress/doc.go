// Package egress implements cordon's egress proxy: the host-side HTTP
// proxy through which a sandboxed program reaches the network, every
// connection decided by a grant.Enforcer (docs/SPEC.md §3, kind "egress").
//
// The proxy does not listen in production: the sandbox hands it one
// connected net.Conn per connection the program opened to its loopback
// forwarder (Proxy.ServeConn). It speaks two request forms, parsed strictly
// with net/http's ReadRequest under a header size limit and a header
// timeout:
//
//   - CONNECT host:port (authority form), for TLS and any other TCP. After
//     "200 Connection established" the bytes are tunnelled and never parsed
//     as HTTP again (no chained CONNECT through the proxy).
//   - Plain HTTP in absolute form, http://host[:port]/path. Only the http
//     scheme; no userinfo; origin-form requests are refused. The Host
//     header is ignored for the decision and rewritten to the URL's host;
//     hop-by-hop and Proxy-* headers are removed before forwarding. Each
//     request on a keep-alive connection is decided again.
//
// # Decisions
//
// Each request is decided by grant.Enforcer.Decide on the host and port the
// proxy parsed itself, never on a raw URL string. Hosts must already be
// canonical as grants are (lower-case ASCII, IDNA A-labels, no trailing
// dot, IP addresses only in canonical form); a non-canonical host is a
// recorded denial, never repaired. A grant set without egress rules denies
// everything: there is no "unrestricted" mode.
//
// A name allowed by a host rule is resolved by the proxy (Config.Resolver)
// and EVERY address it resolves to must pass, or the request is refused
// (no silent choice of another address): the address must not be in a
// deny.egress network, and it must not be special — unspecified, loopback,
// link-local, private, shared (CGNAT), multicast, broadcast, reserved,
// documentation, benchmarking, NAT64 forms of those, or a cloud metadata
// address — unless an egress CIDR rule that lies inside that special range
// grants it (so 0.0.0.0/0 never opens loopback or 169.254.169.254; only a
// CIDR inside 127.0.0.0/8, or 169.254.169.254/32 itself, does). The
// unspecified addresses are never allowed. The proxy then dials exactly the
// vetted address ("ip:port"), never the name again, so a second DNS answer
// cannot redirect the connection (DNS rebinding). An IP literal is decided
// by the CIDR rules and must pass the same special-range check.
//
// For a CONNECT tunnel, if the client's first byte is a TLS record type the
// proxy buffers and parses the ClientHello (strictly, up to 16 KiB, split
// across records and reads) before forwarding anything, and closes the
// tunnel unless its server_name equals the CONNECT host (ASCII case
// ignored). A ClientHello offering Encrypted Client Hello is refused: it
// hides the name being checked.
//
// # Replacing the policy
//
// A proxy built with Config.Policy decides by that Policy's Enforcer,
// which can be replaced while the proxy serves (a live run tightened by
// an amendment, docs/SPEC.md §3.7). Policy.Set takes effect at once:
// every request decided after it uses the new Enforcer, and every
// established tunnel or forwarded request whose host, port or address it
// no longer allows is closed, its Record's Error saying so. A connection
// dialled under the old Enforcer but registered after Set looked is
// checked again as it is registered. A nil Enforcer allows nothing.
//
// # Limits and records
//
// Config bounds concurrent connections (over the limit: 503 and close), the
// time to read a request header, the header size (431) and idle time (no
// bytes either way; a watchdog closes the tunnel, so a direction blocked
// on a peer that does not read is covered too). On Linux, tunnels between
// TCP and TCP or unix stream sockets are spliced, never copied through user
// space. Every decision produces one Record (Config.Record):
// method, host, port, the address dialled, the decision and its rule,
// bytes each way and duration; a denial's Record.String is one line that
// names the grant entry (Record.Hint, valid grant JSON) that would allow
// it. Clients get a one-line reason, never internal errors. Records are
// capped (Config.MaxRecords, 1024 by default): the decision that reaches
// the cap is followed by one denial record saying so, and after it every
// new connection is closed unread and unrecorded (Stats.Dropped), so a
// flood of connections costs the host a close each, not a record each.
//
// # Shutdown
//
// Close stops the proxy in this order: new ServeConn calls are refused,
// listeners given to Serve are closed, every client and upstream
// connection is closed (which ends every tunnel and request), and Close
// returns once every ServeConn call has returned. Cancelling the context
// passed to ServeConn or Serve ends that connection or accept loop alone.
package egress
