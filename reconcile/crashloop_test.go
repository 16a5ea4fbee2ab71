package reconcile_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/watchjournal/watchjournal/journal"
)

// Crash loop: a child process keeps the journal while a driver creates,
// updates and deletes random objects (same-name recreates included) and
// compacts etcd now and then; the child is SIGKILLed at random moments
// (mid-watch, mid-relist, mid-commit) and restarted, many times. At the end
// the index equals the server's list, offsets are contiguous, and every
// key's journal sequence is consistent with what the server did.
func TestLoop_CrashLoop(t *testing.T) {
	kills := 30
	if testing.Short() {
		kills = 5
	}
	e := newEnv(t)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var ops, compactions int
	wg.Add(1)
	go func() { // the driver
		defer wg.Done()
		cms := e.kube.CoreV1().ConfigMaps(e.ns)
		for i := 0; ctx.Err() == nil; i++ {
			name := fmt.Sprintf("k%d", rand.IntN(12))
			var err error
			switch rand.IntN(4) {
			case 0, 1:
				_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"i": fmt.Sprint(i)}}, metav1.CreateOptions{})
				if apierrors.IsAlreadyExists(err) {
					var cm *corev1.ConfigMap
					if cm, err = cms.Get(ctx, name, metav1.GetOptions{}); err == nil {
						cm.Data = map[string]string{"i": fmt.Sprint(i)}
						_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
					}
				}
			case 2:
				err = cms.Delete(ctx, name, metav1.DeleteOptions{})
			case 3:
				if i%5 == 0 {
					_, err = e.cp.Compact(ctx)
					compactions++
				}
			}
			if err != nil && ctx.Err() == nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				t.Errorf("driver: %v", err)
				return
			}
			ops++
		}
	}()

	for k := 0; k < kills; k++ {
		c := e.startChild()
		// Kill at a random moment: before the first list ends, mid-relist,
		// mid-watch, mid-commit.
		time.Sleep(time.Duration(rand.IntN(400)) * time.Millisecond)
		c.kill()
	}
	stop()
	wg.Wait()

	// A final marker change, then let one last child catch up to it.
	marker := e.create("marker")
	c := e.startChild()
	c.waitForRV(t, marker.ResourceVersion, "phase=Watching")
	c.kill()
	t.Logf("%d kills, %d driver operations, %d compactions", kills, ops, compactions)

	j := e.openRead()
	e.checkIndex(j)
	checkJournalConsistent(t, j)
}

// checkJournalConsistent replays the whole journal: offsets contiguous from
// 1, ADDED only for an absent key, MODIFIED and DELETED only for a present
// key with the same UID, and the replayed state equal to the index.
func checkJournalConsistent(t *testing.T, j *journal.Journal) {
	t.Helper()
	type obj struct{ uid, rv string }
	state := map[string]obj{}
	evs, err := readAll(j, 1)
	if err != nil {
		t.Fatal(err)
	}
	next := uint64(1)
	for _, e := range evs {
		if e.Offset != next {
			t.Fatalf("offset %d after %d: not contiguous", e.Offset, next-1)
		}
		next++
		cur, present := state[e.Key]
		switch {
		case e.Type == journal.Added && present:
			t.Errorf("offset %d: ADDED %s while present (uid %s)", e.Offset, e.Key, cur.uid)
		case e.Type != journal.Added && !present:
			t.Errorf("offset %d: %s %s while absent", e.Offset, e.Type, e.Key)
		case e.Type != journal.Added && cur.uid != e.UID:
			t.Errorf("offset %d: %s %s uid %s; present uid %s", e.Offset, e.Type, e.Key, e.UID, cur.uid)
		}
		if e.Type == journal.Deleted {
			delete(state, e.Key)
		} else {
			state[e.Key] = obj{e.UID, e.ResourceVersion}
		}
	}
	entries, err := j.ScanIndex("", 100000)
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for _, en := range entries {
		got = append(got, en.Key+" "+en.UID+" "+en.ResourceVersion)
	}
	for k, o := range state {
		want = append(want, k+" "+o.uid+" "+o.rv)
	}
	sortStrings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("index =\n%s\nreplayed journal =\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	t.Logf("journal: %d events, consistent", next-1)
}
