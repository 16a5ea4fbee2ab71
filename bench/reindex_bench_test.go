package bench

import (
	"context"
	"testing"

	"github.com/watchjournal/watchjournal/journal"
)

// BenchmarkReindex reindexes an index over indexN stored ConfigMaps
// (Indexes.Reindex, what every start of a jcache with an IndexField
// pays, beside its writer): unchanged, the same function registered again
// (every object decoded, nothing rewritten); changed, another function
// under the name (every key rewritten, as a build). It reports keys/s and
// the seconds of one reindex.
func BenchmarkReindex(b *testing.B) {
	fixture()
	suffixed := func(obj []byte) ([]string, error) {
		vals, err := indexByName(obj)
		for i := range vals {
			vals[i] += "-2"
		}
		return vals, err
	}
	for _, c := range []struct {
		name string
		next func(n int) journal.IndexFunc
	}{
		{"unchanged", func(int) journal.IndexFunc { return indexByName }},
		{"changed", func(n int) journal.IndexFunc {
			if n%2 == 0 {
				return suffixed
			}
			return indexByName
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			j := openJournal(b, journal.Options{NoSync: true})
			if err := j.Settings().KeepObjects(); err != nil {
				b.Fatal(err)
			}
			for from := 0; from < indexN; from += 1000 {
				err := j.Writer().Update(func(tx *journal.Tx) error {
					for i := from; i < min(from+1000, indexN); i++ {
						e := journal.Event{Type: journal.Added, Key: keys[i], UID: uids[i], ResourceVersion: rv(i),
							Object: object(i, rv(i)), Origin: journal.OriginWatch}
						if _, err := tx.Append(&e); err != nil {
							return err
						}
					}
					return tx.SetResourceVersion(rv(from))
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			reindex := func(fn journal.IndexFunc) journal.ReindexStats {
				if err := j.Indexes().Add(map[string]journal.IndexFunc{"name": fn}); err != nil {
					b.Fatal(err)
				}
				st, err := j.Indexes().Reindex(context.Background(), []string{"name"})
				if err != nil {
					b.Fatal(err)
				}
				return st
			}
			reindex(indexByName)
			n := 0
			var last journal.ReindexStats
			for b.Loop() {
				last = reindex(c.next(n))
				n++
			}
			b.ReportMetric(float64(n*indexN)/b.Elapsed().Seconds(), "keys/s")
			b.ReportMetric(b.Elapsed().Seconds()/float64(n), "s/reindex")
			b.ReportMetric(float64(last.Rewritten), "rewritten")
			b.ReportMetric(float64(last.Transactions), "write-txs")
		})
	}
}
