package egress

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// ext is a raw TLS extension.
type ext struct {
	typ  int
	data []byte
}

func u16(n int) []byte { return []byte{byte(n >> 8), byte(n)} }

// sniExt is a server_name extension listing names as host_names.
func sniExt(names ...string) ext {
	var list []byte
	for _, n := range names {
		list = append(list, sniHostName)
		list = append(list, u16(len(n))...)
		list = append(list, n...)
	}
	return ext{extServerName, append(u16(len(list)), list...)}
}

// helloMsg builds a ClientHello handshake message with the extensions.
func helloMsg(exts ...ext) []byte {
	body := []byte{3, 3}
	body = append(body, make([]byte, 32)...) // random
	body = append(body, 0)                   // session id
	body = append(body, 0, 2, 0x13, 0x01)    // cipher suites
	body = append(body, 1, 0)                // compression methods
	if exts != nil {
		var e []byte
		for _, x := range exts {
			e = append(e, u16(x.typ)...)
			e = append(e, u16(len(x.data))...)
			e = append(e, x.data...)
		}
		body = append(body, u16(len(e))...)
		body = append(body, e...)
	}
	return append([]byte{handshakeClientHello, byte(len(body) >> 16), byte(len(body) >> 8), byte(len(body))}, body...)
}

// records wraps handshake bytes in TLS handshake records of at most size
// bytes each.
func records(msg []byte, size int) []byte {
	var out []byte
	for len(msg) > 0 {
		n := min(size, len(msg))
		out = append(out, recordTypeHandshake, 3, 1)
		out = append(out, u16(n)...)
		out = append(out, msg[:n]...)
		msg = msg[n:]
	}
	return out
}

// captureHello returns the first flight crypto/tls's client sends.
func captureHello(t testing.TB, cfg *tls.Config) []byte {
	t.Helper()
	a, b := net.Pipe()
	defer b.Close()
	go func() {
		c := tls.Client(a, cfg)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		c.HandshakeContext(ctx)
		a.Close()
	}()
	b.SetDeadline(time.Now().Add(2 * time.Second))
	hdr := make([]byte, recordHeaderLen)
	if _, err := io.ReadFull(b, hdr); err != nil {
		t.Fatal(err)
	}
	rec := make([]byte, int(hdr[3])<<8|int(hdr[4]))
	if _, err := io.ReadFull(b, rec); err != nil {
		t.Fatal(err)
	}
	return append(hdr, rec...)
}

func TestParseClientHelloFromCryptoTLS(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  *tls.Config
		want string
	}{
		{"TLS 1.3", &tls.Config{ServerName: "allowed.test"}, "allowed.test"},
		{"TLS 1.2 only", &tls.Config{ServerName: "api.example.com", MaxVersion: tls.VersionTLS12}, "api.example.com"},
		{"no SNI", &tls.Config{InsecureSkipVerify: true}, ""},
		{"post-quantum key share", &tls.Config{ServerName: "allowed.test", CurvePreferences: []tls.CurveID{tls.X25519MLKEM768}}, "allowed.test"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := captureHello(t, tc.cfg)
			msg := raw[recordHeaderLen:]
			for _, size := range []int{maxRecordPayload, 100, 7, 1} {
				b := records(msg, size)
				h, done, err := parseClientHello(b)
				if err != nil || !done || h.serverName != tc.want || h.ech {
					t.Errorf("records of %d: parse = %+v, %v, %v; want %q", size, h, done, err, tc.want)
				}
				if size < 100 {
					continue
				}
				for i := range b { // every prefix is incomplete, not an error
					if _, done, err := parseClientHello(b[:i]); done || err != nil {
						t.Fatalf("records of %d, prefix %d: done %v, err %v", size, i, done, err)
					}
				}
			}
		})
	}
}

func TestParseClientHelloRefuses(t *testing.T) {
	good := helloMsg(sniExt("allowed.test"))
	big := helloMsg(sniExt("allowed.test"), ext{21, make([]byte, 17<<10)}) // padding
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"alert record first", append([]byte{21, 3, 3, 0, 2, 1, 0}, records(good, 1000)...), "record of type 21"},
		{"record version 5.0", append([]byte{22, 5, 0}, records(good, 1000)[3:]...), "version"},
		{"empty record", append([]byte{22, 3, 1, 0, 0}, records(good, 1000)...), "0 bytes"},
		{"not a ClientHello", records(append([]byte{2}, good[1:]...), 1000), "type 2"},
		{"bytes after the ClientHello in its record", records(append(good, 1, 0, 0, 0), 1000), "after the ClientHello"},
		{"two host names", records(helloMsg(sniExt("allowed.test", "evil.test")), 1000), "more than one host_name"},
		{"empty host name", records(helloMsg(sniExt("")), 1000), "empty server_name"},
		{"duplicate extension", records(helloMsg(sniExt("allowed.test"), sniExt("evil.test")), 1000), "duplicate"},
		{"unknown name type", records(helloMsg(ext{0, []byte{0, 4, 1, 0, 1, 'x'}}), 1000), "unknown type"},
		{"server_name list too short", records(helloMsg(ext{0, []byte{0, 2, 0, 0, 1, 'x'}}), 1000), "server_name"},
		{"too large", records(big, maxRecordPayload), "larger than 16 KiB"},
		{"tiny records past the limit", records(helloMsg(sniExt("allowed.test"), ext{21, make([]byte, 10<<10)}), 1)[:maxHelloBytes], "larger than 16 KiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, done, err := parseClientHello(tc.b)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("parse = done %v, %v; want an error containing %q", done, err, tc.want)
			}
		})
	}
	h, done, err := parseClientHello(records(helloMsg(sniExt("allowed.test"), ext{extEncryptedHello, []byte{0}}), 1000))
	if err != nil || !done || !h.ech {
		t.Errorf("ECH hello: %+v %v %v, want ech", h, done, err)
	}
	h, done, err = parseClientHello(records(helloMsg(), 1000))
	if err != nil || !done || h.serverName != "" {
		t.Errorf("hello without extensions: %+v %v %v", h, done, err)
	}
	if !bytes.Equal(good, helloMsg(sniExt("allowed.test"))) {
		t.Fatal("helloMsg is not deterministic")
	}
}

// goServerName is crypto/tls's reading of a client's first flight: the
// server name of the ClientHello, and whether it parsed it.
func goServerName(b []byte) (string, bool) {
	var name string
	var ok bool
	errStop := errors.New("stop")
	c := tls.Server(&replayConn{r: bytes.NewReader(b)}, &tls.Config{
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			name, ok = h.ServerName, true
			return nil, errStop
		},
	})
	c.Handshake()
	return name, ok
}

// replayConn is a net.Conn that reads from r and discards writes.
type replayConn struct {
	net.Conn
	r *bytes.Reader
}

func (c *replayConn) Read(b []byte) (int, error)       { return c.r.Read(b) }
func (c *replayConn) Write(b []byte) (int, error)      { return len(b), nil }
func (c *replayConn) Close() error                     { return nil }
func (c *replayConn) SetDeadline(time.Time) error      { return nil }
func (c *replayConn) SetReadDeadline(time.Time) error  { return nil }
func (c *replayConn) SetWriteDeadline(time.Time) error { return nil }
func (c *replayConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *replayConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }

// FuzzClientHello checks the parser never panics, and that whenever both
// it and crypto/tls accept a first flight they read the same server name:
// a name the proxy checked is the name the server will act on.
func FuzzClientHello(f *testing.F) {
	for _, cfg := range []*tls.Config{
		{ServerName: "allowed.test"},
		{ServerName: "api.example.com", MaxVersion: tls.VersionTLS12},
		{InsecureSkipVerify: true},
	} {
		raw := captureHello(f, cfg)
		f.Add(raw)
		f.Add(records(raw[recordHeaderLen:], 50))
	}
	f.Add(records(helloMsg(sniExt("allowed.test", "evil.test")), 1000))
	f.Add(records(helloMsg(sniExt("allowed.test"), ext{extEncryptedHello, []byte{0}}), 1000))
	f.Add(records(helloMsg(), 1000))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, done, err := parseClientHello(b)
		if err != nil || !done {
			return
		}
		if name, ok := goServerName(b); ok && name != h.serverName {
			t.Errorf("proxy read server name %q, crypto/tls %q", h.serverName, name)
		}
	})
}
