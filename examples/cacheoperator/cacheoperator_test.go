package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/internal/testing/mainbin"
)

// child is the operator as a separate process; it counts the reconcile
// lines it prints.
type child struct {
	cmd        *exec.Cmd
	mu         sync.Mutex
	reconciled map[string]int
	changed    chan struct{}
	exited     chan struct{}
}

func startChild(t *testing.T, bin string, args ...string) *child {
	t.Helper()
	cmd := exec.Command(bin, args...)
	c := &child{cmd: cmd, reconciled: map[string]int{}, changed: make(chan struct{}), exited: make(chan struct{})}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &logWriter{t: t}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(c.exited)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if k, ok := strings.CutPrefix(sc.Text(), "reconcile "); ok {
				c.mu.Lock()
				c.reconciled[k]++
				close(c.changed)
				c.changed = make(chan struct{})
				c.mu.Unlock()
			}
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(c.kill)
	return c
}

// kill stops the operator with SIGKILL (no final commit) and waits for it.
func (c *child) kill() { _ = c.cmd.Process.Kill(); <-c.exited }

// keys returns the keys reconciled so far.
func (c *child) keys() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(maps.Keys(c.reconciled))
}

// waitReconciled waits until key has been reconciled more than n times,
// and returns the count.
func (c *child) waitReconciled(t *testing.T, key string, n int, why string) int {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		c.mu.Lock()
		got, ch := c.reconciled[key], c.changed
		c.mu.Unlock()
		if got > n {
			return got
		}
		select {
		case <-ch:
		case <-c.exited:
			t.Fatalf("%s: the operator exited", why)
		case <-deadline:
			t.Fatalf("%s: %s reconciled %d times, want more than %d", why, key, got, n)
		}
	}
}

type logWriter struct{ t *testing.T }

func (w *logWriter) Write(p []byte) (int, error) {
	w.t.Logf("operator: %s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// waitSecret waits for an ADDED of the Secret name (a watch without a
// resourceVersion starts with the objects that exist).
func waitSecret(t *testing.T, kube kubernetes.Interface, ns, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w, err := kube.CoreV1().Secrets(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		if ev.Type == watch.Added {
			return
		}
	}
	t.Fatalf("no Secret %s/%s", ns, name)
}

// bin is the operator, built once for the package's tests (TestMain).
var bin string

func TestMain(m *testing.M) { os.Exit(mainbin.RunBuilt(m, "cacheoperator", &bin)) }

// startInNamespace starts a control plane and creates namespace ns in it;
// it returns the control plane, an admin client and a context that ends
// after timeout or with the test.
func startInNamespace(t *testing.T, ns string, timeout time.Duration) (*controlplane.ControlPlane, *kubernetes.Clientset, context.Context) {
	t.Helper()
	cp := controlplane.StartT(t, controlplane.Options{})
	kube := cp.CreateNamespaceT(t, ns)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return cp, kube, ctx
}

// createConfigMap creates ConfigMap ns/name with labels and data.
func createConfigMap(t *testing.T, ctx context.Context, kube kubernetes.Interface, ns, name string, labels, data map[string]string) {
	t.Helper()
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}, Data: data}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// freeAddr returns a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// operator is one run of the operator: its process and endpoints.
type operator struct {
	*child
	metrics, probes string // base URLs
}

// startOperator runs the operator on the cache directory dir, with leader
// election in the namespace leaderNS ("": off).
func startOperator(t *testing.T, cp *controlplane.ControlPlane, dir, leaderNS string) *operator {
	t.Helper()
	m, p := freeAddr(t), freeAddr(t)
	args := []string{"--kubeconfig", cp.KubeconfigPath(), "--dir", dir, "--metrics-bind-address", m, "--health-probe-bind-address", p}
	if leaderNS != "" {
		args = append(args, "--leader-elect", "--leader-election-namespace", leaderNS)
	} else {
		args = append(args, "--leader-elect=false")
	}
	return &operator{child: startChild(t, bin, args...), metrics: "http://" + m, probes: "http://" + p}
}

// get returns url's status code and body; code 0 when it did not answer.
func get(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// eventually polls cond (every 100 ms, up to a minute) until it returns
// "" and fails t with its last answer otherwise.
func (o *operator) eventually(t *testing.T, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		why := cond()
		if why == "" {
			return
		}
		select {
		case <-o.exited:
			t.Fatalf("%s: the operator exited (%s)", what, why)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s", what, why)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// scrape reads the operator's /metrics.
func (o *operator) scrape() (map[string]*dto.MetricFamily, error) {
	code, body := get(o.metrics + "/metrics")
	if code != http.StatusOK {
		return nil, fmt.Errorf("/metrics: %d %s", code, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(strings.NewReader(body))
}

// labelOf returns m's label name.
func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// exactConsumers are the consumers of the controller's three sources.
var exactConsumers = []string{"exact/secrets/v1/ConfigMap", "exact/secrets/v1/Secret", "exact/secrets/v1/ServiceAccount"}

// waitCommitted waits until /metrics shows each of the consumers with
// lag 0: every journaled event reconciled and committed.
func (o *operator) waitCommitted(t *testing.T, why string, consumers ...string) {
	t.Helper()
	o.eventually(t, why, func() string {
		mfs, err := o.scrape()
		if err != nil {
			return err.Error()
		}
		lag := map[string]float64{}
		for _, m := range mfs["watchjournal_consumer_lag_events"].GetMetric() {
			lag[labelOf(m, "consumer")] = m.GetGauge().GetValue()
		}
		for _, c := range consumers {
			if v, ok := lag[c]; !ok || v != 0 {
				return fmt.Sprintf("consumer lags %v; want %v at 0", lag, consumers)
			}
		}
		return ""
	})
}

// waitSecretsJournaled waits until the operator's Secrets journal holds as
// many objects as the server has Secrets: a Secret the operator just made
// again (Owns) is in the journal, so the commits waited for next cover its
// event, and a restart does not deliver it again.
func (o *operator) waitSecretsJournaled(t *testing.T, kube kubernetes.Interface, why string) {
	t.Helper()
	o.eventually(t, why, func() string {
		list, err := kube.CoreV1().Secrets("").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		mfs, err := o.scrape()
		if err != nil {
			return err.Error()
		}
		for _, m := range mfs["watchjournal_index_objects"].GetMetric() {
			if labelOf(m, "resource") == "secrets.v1 --metadata-only" {
				if got := int(m.GetGauge().GetValue()); got != len(list.Items) {
					return fmt.Sprintf("the Secrets journal holds %d objects; the server has %d", got, len(list.Items))
				}
				return ""
			}
		}
		return "no watchjournal_index_objects series for secrets.v1 --metadata-only"
	})
}

// waitReady waits until /readyz answers 200 (every journal synced).
func (o *operator) waitReady(t *testing.T) {
	t.Helper()
	o.eventually(t, "readyz", func() string {
		if code, body := get(o.probes + "/readyz"); code != http.StatusOK {
			return fmt.Sprintf("/readyz: %d %s", code, body)
		}
		return ""
	})
}

// The example operator, on the journal cache, against the real apiserver,
// with leader election: For-like with a label predicate, Owns-like
// (metadata-only Secrets: deleting one reconciles its owner) and
// Watches-like through a field index; an unlabelled ConfigMap gets no
// Secret. Its probes answer (/healthz, /readyz and the journals' check)
// and /metrics serves the watchjournal_* series of each journal file,
// labeled by resource, the sources' consumers included.
func TestCacheOperator_BuilderOnTheJournalCache(t *testing.T) {
	ns := "cop"
	cp, kube, ctx := startInNamespace(t, ns, 3*time.Minute)
	for name, labels := range map[string]map[string]string{"a": {label: "true"}, "b": nil} {
		createConfigMap(t, ctx, kube, ns, name, labels, map[string]string{"serviceAccount": "sa1"})
	}
	o := startOperator(t, cp, filepath.Join(t.TempDir(), "cache"), ns)
	c := o.child
	n := c.waitReconciled(t, ns+"/a", 0, "For")
	waitSecret(t, kube, ns, "a-secret")
	if err := kube.CoreV1().Secrets(ns).Delete(ctx, "a-secret", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	n = c.waitReconciled(t, ns+"/a", n, "Owns: the Secret deleted")
	waitSecret(t, kube, ns, "a-secret")
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "sa1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitReconciled(t, ns+"/a", n, "Watches: the ServiceAccount mapped through the index")
	// b is mapped by the index too (its data names sa1), so it is
	// reconciled once and gets no Secret (no label).
	c.waitReconciled(t, ns+"/b", 0, "Watches: b")
	if _, err := kube.CoreV1().Secrets(ns).Get(ctx, "b-secret", metav1.GetOptions{}); err == nil {
		t.Error("b, without the label, got a Secret")
	}

	// Leader election: the operator holds its Lease.
	lease, err := kube.CoordinationV1().Leases(ns).Get(ctx, "cacheoperator.example.watchjournal.io", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the leader election Lease: %v", err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		t.Errorf("the leader election Lease has no holder: %+v", lease.Spec)
	}

	// Probes.
	o.waitReady(t)
	for _, path := range []string{"/healthz", "/readyz", "/healthz/journals", "/readyz/journals"} {
		if code, body := get(o.probes + path); code != http.StatusOK {
			t.Errorf("%s: %d %s; want 200", path, code, body)
		}
	}

	// Metrics: the journals' series, by resource, and the sources' consumers.
	o.waitCommitted(t, "metrics: every consumer committed", exactConsumers...)
	mfs, err := o.scrape()
	if err != nil {
		t.Fatal(err)
	}
	synced := map[string]float64{}
	for _, m := range mfs["watchjournal_synced"].GetMetric() {
		synced[labelOf(m, "resource")] = m.GetGauge().GetValue()
	}
	for _, res := range []string{"configmaps.v1", "secrets.v1 --metadata-only", "serviceaccounts.v1"} {
		if synced[res] != 1 {
			t.Errorf("watchjournal_synced{resource=%q} = %v (all: %v); want 1", res, synced[res], synced)
		}
	}
	for _, name := range []string{"watchjournal_lists_total", "watchjournal_gone_total", "watchjournal_backoffs_total",
		"watchjournal_journal_head_offset", "watchjournal_index_objects", "watchjournal_consumer_committed_offset"} {
		if len(mfs[name].GetMetric()) == 0 {
			t.Errorf("/metrics has no %s", name)
		}
	}
}

// The example operator is restart-exact: stopped with SIGKILL once every
// source committed, it reconciles on restart exactly the ConfigMaps whose
// events it missed — two changed, one deleted, one whose owned Secret was
// deleted, one a new ServiceAccount maps to — and neither the untouched
// ones nor an unlabeled one that changed (its predicate filters it). Twice:
// the second time etcd is compacted while the operator is down, so its
// watches resume with 410 Gone and the journals relist.
func TestCacheOperator_RestartReconcilesExactlyWhatChanged(t *testing.T) {
	ns := "rex"
	cp, kube, ctx := startInNamespace(t, ns, 4*time.Minute)
	const labeled = 10
	for i := range labeled {
		createConfigMap(t, ctx, kube, ns, fmt.Sprintf("cm-%d", i), map[string]string{label: "true"}, map[string]string{"serviceAccount": fmt.Sprintf("sa-%d", i)})
	}
	createConfigMap(t, ctx, kube, ns, "plain", nil, nil)
	dir := filepath.Join(t.TempDir(), "cache")
	o := startOperator(t, cp, dir, "")
	for i := range labeled {
		o.waitReconciled(t, fmt.Sprintf("%s/cm-%d", ns, i), 0, "first start")
		waitSecret(t, kube, ns, fmt.Sprintf("cm-%d-secret", i))
	}
	// No ServiceAccount exists yet: a source whose journal was empty when
	// it started creates its consumer with its first event's commit (until
	// then a start replays its journal, which is empty).
	o.waitSecretsJournaled(t, kube, "first start: every Secret journaled")
	o.waitCommitted(t, "first start: every consumer committed", exactConsumers[:2]...)

	for _, round := range []struct {
		name                        string
		changed                     []int // patched
		deleted, secretDeleted, sas int   // cm-<n> deleted; cm-<n>-secret deleted; sa-<n> created
		compact                     bool
	}{
		{name: "restart", changed: []int{1, 2}, deleted: 3, secretDeleted: 4, sas: 5},
		{name: "restart after etcd compaction", changed: []int{6, 7}, deleted: 8, secretDeleted: 9, sas: 0, compact: true},
	} {
		o.kill()
		// While the operator is down.
		patch := []byte(fmt.Sprintf(`{"data":{"changed":%q}}`, round.name))
		want := []string{}
		for _, i := range round.changed {
			if _, err := kube.CoreV1().ConfigMaps(ns).Patch(ctx, fmt.Sprintf("cm-%d", i), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := kube.CoreV1().ConfigMaps(ns).Patch(ctx, "plain", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := kube.CoreV1().ConfigMaps(ns).Delete(ctx, fmt.Sprintf("cm-%d", round.deleted), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := kube.CoreV1().Secrets(ns).Delete(ctx, fmt.Sprintf("cm-%d-secret", round.secretDeleted), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("sa-%d", round.sas)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if round.compact {
			if _, err := cp.Compact(ctx); err != nil {
				t.Fatal(err)
			}
		}
		for _, i := range append(slices.Clone(round.changed), round.deleted, round.secretDeleted, round.sas) {
			want = append(want, fmt.Sprintf("%s/cm-%d", ns, i))
		}
		slices.Sort(want)

		o = startOperator(t, cp, dir, "")
		o.waitReady(t)
		for _, k := range want {
			o.waitReconciled(t, k, 0, round.name)
		}
		waitSecret(t, kube, ns, fmt.Sprintf("cm-%d-secret", round.secretDeleted)) // Owns: made again
		o.waitSecretsJournaled(t, kube, round.name+": every Secret journaled")
		o.waitCommitted(t, round.name+": every consumer committed", exactConsumers...)
		if got := o.keys(); !slices.Equal(got, want) {
			t.Errorf("%s: reconciled %v; want exactly %v", round.name, got, want)
		}
		if round.compact {
			mfs, err := o.scrape()
			if err != nil {
				t.Fatal(err)
			}
			gone := 0.0
			for _, m := range mfs["watchjournal_gone_total"].GetMetric() {
				gone += m.GetCounter().GetValue()
			}
			if gone == 0 {
				t.Errorf("%s: watchjournal_gone_total is 0; want the resumed watches to have met 410 Gone", round.name)
			}
		}
	}
}

// term stops the operator with SIGTERM (a graceful stop: the leader
// releases its Lease) and waits for it.
func (c *child) term() { _ = c.cmd.Process.Signal(syscall.SIGTERM); <-c.exited }

// Two replicas with leader election, each with its own cache directory:
// the second is ready (its cache runs and is synced) but reconciles
// nothing while the first leads; once the first stops, the second takes
// the Lease and reconciles.
func TestCacheOperator_LeaderElection(t *testing.T) {
	ns := "le"
	cp, kube, ctx := startInNamespace(t, ns, 3*time.Minute)
	create := func(name string) {
		t.Helper()
		createConfigMap(t, ctx, kube, ns, name, map[string]string{label: "true"}, nil)
	}
	create("a")
	leader := startOperator(t, cp, filepath.Join(t.TempDir(), "one"), ns)
	leader.waitReconciled(t, ns+"/a", 0, "leader")
	standby := startOperator(t, cp, filepath.Join(t.TempDir(), "two"), ns)
	standby.waitReady(t)
	create("b")
	leader.waitReconciled(t, ns+"/b", 0, "leader, a ConfigMap created with a standby running")
	waitSecret(t, kube, ns, "b-secret")
	if got := standby.keys(); len(got) != 0 {
		t.Errorf("the standby reconciled %v; want nothing while the other replica leads", got)
	}

	leader.term()
	create("c")
	standby.waitReconciled(t, ns+"/c", 0, "the new leader")
	waitSecret(t, kube, ns, "c-secret")
}
