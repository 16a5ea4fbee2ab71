package controlplane

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

func newClient(t *testing.T, cfg *rest.Config) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func TestControlPlane(t *testing.T) {
	const userToken = "user-token-1"
	cp := StartT(t, Options{ExtraTokens: map[string]string{userToken: "alice"}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cs := newClient(t, cp.RESTConfig())
	cms := cs.CoreV1().ConfigMaps("default")

	cm, err := cms.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "first"},
		Data:       map[string]string{"n": "0"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	oldRV := cm.ResourceVersion
	// Write a few more revisions, so that compaction at the current
	// revision removes the one right after oldRV.
	for i := 1; i <= 3; i++ {
		cm.Data["n"] = strconv.Itoa(i)
		if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("update: %v", err)
		}
	}

	t.Run("WatchBeforeCompactionReplays", func(t *testing.T) {
		ev := nextEvent(t, watchFrom(t, ctx, cms, oldRV))
		if ev.Type != watch.Modified {
			t.Fatalf("first event %v %#v, want MODIFIED", ev.Type, ev.Object)
		}
	})

	rev, err := cp.Compact(ctx)
	if err != nil {
		t.Fatalf("compact: %v", err)
	}
	old, _ := strconv.ParseInt(oldRV, 10, 64)
	if rev < old+3 {
		t.Fatalf("compacted at %d, want >= %d", rev, old+3)
	}
	t.Logf("compacted at revision %d (ConfigMap created at %s)", rev, oldRV)
	if again, err := cp.Compact(ctx); err != nil || again < rev {
		t.Fatalf("second compact: %d, %v", again, err)
	}

	t.Run("WatchFromCompactedRVIsGone", func(t *testing.T) {
		w := watchFrom(t, ctx, cms, oldRV)
		ev := nextEvent(t, w)
		if ev.Type != watch.Error {
			t.Fatalf("first event %v %#v, want ERROR", ev.Type, ev.Object)
		}
		status, ok := ev.Object.(*metav1.Status)
		if !ok {
			t.Fatalf("ERROR event carries %T, want *metav1.Status", ev.Object)
		}
		if status.Code != http.StatusGone || !apierrors.IsResourceExpired(apierrors.FromObject(status)) {
			t.Fatalf("status %+v, want code 410 reason Expired", status)
		}
		// The stream then ends.
		select {
		case ev, ok := <-w.ResultChan():
			if ok {
				t.Fatalf("unexpected event after ERROR: %v %#v", ev.Type, ev.Object)
			}
		case <-ctx.Done():
			t.Fatal("watch did not end after ERROR")
		}
	})

	// A watch from the last write's resourceVersion starts at the next
	// revision, which nothing has written yet: Compact still makes it 410.
	t.Run("WatchFromTheLastWriteIsGone", func(t *testing.T) {
		last, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "last-write"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		if _, err := cp.Compact(ctx); err != nil {
			t.Fatalf("compact: %v", err)
		}
		ev := nextEvent(t, watchFrom(t, ctx, cms, last.ResourceVersion))
		status, ok := ev.Object.(*metav1.Status)
		if ev.Type != watch.Error || !ok || status.Code != http.StatusGone {
			t.Fatalf("first event from the last write's resourceVersion %s: %v %#v; want ERROR 410", last.ResourceVersion, ev.Type, ev.Object)
		}
	})

	t.Run("RBAC", func(t *testing.T) {
		_, err := newClient(t, cp.TokenConfig(userToken)).CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
		if !apierrors.IsForbidden(err) {
			t.Fatalf("list as alice: %v, want Forbidden", err)
		}
		_, err = newClient(t, cp.TokenConfig("no-such-token")).CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
		if !apierrors.IsUnauthorized(err) {
			t.Fatalf("list with unknown token: %v, want Unauthorized", err)
		}
	})

	t.Run("Kubeconfig", func(t *testing.T) {
		cfg, err := clientcmd.BuildConfigFromFlags("", cp.KubeconfigPath())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := newClient(t, cfg).CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
			t.Fatalf("get default namespace via kubeconfig: %v", err)
		}
	})

	t.Run("RestartAPIServer", func(t *testing.T) {
		url := cp.URL()
		began := time.Now()
		if err := cp.RestartAPIServer(ctx); err != nil {
			t.Fatalf("restart: %v", err)
		}
		t.Logf("restart took %v", time.Since(began).Round(time.Millisecond))
		if cp.URL() != url {
			t.Fatalf("URL changed from %s to %s", url, cp.URL())
		}
		// A fresh client, and the old one (its connections died).
		for _, c := range []*kubernetes.Clientset{newClient(t, cp.RESTConfig()), cs} {
			list, err := c.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatalf("list after restart: %v", err)
			}
			if !hasConfigMap(list.Items, "first", "3") {
				t.Fatalf("list after restart lacks ConfigMap first with n=3: %+v", list.Items)
			}
		}
	})

	t.Run("StopStartAPIServer", func(t *testing.T) {
		if err := cp.StopAPIServer(); err != nil {
			t.Fatal(err)
		}
		if err := cp.StopAPIServer(); err != nil {
			t.Fatalf("second StopAPIServer: %v", err)
		}
		// etcd still answers while the apiserver is down.
		if _, err := cp.Compact(ctx); err != nil {
			t.Fatalf("compact while apiserver down: %v", err)
		}
		if err := cp.StartAPIServer(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := cms.Get(ctx, "first", metav1.GetOptions{}); err != nil {
			t.Fatalf("get after start: %v", err)
		}
	})

	cp.Stop()
	cp.Stop()
	if err := cp.StartAPIServer(ctx); !errors.Is(err, ErrStopped) {
		t.Fatalf("StartAPIServer after Stop: %v, want ErrStopped", err)
	}
}

// watchFrom watches cms from resourceVersion rv until the test ends.
func watchFrom(t *testing.T, ctx context.Context, cms corev1client.ConfigMapInterface, rv string) watch.Interface {
	t.Helper()
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	t.Cleanup(w.Stop)
	return w
}

func nextEvent(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch ended without an event")
		}
		return ev
	case <-time.After(30 * time.Second):
		t.Fatal("no watch event within 30s")
	}
	panic("unreachable")
}

func hasConfigMap(items []corev1.ConfigMap, name, n string) bool {
	for _, cm := range items {
		if cm.Name == name && cm.Data["n"] == n {
			return true
		}
	}
	return false
}

func TestProxy(t *testing.T) {
	cp := StartT(t, Options{})
	p, err := NewProxy(cp.APIServerAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	cfg := cp.ProxiedRESTConfig(p)
	cfg.Timeout = 2 * time.Second
	cs := newClient(t, cfg)
	// get issues one request and no retries: client-go retries a failed
	// GET up to 10 times, one second apart, when the connection was reset.
	get := func() error {
		return cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/namespaces/default").MaxRetries(0).Do(ctx).Error()
	}

	if err := get(); err != nil {
		t.Fatalf("through healed proxy: %v", err)
	}
	if p.Conns() == 0 {
		t.Fatal("Conns() = 0 after a request")
	}

	p.Cut()
	if err := get(); err == nil {
		t.Fatal("request through cut proxy succeeded")
	} else {
		t.Logf("cut: %v", err)
	}
	n := p.Conns()
	if err := get(); err == nil {
		t.Fatal("second request through cut proxy succeeded")
	}
	if p.Conns() <= n {
		t.Fatalf("Conns() did not grow from %d while cut", n)
	}

	p.Heal()
	if err := get(); err != nil {
		t.Fatalf("after Heal: %v", err)
	}

	p.Stall()
	began := time.Now()
	err = get()
	elapsed := time.Since(began)
	if err == nil {
		t.Fatal("request through stalled proxy succeeded")
	}
	t.Logf("stall: %v after %v", err, elapsed.Round(time.Millisecond))
	if elapsed < 2*time.Second {
		t.Fatalf("stalled request failed after %v, before the 2s timeout: %v", elapsed, err)
	}
	if p.Open() == 0 {
		t.Fatal("Stall closed the connections")
	}

	p.Heal()
	if err := get(); err != nil {
		t.Fatalf("after Heal from stall: %v", err)
	}

	// A direct client is unaffected by the proxy.
	p.Cut()
	if _, err := newClient(t, cp.RESTConfig()).CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("direct request: %v", err)
	}
}

func TestBinariesMissing(t *testing.T) {
	dir := t.TempDir()
	_, err := Start(context.Background(), t.TempDir(), Options{BinDir: dir})
	if !errors.Is(err, ErrBinariesMissing) {
		t.Fatalf("Start with empty BinDir: %v, want ErrBinariesMissing", err)
	}
	t.Log(err)
}

func TestDefaultBinDir(t *testing.T) {
	if os.Getenv(EnvBinDir) != "" {
		t.Skipf("%s is set", EnvBinDir)
	}
	d, err := BinDir(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(d + "/../../go.mod"); err != nil {
		t.Fatalf("BinDir %s is not <module root>/.cache/bin: %v", d, err)
	}
}
