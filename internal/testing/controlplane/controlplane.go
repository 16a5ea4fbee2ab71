// Package controlplane runs a real etcd and kube-apiserver on loopback for
// tests and demos.
//
// The binaries are not part of the module: `make controlplane` builds them
// from the Go module proxy into <module root>/.cache/bin (see the nested
// modules under tools/). [StartT] skips a test when they are missing, unless
// the environment variable WATCHJOURNAL_REQUIRE_CONTROLPLANE is "1".
//
// The apiserver never compacts etcd itself, and by default its watch cache
// is off, so that a watch or list from an old resourceVersion answers 410
// Gone exactly when the test has called [ControlPlane.Compact], and never
// otherwise.
//
// Only etcd and kube-apiserver run: there is no controller manager, so
// namespaces that are deleted stay Terminating, no garbage collection
// happens and no service accounts or tokens are created. The ServiceAccount
// admission plugin is disabled so that Pods can be created anyway.
package controlplane

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/keyutil"
)

// ModulePath is the module whose root holds the default binary directory
// .cache/bin.
const ModulePath = "github.com/watchjournal/watchjournal"

// Environment variables read by this package.
const (
	// EnvBinDir names the directory holding the etcd and kube-apiserver
	// binaries. It overrides the default <module root>/.cache/bin.
	EnvBinDir = "WATCHJOURNAL_BIN"
	// EnvRequire, when "1", makes StartT fail a test instead of skipping
	// it when the binaries are missing.
	EnvRequire = "WATCHJOURNAL_REQUIRE_CONTROLPLANE"
)

// Names of the binaries looked for in the binary directory.
const (
	EtcdBinary      = "etcd"
	APIServerBinary = "kube-apiserver"
)

// Timeouts used while starting and stopping the processes.
const (
	// EtcdReadyTimeout bounds the wait for etcd's /health after start.
	EtcdReadyTimeout = 30 * time.Second
	// APIServerReadyTimeout bounds the wait for the apiserver's /readyz
	// and for the default namespace after start, unless
	// Options.APIServerReadyTimeout sets another.
	APIServerReadyTimeout = 60 * time.Second
	// APIServerStopTimeout is how long StopAPIServer waits after SIGTERM
	// before it sends SIGKILL.
	APIServerStopTimeout = 10 * time.Second

	pollInterval  = 50 * time.Millisecond
	probeTimeout  = 2 * time.Second
	startTimeout  = 2 * time.Minute // StartT's and a spare's whole start
	startAttempts = 5
)

// ErrBinariesMissing is wrapped by the error of Start when etcd or
// kube-apiserver is not in the binary directory. Test it with errors.Is.
var ErrBinariesMissing = errors.New("control plane binaries missing")

// ErrStopped is returned by methods that need a running control plane after
// Stop has been called.
var ErrStopped = errors.New("control plane stopped")

// Options configure Start. The zero value is a valid configuration: watch
// cache off, default binary directory, one admin token.
type Options struct {
	// WatchCache sets the apiserver's --watch-cache (off by default, so that
	// watches and lists read etcd directly: see the package doc).
	WatchCache bool

	// BinDir is the directory holding the etcd and kube-apiserver
	// binaries. Empty means $WATCHJOURNAL_BIN if set, else .cache/bin in
	// the root of module github.com/watchjournal/watchjournal, found by
	// walking up from the current working directory.
	BinDir string

	// ExtraAPIServerArgs are appended to the apiserver's command line,
	// after the flags this package sets: a later single-valued flag wins,
	// list flags (e.g. --disable-admission-plugins) accumulate.
	ExtraAPIServerArgs []string

	// ExtraTokens maps further static bearer tokens to user names. These
	// users are authenticated (group system:authenticated) but are not in
	// system:masters, so RBAC decides what they may do. Use TokenConfig
	// to get a client for one. Tokens and user names must be non-empty and
	// must not contain commas, quotes or line breaks.
	ExtraTokens map[string]string

	// APIServerReadyTimeout bounds each wait for the apiserver to be
	// ready, at start and after RestartAPIServer. Zero means the package's
	// APIServerReadyTimeout (60 s). An apiserver with the watch cache on
	// fills it from etcd before /readyz answers, which takes longer the
	// more objects etcd holds: a large store needs a longer timeout.
	APIServerReadyTimeout time.Duration

	// Logf, when non-nil, receives progress messages (e.g. t.Logf).
	Logf func(format string, args ...any)

	// KeepData starts etcd on the data dir's etcd-data left by an earlier
	// Start on the same dir, if there is one, instead of an empty store:
	// a benchmark's objects survive across runs. The ports are new each
	// time; etcd, one member, ignores its stored peer URL.
	KeepData bool
}

// ControlPlane is a running etcd and kube-apiserver pair on 127.0.0.1. Its
// methods are safe for concurrent use. Create one with Start or StartT and
// release it with Stop.
type ControlPlane struct {
	dir    string
	binDir string
	opts   Options
	token  string

	etcdClientPort int
	etcdPeerPort   int
	apiPort        int

	// mu serializes Stop and the stops and starts of one process, and
	// guards etcd and api (nil while stopped).
	mu        sync.Mutex
	etcd, api *process
	stopped   atomic.Bool
}

// BinDir returns the directory Start would take the binaries from for opts:
// opts.BinDir, else $WATCHJOURNAL_BIN, else <module root>/.cache/bin. It
// returns an error only when none of these applies (no module root above the
// working directory).
func BinDir(opts Options) (string, error) {
	if opts.BinDir != "" {
		return opts.BinDir, nil
	}
	if d := os.Getenv(EnvBinDir); d != "" {
		return d, nil
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, ".cache", "bin"), nil
}

// moduleRoot walks up from the working directory to the directory whose
// go.mod declares ModulePath.
func moduleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("controlplane: finding module root: %w", err)
	}
	for d := wd; ; {
		if data, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && goModLine.Match(data) {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("controlplane: no go.mod of module %s above %s; set %s or Options.BinDir", ModulePath, wd, EnvBinDir)
		}
		d = parent
	}
}

// goModLine matches the module line of ModulePath's go.mod.
var goModLine = regexp.MustCompile(`(?m)^module\s+"?` + regexp.QuoteMeta(ModulePath) + `"?\s*$`)

// checkBinaries returns an error wrapping ErrBinariesMissing unless both
// binaries are regular executable files in binDir.
func checkBinaries(binDir string) error {
	var missing []string
	for _, name := range []string{EtcdBinary, APIServerBinary} {
		fi, err := os.Stat(filepath.Join(binDir, name))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("controlplane: %w: %s not found in %s (run `make controlplane` in the module root, or set %s)",
			ErrBinariesMissing, strings.Join(missing, " and "), binDir, EnvBinDir)
	}
	return nil
}

// Start starts etcd and kube-apiserver on free loopback ports and returns
// once the apiserver's /readyz answers "ok" and the default namespace
// exists. dir is a working directory (created if needed, typically a temp
// dir) that receives etcd's data, the apiserver's certificates, the token
// file, the service account key, the logs etcd.log and apiserver.log, and
// the kubeconfig file "kubeconfig".
//
// ctx bounds only the start; the processes keep running until Stop, and
// die with the calling process. Errors wrap ErrBinariesMissing when the
// binaries are missing; start errors include the tail of the failing
// process's log. On error nothing is left running.
func Start(ctx context.Context, dir string, opts Options) (*ControlPlane, error) {
	binDir, err := BinDir(opts)
	if err != nil {
		return nil, err
	}
	if err := checkBinaries(binDir); err != nil {
		return nil, err
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	c := &ControlPlane{dir: dir, binDir: binDir, opts: opts}
	if err := c.writeFiles(); err != nil {
		return nil, err
	}
	began := time.Now()
	c.etcd, err = c.launch(ctx, EtcdBinary, func() error {
		if !opts.KeepData {
			_ = os.RemoveAll(c.path("etcd-data")) // a failed attempt may have created it
		}
		return freePorts(&c.etcdClientPort, &c.etcdPeerPort)
	})
	if err != nil {
		return nil, err
	}
	c.logf("controlplane: etcd ready at %s after %v", c.EtcdURL(), time.Since(began).Round(time.Millisecond))
	c.api, err = c.launch(ctx, APIServerBinary, func() error { return freePorts(&c.apiPort) })
	if err == nil {
		err = c.writeKubeconfig()
	}
	if err != nil {
		c.Stop()
		return nil, err
	}
	c.logf("controlplane: kube-apiserver ready at %s after %v (dir %s)", c.URL(), time.Since(began).Round(time.Millisecond), dir)
	return c, nil
}

// StartT starts a control plane for a test with Start in t.TempDir() and
// registers Stop with t.Cleanup. When opts.Logf is nil it logs with
// t.Logf. When the binaries are missing it skips the test, or fails it if
// WATCHJOURNAL_REQUIRE_CONTROLPLANE is "1"; any other start error fails the
// test. If the test has failed by cleanup time, the tails of etcd.log and
// apiserver.log are logged (the temp dir is removed afterwards).
func StartT(t testing.TB, opts Options) *ControlPlane {
	t.Helper()
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	if c, dir, ok := takeSpare(opts); ok {
		c.logf("controlplane: kube-apiserver at %s, started ahead of the test (dir %s)", c.URL(), dir)
		t.Cleanup(func() {
			stopT(t, c, dir)
			_ = os.RemoveAll(dir)
		})
		return c
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	c, err := Start(ctx, dir, opts)
	if err != nil {
		if errors.Is(err, ErrBinariesMissing) && os.Getenv(EnvRequire) != "1" {
			t.Skipf("skipping: %v (set %s=1 to fail instead)", err, EnvRequire)
		}
		t.Fatalf("starting control plane: %v", err)
	}
	t.Cleanup(func() { stopT(t, c, dir) })
	return c
}

// stopT stops c at the end of t and, if t failed, logs the tails of the
// logs in dir.
func stopT(t testing.TB, c *ControlPlane, dir string) {
	c.Stop()
	if t.Failed() {
		for _, name := range []string{"etcd.log", "apiserver.log"} {
			t.Logf("controlplane: tail of %s:\n%s", name, tailFile(filepath.Join(dir, name), 40))
		}
	}
}

func (c *ControlPlane) logf(format string, args ...any) {
	if c.opts.Logf != nil {
		c.opts.Logf(format, args...)
	}
}

// URL returns the apiserver's base URL, https://127.0.0.1:PORT. The port
// stays the same across RestartAPIServer.
func (c *ControlPlane) URL() string { return "https://" + c.APIServerAddr() }

// APIServerAddr returns the apiserver's host:port, suitable for NewProxy.
func (c *ControlPlane) APIServerAddr() string { return loopback(c.apiPort) }

// EtcdURL returns etcd's client URL, http://127.0.0.1:PORT.
func (c *ControlPlane) EtcdURL() string { return "http://" + loopback(c.etcdClientPort) }

func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// KubeconfigPath returns the path of a kubeconfig file (in the working
// directory) with the apiserver URL, the admin token and
// insecure-skip-tls-verify.
func (c *ControlPlane) KubeconfigPath() string { return c.path("kubeconfig") }

// AdminToken returns the bearer token of the admin user (group
// system:masters).
func (c *ControlPlane) AdminToken() string { return c.token }

// RESTConfig returns a new client config for the admin user (bearer token,
// group system:masters) that skips TLS verification of the apiserver's
// self-signed certificate, with QPS 1000 and Burst 2000. Each call returns
// a fresh copy that the caller may modify.
func (c *ControlPlane) RESTConfig() *rest.Config { return c.TokenConfig(c.token) }

// TokenConfig is RESTConfig with another bearer token, e.g. one of
// Options.ExtraTokens for RBAC tests. An unknown token authenticates as
// nobody, so requests answer 401.
func (c *ControlPlane) TokenConfig(token string) *rest.Config {
	return &rest.Config{
		Host:            c.URL(),
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		QPS:             1000,
		Burst:           2000,
	}
}

// ProxiedRESTConfig is RESTConfig with the host set to the proxy's address,
// for a proxy created with NewProxy(host:port of URL()). TLS passes through
// the proxy unchanged; verification is skipped, so the certificate's names
// need not match the proxy's address.
func (c *ControlPlane) ProxiedRESTConfig(p *Proxy) *rest.Config {
	cfg := c.RESTConfig()
	cfg.Host = "https://" + p.Addr()
	return cfg
}

// Stop kills etcd and kube-apiserver (SIGKILL to each process group) and
// waits for them to exit. It is idempotent and safe to call concurrently;
// after it the other methods that need the processes return ErrStopped.
func (c *ControlPlane) Stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped.Swap(true) {
		return
	}
	c.api.stop(0)
	c.etcd.stop(0)
	c.api, c.etcd = nil, nil
	c.logf("controlplane: stopped")
}

// StopAPIServer stops the apiserver gracefully: SIGTERM, then SIGKILL
// after APIServerStopTimeout, and waits for the exit. etcd keeps running,
// so a test can change things (e.g. compact) while the apiserver is down.
// Stopping a stopped apiserver is a no-op; it returns ErrStopped after Stop.
func (c *ControlPlane) StopAPIServer() error {
	return c.halt(&c.api, func(p *process) {
		if p.stop(APIServerStopTimeout) {
			c.logf("controlplane: kube-apiserver stopped")
		} else {
			c.logf("controlplane: kube-apiserver did not stop within %v of SIGTERM; killed", APIServerStopTimeout)
		}
	})
}

// StartAPIServer starts the apiserver again after StopAPIServer, on the
// same port with the same arguments, and waits (at most
// APIServerReadyTimeout, and within ctx) for /readyz and the default
// namespace, retrying for a while if the port is still taken. Starting a
// running apiserver is a no-op. It returns ErrStopped after Stop, or a
// start error with the log's tail.
func (c *ControlPlane) StartAPIServer(ctx context.Context) error {
	return c.resume(ctx, APIServerBinary, &c.api)
}

// RestartAPIServer is StopAPIServer followed by StartAPIServer. etcd and
// its data are untouched.
func (c *ControlPlane) RestartAPIServer(ctx context.Context) error {
	if err := c.StopAPIServer(); err != nil {
		return err
	}
	return c.StartAPIServer(ctx)
}

// StopEtcd kills etcd (SIGKILL to its process group), as in an outage, and
// waits for it to exit. Its data directory is kept; the apiserver keeps
// running and its requests fail until StartEtcd. Stopping a stopped etcd is
// a no-op; it returns ErrStopped after Stop.
func (c *ControlPlane) StopEtcd() error {
	return c.halt(&c.etcd, func(p *process) {
		p.stop(0)
		c.logf("controlplane: etcd killed")
	})
}

// StartEtcd starts etcd again after StopEtcd, on the same ports and data
// directory, and waits (at most EtcdReadyTimeout, and within ctx) for
// /health. Its errors are StartAPIServer's.
func (c *ControlPlane) StartEtcd(ctx context.Context) error {
	return c.resume(ctx, EtcdBinary, &c.etcd)
}

// halt stops *pp with stop and clears it, unless it is already stopped.
func (c *ControlPlane) halt(pp **process, stop func(*process)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped.Load() {
		return ErrStopped
	}
	if *pp != nil {
		stop(*pp)
		*pp = nil
	}
	return nil
}

// resume starts bin again into *pp, unless it is running.
func (c *ControlPlane) resume(ctx context.Context, bin string, pp **process) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped.Load() {
		return ErrStopped
	}
	if *pp != nil {
		return nil
	}
	began := time.Now()
	p, err := c.launch(ctx, bin, nil)
	if err != nil {
		return err
	}
	*pp = p
	c.logf("controlplane: %s restarted after %v", bin, time.Since(began).Round(time.Millisecond))
	return nil
}

// launch starts bin (EtcdBinary or APIServerBinary) and waits until it is
// ready. A start that failed to bind its port is tried again, up to
// startAttempts times: on new ports from newPorts, or, when newPorts is nil
// (a restart, which keeps its ports), on the same ones after a pause.
func (c *ControlPlane) launch(ctx context.Context, bin string, newPorts func() error) (*process, error) {
	var err error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		if newPorts != nil {
			if err := newPorts(); err != nil {
				return nil, err
			}
		}
		p, runErr := c.run(ctx, bin)
		if err = runErr; err == nil {
			return p, nil
		}
		if p == nil || !p.portClash() {
			return nil, err
		}
		c.logf("controlplane: %s port clash, retrying (attempt %d)", bin, attempt)
		if newPorts == nil {
			select {
			case <-ctx.Done():
				return nil, err
			case <-time.After(time.Duration(attempt) * 500 * time.Millisecond):
			}
		}
	}
	return nil, err
}

// run starts bin once and waits until it is ready. On error the process (if
// any) has been killed and is returned for inspection.
func (c *ControlPlane) run(ctx context.Context, bin string) (*process, error) {
	args, log, timeout, probe := c.etcdArgs(), "etcd.log", EtcdReadyTimeout, c.probeEtcd
	if bin == APIServerBinary {
		args, log, timeout, probe = c.apiArgs(), "apiserver.log", cmp.Or(c.opts.APIServerReadyTimeout, APIServerReadyTimeout), c.probeAPI
	}
	p, err := startProcess(filepath.Join(c.binDir, bin), args, c.path(log))
	if err != nil {
		return nil, err
	}
	if err := p.waitReady(ctx, timeout, probe); err != nil {
		p.stop(0)
		return p, err
	}
	return p, nil
}

// ---------------------------------------------------------------------------
// Files.

func (c *ControlPlane) path(name string) string { return filepath.Join(c.dir, name) }

// writeFiles writes the token file and the service account key.
func (c *ControlPlane) writeFiles() error {
	c.token = rand.Text()
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	_ = w.Write([]string{c.token, "admin", "admin", "system:masters"})
	for i, tok := range slices.Sorted(maps.Keys(c.opts.ExtraTokens)) {
		user := c.opts.ExtraTokens[tok]
		for _, s := range []string{tok, user} {
			if s == "" || strings.ContainsAny(s, ",\"\r\n") {
				return fmt.Errorf("controlplane: invalid ExtraTokens entry %q: %q", tok, user)
			}
		}
		if tok == c.token {
			return fmt.Errorf("controlplane: ExtraTokens entry clashes with the admin token")
		}
		_ = w.Write([]string{tok, user, fmt.Sprintf("extra-%d", i)})
	}
	w.Flush()
	if err := os.WriteFile(c.path("tokens.csv"), buf.Bytes(), 0o600); err != nil {
		return fmt.Errorf("controlplane: %w", err)
	}
	// The apiserver reads the public key from the private key's file.
	key, err := keyutil.MakeEllipticPrivateKeyPEM()
	if err == nil {
		err = os.WriteFile(c.path("sa.key"), key, 0o600)
	}
	if err != nil {
		return fmt.Errorf("controlplane: service account key: %w", err)
	}
	return nil
}

func (c *ControlPlane) writeKubeconfig() error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["watchjournal"] = &clientcmdapi.Cluster{Server: c.URL(), InsecureSkipTLSVerify: true}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: c.token}
	cfg.Contexts["watchjournal"] = &clientcmdapi.Context{Cluster: "watchjournal", AuthInfo: "admin", Namespace: "default"}
	cfg.CurrentContext = "watchjournal"
	if err := clientcmd.WriteToFile(*cfg, c.KubeconfigPath()); err != nil {
		return fmt.Errorf("controlplane: writing kubeconfig: %w", err)
	}
	return nil
}

// ---------------------------------------------------------------------------
// Processes.

// process is a started child with its log file.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed when the process has exited
	err     error         // exit error, valid after done
}

// startProcess starts bin with args, appending stdout and stderr to logPath,
// in its own process group, killed if this process dies.
func startProcess(bin string, args []string, logPath string) (*process, error) {
	name := filepath.Base(bin)
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	fmt.Fprintf(f, "=== %s: %s %s\n", time.Now().Format(time.RFC3339Nano), bin, strings.Join(args, " "))
	cmd := exec.Command(bin, args...)
	cmd.Stdout = f
	cmd.Stderr = f
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("controlplane: starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the process group and waits up to grace for the
// process to exit, then SIGKILLs the group and waits; with grace 0 it kills
// at once. It reports whether the process exited before SIGKILL. A nil
// process is a no-op.
func (p *process) stop(grace time.Duration) (graceful bool) {
	if p == nil {
		return true
	}
	if grace > 0 && !p.exited() {
		termGroup(p.cmd.Process)
		select {
		case <-p.done:
		case <-time.After(grace):
		}
	}
	if graceful = p.exited(); !graceful {
		killGroup(p.cmd.Process)
	}
	<-p.done
	return graceful
}

// waitReady polls probe every pollInterval until it succeeds, the process
// exits, timeout passes or ctx ends. Its error has the log's tail.
func (p *process) waitReady(ctx context.Context, timeout time.Duration, probe func(context.Context) error) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		if p.exited() {
			return false, errExited
		}
		ctx, cancel := context.WithTimeout(ctx, probeTimeout)
		defer cancel()
		last = probe(ctx)
		return last == nil, nil
	})
	if err == nil {
		return nil
	}
	msg := fmt.Sprintf("not ready within %v: %v (last probe: %v)", timeout, err, last)
	if p.exited() {
		msg = fmt.Sprintf("exited during start (%v)", p.err)
	}
	return fmt.Errorf("controlplane: %s: %s\n--- tail of %s ---\n%s", p.name, msg, p.logPath, tailFile(p.logPath, 30))
}

var errExited = errors.New("exited")

// portClash reports whether the log of the process's start shows it failed
// to bind.
func (p *process) portClash() bool {
	data, _ := os.ReadFile(p.logPath)
	if i := bytes.LastIndex(data, []byte("\n=== ")); i >= 0 {
		data = data[i:]
	}
	return bytes.Contains(data, []byte("address already in use"))
}

// tailFile returns the last n lines of a file's last 16 KiB.
func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	data = data[max(0, len(data)-16<<10):]
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// freePorts sets each of ports to a distinct loopback TCP port that was
// free a moment ago.
func freePorts(ports ...*int) error {
	for _, port := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("controlplane: finding a free port: %w", err)
		}
		defer l.Close()
		*port = l.Addr().(*net.TCPAddr).Port
	}
	return nil
}

// ---------------------------------------------------------------------------
// etcd.

func (c *ControlPlane) etcdArgs() []string {
	client, peer := c.EtcdURL(), "http://"+loopback(c.etcdPeerPort)
	return []string{
		"--name=default",
		"--data-dir=" + c.path("etcd-data"),
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=default=" + peer,
		"--initial-cluster-state=new",
		"--initial-cluster-token=watchjournal-" + rand.Text(),
		"--log-level=warn",
		// Test data: losing it on a machine crash does not matter.
		"--unsafe-no-fsync=true",
		"--quota-backend-bytes=" + strconv.Itoa(8<<30), // etcd's largest advised: room for 3 GB of Secrets
		"--auto-compaction-retention=0",
	}
}

func (c *ControlPlane) probeEtcd(ctx context.Context) error {
	var h struct {
		Health string `json:"health"`
	}
	if err := c.etcdDo(ctx, http.MethodGet, "/health", "", &h); err != nil {
		return err
	}
	if h.Health != "true" {
		return fmt.Errorf("/health answered health %q", h.Health)
	}
	return nil
}

// Compact compacts etcd's key space physically and returns the revision it
// compacted at. Afterwards a watch or list from any resourceVersion a
// client has seen answers 410 Gone (with the watch cache off), the last
// write's included: a watch from resourceVersion W starts at revision W+1,
// which a compaction at the current revision would keep when W+1 is that
// revision. So it first writes a key outside the apiserver's prefix twice
// (POST /v3/kv/put of /watchjournal-compact-probe) and compacts at the
// second write's revision (POST /v3/kv/compaction), above every revision a
// client can have seen plus one. Compacting again at an already compacted
// revision is not an error. Errors describe the failing request.
func (c *ControlPlane) Compact(ctx context.Context) (revision int64, err error) {
	if c.stopped.Load() {
		return 0, ErrStopped
	}
	// The header of a put carries the revision of the write.
	var rr struct {
		Header struct {
			Revision int64 `json:"revision,string"`
		} `json:"header"`
	}
	for range 2 {
		// key "/watchjournal-compact-probe", value "1", base64 as the gateway takes them
		if err := c.etcdDo(ctx, http.MethodPost, "/v3/kv/put", `{"key":"L3dhdGNoam91cm5hbC1jb21wYWN0LXByb2Jl","value":"MQ=="}`, &rr); err != nil {
			return 0, err
		}
	}
	rev := rr.Header.Revision
	req := fmt.Sprintf(`{"revision":"%d","physical":true}`, rev)
	if err := c.etcdDo(ctx, http.MethodPost, "/v3/kv/compaction", req, nil); err != nil && !strings.Contains(err.Error(), "required revision has been compacted") {
		return 0, err
	}
	return rev, nil
}

// etcdDo sends body (JSON; none if empty) to etcd's path and decodes the
// answer into out unless out is nil.
func (c *ControlPlane) etcdDo(ctx context.Context, method, path, body string, out any) error {
	resp, err := httpDo(ctx, method, c.EtcdURL()+path, "", body)
	if err == nil && out != nil {
		if err = json.Unmarshal(resp, out); err != nil {
			err = fmt.Errorf("decoding %q: %w", truncate(resp), err)
		}
	}
	if err != nil {
		return fmt.Errorf("controlplane: %s %s: %w", method, path, err)
	}
	return nil
}

// ---------------------------------------------------------------------------
// kube-apiserver.

func (c *ControlPlane) apiArgs() []string {
	args := []string{
		"--etcd-servers=" + c.EtcdURL(),
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(c.apiPort),
		"--cert-dir=" + c.path("apiserver-certs"),
		"--token-auth-file=" + c.path("tokens.csv"),
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + c.path("sa.key"),
		"--service-account-signing-key-file=" + c.path("sa.key"),
		"--service-cluster-ip-range=10.0.0.0/24",
		"--watch-cache=" + strconv.FormatBool(c.opts.WatchCache),
		"--etcd-compaction-interval=0",
		"--max-requests-inflight=2000",
		"--max-mutating-requests-inflight=1000",
		"--enable-priority-and-fairness=false",
		// No controller manager creates the default service accounts, so
		// the ServiceAccount admission plugin would reject every Pod.
		"--disable-admission-plugins=ServiceAccount",
		"--profiling=false",
		"--v=1",
	}
	return append(args, c.opts.ExtraAPIServerArgs...)
}

// probeAPI checks /readyz, then the default namespace, which a post-start
// hook creates shortly after /readyz and clients expect.
func (c *ControlPlane) probeAPI(ctx context.Context) error {
	for _, path := range []string{"/readyz", "/api/v1/namespaces/default"} {
		body, err := httpDo(ctx, http.MethodGet, c.URL()+path, c.token, "")
		if err == nil && path == "/readyz" && strings.TrimSpace(string(body)) != "ok" {
			err = fmt.Errorf("answered %q", truncate(body))
		}
		if err != nil {
			return fmt.Errorf("GET %s: %w", path, err)
		}
	}
	return nil
}

// probeClient uses no proxy and keeps no connections.
var probeClient = &http.Client{Transport: &http.Transport{
	TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, // the apiserver's cert is self-signed
	DisableKeepAlives: true,
}}

// httpDo performs one request, with body as JSON unless it is empty, and
// returns the body of a 200 answer; another status is an error.
func httpDo(ctx context.Context, method, u, token, body string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := probeClient.Do(req)
	if err != nil {
		return nil, err.(*url.Error).Err // Do's errors are *url.Error
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("HTTP %d: %s", resp.StatusCode, truncate(data))
	}
	return data, err
}

func truncate(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}
