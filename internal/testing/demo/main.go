// Command demo is watchjournal's main job, run by `make demo`: it starts a
// local control plane (etcd and kube-apiserver on loopback, watch cache off
// so that 410 Gone follows compaction), runs `journalctl watch configmaps`,
// creates, updates and deletes ConfigMaps, stops the watcher, changes things
// while it is down, compacts etcd so the stored resourceVersion is gone,
// starts the watcher again and prints `journalctl events`: the relist's
// DELETED, ADDED and MODIFIED events close the gap. It exits non-zero if
// the journal does not hold exactly what it should.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/journal"
)

const ns = "demo"

func main() {
	journalctl := flag.String("journalctl", "journalctl", "path of the journalctl binary")
	keep := flag.Bool("keep", false, "keep the working directory")
	flag.Parse()
	if err := run(*journalctl, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
	fmt.Println("\ndemo OK: the restart's relist found the DELETED, ADDED and MODIFIED events that happened while the watcher was down")
}

func step(format string, args ...any) { fmt.Printf("\n==> "+format+"\n", args...) }

func run(journalctl string, keep bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "watchjournal-demo-")
	if err != nil {
		return err
	}
	if !keep {
		defer os.RemoveAll(dir)
	}
	db := filepath.Join(dir, "configmaps.db")

	step("starting etcd and kube-apiserver on loopback (watch cache off, no automatic compaction)")
	cp, err := controlplane.Start(ctx, filepath.Join(dir, "controlplane"), controlplane.Options{})
	if err != nil {
		return err
	}
	defer cp.Stop()
	fmt.Println("apiserver:", cp.URL(), " kubeconfig:", cp.KubeconfigPath())
	kube := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	cms := kube.CoreV1().ConfigMaps(ns)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	// The changes: each one after a failed one does nothing, and
	// changeErr is the failure.
	var changeErr error
	create := func(name, v string) {
		if changeErr == nil {
			_, changeErr = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"v": v}}, metav1.CreateOptions{})
			fmt.Printf("   create %s\n", name)
		}
	}
	update := func(name, v string) {
		var cm *corev1.ConfigMap
		if changeErr == nil {
			cm, changeErr = cms.Get(ctx, name, metav1.GetOptions{})
		}
		if changeErr == nil {
			cm.Data["v"] = v
			_, changeErr = cms.Update(ctx, cm, metav1.UpdateOptions{})
			fmt.Printf("   update %s\n", name)
		}
	}
	del := func(name string) {
		if changeErr == nil {
			fmt.Printf("   delete %s\n", name)
			changeErr = cms.Delete(ctx, name, metav1.DeleteOptions{})
		}
	}

	create("alpha", "1")
	create("bravo", "1")
	create("charlie", "1")
	if changeErr != nil {
		return changeErr
	}

	step("journalctl watch configmaps -n %s --db %s", ns, db)
	w, err := startWatch(journalctl, cp.KubeconfigPath(), db, dir)
	if err != nil {
		return err
	}
	if err := waitEvents(ctx, journalctl, db, 3); err != nil {
		return err
	}

	step("live changes while the watcher runs")
	update("alpha", "2")
	create("delta", "1")
	del("charlie")
	if changeErr != nil {
		return changeErr
	}
	if err := waitEvents(ctx, journalctl, db, 6); err != nil {
		return err
	}

	step("stopping the watcher (SIGTERM)")
	if err := w.stop(); err != nil {
		return err
	}

	step("while the watcher is down: delete bravo, recreate delta (new UID), update alpha, create echo")
	del("bravo")
	del("delta")
	create("delta", "2")
	update("alpha", "3")
	create("echo", "1")
	if changeErr != nil {
		return changeErr
	}

	step("compacting etcd: the stored resourceVersion is no longer served (410 Gone)")
	rev, err := cp.Compact(ctx)
	if err != nil {
		return err
	}
	fmt.Println("   compacted at revision", rev)

	step("starting the watcher again on the same file")
	w, err = startWatch(journalctl, cp.KubeconfigPath(), db, dir)
	if err != nil {
		return err
	}
	// 6 events before; the relist adds DELETED bravo, DELETED delta (old
	// UID), ADDED delta (new UID), MODIFIED alpha, ADDED echo.
	if err := waitEvents(ctx, journalctl, db, 11); err != nil {
		return err
	}
	for _, c := range []string{"events", "index", "stats"} {
		step("journalctl %s --db %s", c, db)
		if err := show(journalctl, c, "--db", db); err != nil {
			return err
		}
	}
	if err := w.stop(); err != nil {
		return err
	}
	return check(db, kube)
}

// watcher is a running `journalctl watch`.
type watcher struct {
	cmd  *exec.Cmd
	done chan error
}

func startWatch(journalctl, kubeconfig, db, dir string) (*watcher, error) {
	logf, err := os.OpenFile(filepath.Join(dir, "watch.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(journalctl, "watch", "configmaps", "-n", ns, "--db", db, "--kubeconfig", kubeconfig)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	w := &watcher{cmd: cmd, done: make(chan error, 1)}
	go func() { w.done <- cmd.Wait(); logf.Close() }()
	fmt.Printf("   pid %d, log %s\n", cmd.Process.Pid, logf.Name())
	return w, nil
}

func (w *watcher) stop() error {
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-w.done:
		if err != nil {
			return fmt.Errorf("journalctl watch exited: %w", err)
		}
		fmt.Println("   watcher exited cleanly")
		return nil
	case <-time.After(30 * time.Second):
		_ = w.cmd.Process.Kill()
		return fmt.Errorf("journalctl watch did not exit within 30s of SIGTERM")
	}
}

// waitEvents runs `journalctl stats -o json` until the journal's last
// offset reaches n. The demo polls the CLI as a user would.
func waitEvents(ctx context.Context, journalctl, db string, n uint64) error {
	var last string
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(context.Context) (bool, error) {
		out, err := exec.Command(journalctl, "stats", "--db", db, "-o", "json").Output()
		var st struct {
			LastOffset uint64 `json:"lastOffset"`
		}
		if last = string(out); err != nil {
			last = err.Error()
		} else if json.Unmarshal(out, &st) == nil && st.LastOffset >= n {
			fmt.Printf("   journal holds %d events\n", st.LastOffset)
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %d events: %w (last: %s)", n, err, last)
	}
	return nil
}

func show(journalctl string, args ...string) error {
	cmd := exec.Command(journalctl, args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	return cmd.Run()
}

// check asserts what the demo promises: the restart's relist emitted exactly
// the gap, and the index equals the server's list.
func check(db string, kube kubernetes.Interface) error {
	j, err := journal.Open(db, &journal.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer j.Close()
	evs, err := j.Read(1, 1000)
	if err != nil {
		return err
	}
	var got []string
	for _, e := range evs {
		got = append(got, fmt.Sprintf("%s %s %s", e.Type, strings.TrimPrefix(e.Key, ns+"/"), e.Origin))
	}
	want := []string{
		"ADDED alpha relist", "ADDED bravo relist", "ADDED charlie relist",
		"MODIFIED alpha watch", "ADDED delta watch", "DELETED charlie watch",
		"MODIFIED alpha restart", "DELETED bravo restart", "DELETED delta restart", "ADDED delta restart", "ADDED echo restart",
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("journal =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	list, err := kube.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return err
	}
	var server, index []string
	for _, cm := range list.Items {
		server = append(server, fmt.Sprintf("%s/%s %s %s", cm.Namespace, cm.Name, cm.UID, cm.ResourceVersion))
	}
	slices.Sort(server)
	entries, err := j.ScanIndex("", 1000)
	if err != nil {
		return err
	}
	for _, e := range entries {
		index = append(index, fmt.Sprintf("%s %s %s", e.Key, e.UID, e.ResourceVersion))
	}
	if !slices.Equal(index, server) {
		return fmt.Errorf("index =\n%s\nserver =\n%s", strings.Join(index, "\n"), strings.Join(server, "\n"))
	}
	fmt.Println("\nchecked: 11 events in the expected order, and the index equals the server's list")
	return nil
}
