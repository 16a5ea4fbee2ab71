package controlplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// proxyDialTimeout bounds the proxy's dial to its target.
const proxyDialTimeout = 10 * time.Second

// rateChunk is the most bytes the proxy writes at once while throttled, and
// the burst of its rate limiters: with SetRate, bytes flow in steps of at
// most this size, never in bursts of a whole read.
const rateChunk = 8 << 10

// Proxy is a TCP proxy on 127.0.0.1 that forwards raw bytes (TLS passes
// through untouched) to one target and can simulate network faults: Cut,
// Stall and Heal, and a slow link: SetRate. Its methods are safe for
// concurrent use. Create one with NewProxy and release it with Close.
type Proxy struct {
	target string
	ln     net.Listener

	accepted atomic.Int64
	// up and down limit the bytes per second to the target and from it,
	// shared by all connections, as a link's bandwidth is (SetRate).
	up, down *rate.Limiter

	mu      sync.Mutex
	cut     bool
	stalled bool
	gate    chan struct{} // closed while bytes may pass; open while stalled
	closed  bool
	conns   map[*proxyConn]struct{}

	wg sync.WaitGroup
}

// proxyConn is one client connection and its connection to the target.
type proxyConn struct {
	client net.Conn
	// ctx is cancelled by close; it ends a wait for the gate or the rate
	// limiter.
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex // held while closing and while setting server
	server net.Conn
}

// NewProxy listens on 127.0.0.1:0 and forwards each accepted connection to
// target (host:port), dialed when the connection is accepted. It starts in
// the healed state. The error is the listener's.
func NewProxy(target string) (*Proxy, error) {
	if _, _, err := net.SplitHostPort(target); err != nil {
		return nil, fmt.Errorf("controlplane: proxy target %q: %w", target, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("controlplane: proxy listen: %w", err)
	}
	p := &Proxy{target: target, ln: ln, gate: make(chan struct{}), conns: map[*proxyConn]struct{}{},
		up: rate.NewLimiter(rate.Inf, rateChunk), down: rate.NewLimiter(rate.Inf, rateChunk)}
	close(p.gate)
	p.wg.Go(p.acceptLoop)
	return p, nil
}

// Addr returns the proxy's listening address, 127.0.0.1:PORT.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Conns returns the number of connections accepted so far, including those
// closed at once because the proxy was cut. It only grows.
func (p *Proxy) Conns() int { return int(p.accepted.Load()) }

// Open returns the number of connections currently open through the proxy.
func (p *Proxy) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Cut closes every open connection (both sides) and, until Heal, closes
// new connections as soon as they are accepted, so clients see their
// connection reset or ended.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.cut = true
	conns := p.takeConnsLocked()
	p.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
}

// Stall stops all traffic in both directions without closing anything:
// connections stay open, new connections are accepted and dialed, but no
// byte, FIN or RST passes until Heal (or Cut, or Close, which close them).
// Bytes read meanwhile are delivered after Heal.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.stalled && !p.closed {
		p.stalled = true
		p.gate = make(chan struct{})
	}
}

// SetRate limits the bandwidth of the link: at most bytesPerSecond bytes
// per second pass in each direction, shared by all connections (open and
// new), in steps of at most 8 KiB. Zero or less removes the limit, which is
// the initial state. Heal does not change it.
func (p *Proxy) SetRate(bytesPerSecond int64) {
	limit := rate.Inf
	if bytesPerSecond > 0 {
		limit = rate.Limit(bytesPerSecond)
	}
	p.up.SetLimit(limit)
	p.down.SetLimit(limit)
}

// Heal ends Cut and Stall: new connections are forwarded again and stalled
// bytes flow. Connections closed by Cut stay closed.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
	p.openGateLocked()
}

// Close stops listening, closes every connection and waits for the proxy's
// goroutines to end. It is idempotent.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.openGateLocked()
	conns := p.takeConnsLocked()
	p.mu.Unlock()
	_ = p.ln.Close() // again: net.ErrClosed
	for _, c := range conns {
		c.close()
	}
	p.wg.Wait()
}

func (p *Proxy) openGateLocked() {
	if p.stalled {
		p.stalled = false
		close(p.gate)
	}
}

func (p *Proxy) takeConnsLocked() []*proxyConn {
	conns := slices.Collect(maps.Keys(p.conns))
	clear(p.conns)
	return conns
}

func (p *Proxy) acceptLoop() {
	for {
		conn, err := p.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		} else if err != nil {
			time.Sleep(10 * time.Millisecond) // e.g. EMFILE: back off briefly
			continue
		}
		p.accepted.Add(1)
		p.mu.Lock()
		if p.cut || p.closed {
			p.mu.Unlock()
			_ = conn.Close()
			continue
		}
		pc := &proxyConn{client: conn}
		pc.ctx, pc.cancel = context.WithCancel(context.Background())
		p.conns[pc] = struct{}{}
		p.wg.Go(func() { p.serve(pc) })
		p.mu.Unlock()
	}
}

func (p *Proxy) serve(pc *proxyConn) {
	defer p.forget(pc)
	defer pc.close()

	d := net.Dialer{Timeout: proxyDialTimeout}
	server, err := d.Dial("tcp", p.target)
	if err != nil {
		return
	}
	if !pc.setServer(server) {
		return // cut or closed while dialing
	}
	var wg sync.WaitGroup
	wg.Go(func() { p.pipe(pc, server, pc.client, p.up) })
	wg.Go(func() { p.pipe(pc, pc.client, server, p.down) })
	wg.Wait()
}

// pipe copies src to dst through the gate, at the rate lim allows. At EOF
// it half-closes dst; on any other error it closes the whole connection.
func (p *Proxy) pipe(pc *proxyConn, dst, src net.Conn, lim *rate.Limiter) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.wait(pc) {
				return
			}
			for b := buf[:n]; len(b) > 0; {
				k := min(len(b), rateChunk)
				if lim.WaitN(pc.ctx, k) != nil {
					return // closed while waiting
				}
				if _, werr := dst.Write(b[:k]); werr != nil {
					pc.close()
					return
				}
				b = b[k:]
			}
		}
		if err != nil {
			if !p.wait(pc) {
				return
			}
			if err == io.EOF {
				if cw, ok := dst.(interface{ CloseWrite() error }); ok {
					_ = cw.CloseWrite()
					return
				}
			}
			pc.close()
			return
		}
	}
}

// wait blocks while the proxy is stalled; it reports false if the
// connection was closed meanwhile.
func (p *Proxy) wait(pc *proxyConn) bool {
	p.mu.Lock()
	gate := p.gate
	p.mu.Unlock()
	select {
	case <-gate:
		return pc.ctx.Err() == nil
	case <-pc.ctx.Done():
		return false
	}
}

func (p *Proxy) forget(pc *proxyConn) {
	p.mu.Lock()
	delete(p.conns, pc)
	p.mu.Unlock()
}

// setServer records the target connection; it closes it and reports false
// if the connection was closed meanwhile.
func (pc *proxyConn) setServer(s net.Conn) bool {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.ctx.Err() != nil {
		_ = s.Close()
		return false
	}
	pc.server = s
	return true
}

func (pc *proxyConn) close() {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.ctx.Err() != nil {
		return
	}
	pc.cancel()
	_ = pc.client.Close()
	if pc.server != nil {
		_ = pc.server.Close()
	}
}
