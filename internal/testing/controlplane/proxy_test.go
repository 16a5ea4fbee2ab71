package controlplane

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// echoServer accepts connections and echoes them back until closed.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(c net.Conn, msg string, timeout time.Duration) (string, error) {
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	buf := make([]byte, len(msg))
	_, err := io.ReadFull(c, buf)
	return string(buf), err
}

// echoProxy returns a proxy to an echo server and a connection through it,
// both closed with the test.
func echoProxy(t *testing.T) (*Proxy, net.Conn) {
	t.Helper()
	p, err := NewProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return p, c
}

// TestProxyEcho exercises the proxy without a control plane.
func TestProxyEcho(t *testing.T) {
	p, c1 := echoProxy(t)

	if got, err := roundTrip(c1, "hello", 5*time.Second); err != nil || got != "hello" {
		t.Fatalf("echo: %q, %v", got, err)
	}

	// Stall: nothing passes, the connection stays open.
	p.Stall()
	if _, err := roundTrip(c1, "stalled", 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read through stalled proxy: %v, want deadline exceeded", err)
	}
	// New connections are accepted but stalled too.
	c2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := roundTrip(c2, "second", 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read through stalled proxy (new conn): %v, want deadline exceeded", err)
	}
	// Heal: the held bytes arrive.
	p.Heal()
	buf := make([]byte, len("stalled"))
	_ = c1.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c1, buf); err != nil || string(buf) != "stalled" {
		t.Fatalf("after Heal: %q, %v", buf, err)
	}
	if got, err := roundTrip(c1, "again", 5*time.Second); err != nil || got != "again" {
		t.Fatalf("echo after Heal: %q, %v", got, err)
	}

	// Cut: open connections end, new ones are closed at once.
	p.Cut()
	_ = c1.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c1.Read(buf); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read after Cut: %v, want EOF or reset", err)
	}
	n := p.Conns()
	c3, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	_ = c3.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c3.Read(buf); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read on new conn while cut: %v, want EOF or reset", err)
	}
	if p.Conns() != n+1 {
		t.Fatalf("Conns() = %d, want %d", p.Conns(), n+1)
	}
	if p.Open() != 0 {
		t.Fatalf("Open() = %d after Cut", p.Open())
	}

	p.Heal()
	c4, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c4.Close()
	if got, err := roundTrip(c4, "healed", 5*time.Second); err != nil || got != "healed" {
		t.Fatalf("echo after Heal from Cut: %q, %v", got, err)
	}

	p.Close()
	p.Close()
	if _, err := net.Dial("tcp", p.Addr()); err == nil {
		t.Fatal("dial after Close succeeded")
	}
}

// SetRate makes a slow link: 256 KiB each way at 512 KiB/s takes about
// half a second, shared by connections; SetRate(0) makes it fast again.
func TestProxySetRate(t *testing.T) {
	p, c := echoProxy(t)
	msg := string(make([]byte, 256<<10))
	p.SetRate(512 << 10)
	start := time.Now()
	if got, err := roundTrip(c, msg, 10*time.Second); err != nil || len(got) != len(msg) {
		t.Fatalf("echo through a throttled proxy: %d bytes, %v", len(got), err)
	}
	// The first 8 KiB burst is free each way; the rest is paced.
	if took := time.Since(start); took < 400*time.Millisecond || took > 5*time.Second {
		t.Fatalf("256 KiB each way at 512 KiB/s took %v; want about 0.5 s", took)
	}
	p.SetRate(0)
	start = time.Now()
	if got, err := roundTrip(c, msg, 10*time.Second); err != nil || len(got) != len(msg) {
		t.Fatalf("echo after SetRate(0): %d bytes, %v", len(got), err)
	}
	if took := time.Since(start); took > 300*time.Millisecond {
		t.Fatalf("256 KiB unthrottled took %v; want well under 0.3 s", took)
	}
}
