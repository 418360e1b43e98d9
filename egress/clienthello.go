package egress

import (
	"errors"
	"fmt"
)

// TLS constants (RFC 8446, RFC 6066, RFC 9849 draft numbering for ECH).
const (
	recordTypeHandshake   = 22
	handshakeClientHello  = 1
	extServerName         = 0
	extEncryptedHello     = 0xfe0d
	sniHostName           = 0
	maxRecordPayload      = 1 << 14
	maxHelloMsg           = 16 << 10            // largest ClientHello message accepted
	maxHelloBytes         = maxHelloMsg + 4<<10 // record-layer bytes buffered for it
	recordHeaderLen       = 5
	handshakeHeaderLength = 4
)

// isTLSRecordType reports whether b, the first byte a client sends in a
// tunnel, is a TLS record content type (change_cipher_spec, alert,
// handshake, application_data, heartbeat). Any of them means the stream is
// TLS and must start with a ClientHello we can check; sending an alert or
// other record first is not a way around the check.
func isTLSRecordType(b byte) bool { return 20 <= b && b <= 24 }

// clientHello is what the proxy needs from a ClientHello.
type clientHello struct {
	serverName string // "" when there is no server_name extension
	ech        bool   // an encrypted_client_hello extension is present
}

// errHelloTooLarge is returned when no complete ClientHello fits the limits.
var errHelloTooLarge = errors.New("ClientHello larger than 16 KiB")

// parseClientHello parses the TLS records at the start of b, which must
// carry a ClientHello and nothing else until it ends. It returns done ==
// false (and no error) when b is a valid prefix that needs more bytes.
// Bytes after the record that completes the ClientHello are not examined.
// It never panics on any input.
func parseClientHello(b []byte) (h clientHello, done bool, err error) {
	var msg []byte // handshake bytes gathered from the records so far
	rest := b
	for {
		if len(rest) < recordHeaderLen {
			return h, false, incomplete(b)
		}
		typ, major, minor := rest[0], rest[1], rest[2]
		n := int(rest[3])<<8 | int(rest[4])
		switch {
		case typ != recordTypeHandshake:
			return h, false, fmt.Errorf("TLS record of type %d before the ClientHello ended", typ)
		case major != 3 || minor > 4:
			return h, false, fmt.Errorf("TLS record version %d.%d", major, minor)
		case n == 0 || n > maxRecordPayload:
			return h, false, fmt.Errorf("TLS handshake record of %d bytes", n)
		}
		if len(rest) < recordHeaderLen+n {
			return h, false, incomplete(b)
		}
		msg = append(msg, rest[recordHeaderLen:recordHeaderLen+n]...)
		rest = rest[recordHeaderLen+n:]
		if len(msg) < handshakeHeaderLength {
			continue
		}
		if msg[0] != handshakeClientHello {
			return h, false, fmt.Errorf("first handshake message has type %d, not ClientHello", msg[0])
		}
		size := int(msg[1])<<16 | int(msg[2])<<8 | int(msg[3])
		if size > maxHelloMsg {
			return h, false, errHelloTooLarge
		}
		if len(msg) < handshakeHeaderLength+size {
			continue
		}
		if len(msg) > handshakeHeaderLength+size {
			return h, false, fmt.Errorf("record carries %d bytes after the ClientHello", len(msg)-handshakeHeaderLength-size)
		}
		h, err := parseHelloBody(msg[handshakeHeaderLength:])
		return h, err == nil, err
	}
}

// incomplete is parseClientHello's answer for a valid prefix: nil, or
// errHelloTooLarge once b has reached the buffering limit.
func incomplete(b []byte) error {
	if len(b) >= maxHelloBytes {
		return errHelloTooLarge
	}
	return nil
}

// parseHelloBody parses a ClientHello message body (RFC 8446 §4.1.2),
// requiring every length to match exactly, no duplicate extension and at
// most one host_name (RFC 6066 §3).
func parseHelloBody(b []byte) (clientHello, error) {
	var h clientHello
	r := cursor{b: b}
	version := r.u16()
	r.skip(32) // random
	sessionID := r.vec8()
	suites := r.vec16()
	compression := r.vec8()
	if r.bad {
		return h, errors.New("truncated ClientHello")
	}
	switch {
	case version>>8 != 3:
		return h, fmt.Errorf("ClientHello version %#04x", version)
	case len(sessionID) > 32:
		return h, fmt.Errorf("ClientHello session id of %d bytes", len(sessionID))
	case len(suites) < 2 || len(suites)%2 != 0:
		return h, fmt.Errorf("ClientHello cipher suites of %d bytes", len(suites))
	case len(compression) < 1:
		return h, errors.New("ClientHello without compression methods")
	}
	if r.empty() {
		return h, nil // no extensions (TLS 1.2 and earlier)
	}
	exts := r.vec16()
	if r.bad || !r.empty() {
		return h, errors.New("ClientHello extensions do not fill the message exactly")
	}
	seen := map[int]bool{}
	e := cursor{b: exts}
	for !e.empty() {
		typ := e.u16()
		data := e.vec16()
		if e.bad {
			return h, errors.New("truncated ClientHello extension")
		}
		if seen[typ] {
			return h, fmt.Errorf("duplicate ClientHello extension %d", typ)
		}
		seen[typ] = true
		switch typ {
		case extServerName:
			name, err := parseServerName(data)
			if err != nil {
				return h, err
			}
			h.serverName = name
		case extEncryptedHello:
			h.ech = true
		}
	}
	return h, nil
}

// parseServerName parses a server_name extension: one non-empty host_name
// and no other name types.
func parseServerName(b []byte) (string, error) {
	r := cursor{b: b}
	list := r.vec16()
	if r.bad || !r.empty() || len(list) == 0 {
		return "", errors.New("malformed server_name extension")
	}
	l := cursor{b: list}
	name := ""
	for !l.empty() {
		typ := l.u8()
		n := l.vec16()
		switch {
		case l.bad:
			return "", errors.New("truncated server_name extension")
		case typ != sniHostName:
			return "", fmt.Errorf("server_name of unknown type %d", typ)
		case name != "":
			return "", errors.New("server_name with more than one host_name")
		case len(n) == 0:
			return "", errors.New("empty server_name")
		}
		name = string(n)
	}
	return name, nil
}

// cursor reads big-endian TLS vectors. A short read sets bad, which
// sticks: every later read returns zero values.
type cursor struct {
	b   []byte
	bad bool
}

func (c *cursor) take(n int) []byte {
	if c.bad || len(c.b) < n {
		c.b, c.bad = nil, true
		return nil
	}
	v := c.b[:n:n]
	c.b = c.b[n:]
	return v
}

func (c *cursor) u8() int {
	if v := c.take(1); !c.bad {
		return int(v[0])
	}
	return 0
}

func (c *cursor) u16() int {
	if v := c.take(2); !c.bad {
		return int(v[0])<<8 | int(v[1])
	}
	return 0
}

func (c *cursor) skip(n int)    { c.take(n) }
func (c *cursor) vec8() []byte  { return c.take(c.u8()) }
func (c *cursor) vec16() []byte { return c.take(c.u16()) }
func (c *cursor) empty() bool   { return len(c.b) == 0 }
