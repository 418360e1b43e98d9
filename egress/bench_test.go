package egress

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"testing"
)

// The benchmarks compare a connection through the proxy (impl=cordon) with
// a direct loopback connection to the same server (impl=direct), side by
// side in one run: go test -run '^$' -bench . -count 5 ./egress, then
// go run ./internal/benchratio for the ratios.

// benchProxy serves a proxy on loopback that allows allowed.test (resolved
// to 127.0.0.1) on port, dialling for real.
func benchProxy(b *testing.B, port int) string {
	b.Helper()
	cfg := DefaultConfig(enforcer(b, []string{hostRule("allowed.test", port), cidrRule("127.0.0.1/32", port)}))
	cfg.MaxConns = 1024
	cfg.Resolver = func(ctx context.Context, host string) ([]netip.Addr, error) {
		if host != "allowed.test" {
			return nil, errors.New("unknown host")
		}
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	p, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go p.Serve(context.Background(), ln)
	b.Cleanup(func() { p.Close() })
	return ln.Addr().String()
}

const established = "HTTP/1.1 200 Connection established\r\n\r\n"

// tunnel opens a CONNECT tunnel through the proxy at proxy.
func tunnel(b *testing.B, proxy string, port int) net.Conn {
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(c, "CONNECT allowed.test:%d HTTP/1.1\r\n\r\n", port)
	resp := make([]byte, len(established))
	if _, err := io.ReadFull(c, resp); err != nil || string(resp) != established {
		b.Fatalf("CONNECT: %q, %v", resp, err)
	}
	return c
}

// BenchmarkTunnelThroughput streams 1 MiB per op to a loopback sink that
// acknowledges the total once the stream ends; the time includes that
// acknowledgement, so every byte has arrived.
func BenchmarkTunnelThroughput(b *testing.B) {
	sink, port := listen(b, func(c net.Conn) {
		buf := make([]byte, 256<<10)
		var n int64
		for {
			k, err := c.Read(buf)
			n += int64(k)
			if err != nil {
				break
			}
		}
		binary.Write(c, binary.BigEndian, n)
	})
	proxy := benchProxy(b, port)
	const chunk = 1 << 20
	for _, impl := range []string{"cordon", "direct"} {
		b.Run("impl="+impl, func(b *testing.B) {
			var c net.Conn
			if impl == "cordon" {
				c = tunnel(b, proxy, port)
			} else {
				var err error
				if c, err = net.Dial("tcp", sink); err != nil {
					b.Fatal(err)
				}
			}
			defer c.Close()
			buf := make([]byte, chunk)
			b.SetBytes(chunk)
			b.ResetTimer()
			for range b.N {
				if _, err := c.Write(buf); err != nil {
					b.Fatal(err)
				}
			}
			c.(*net.TCPConn).CloseWrite()
			var got int64
			if err := binary.Read(c, binary.BigEndian, &got); err != nil || got != int64(b.N)*chunk {
				b.Fatalf("sink got %d bytes, %v; want %d", got, err, int64(b.N)*chunk)
			}
		})
	}
}

// BenchmarkConnectLatency opens a connection per op and does a 1-byte
// echo round trip on it: directly, or with a CONNECT through the proxy.
func BenchmarkConnectLatency(b *testing.B) {
	echo, port := listen(b, func(c net.Conn) { io.Copy(c, c) })
	proxy := benchProxy(b, port)
	for _, impl := range []string{"cordon", "direct"} {
		b.Run("impl="+impl, func(b *testing.B) {
			one := make([]byte, 1)
			for range b.N {
				var c net.Conn
				if impl == "cordon" {
					c = tunnel(b, proxy, port)
				} else {
					var err error
					if c, err = net.Dial("tcp", echo); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := c.Write([]byte{'x'}); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c, one); err != nil {
					b.Fatal(err)
				}
				c.Close()
			}
		})
	}
}
