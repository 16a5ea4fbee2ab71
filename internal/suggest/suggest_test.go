package suggest_test

import (
	"slices"
	"testing"

	"github.com/watchjournal/watchjournal/internal/suggest"
)

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b  string
		want  int
		close bool
	}{
		{"", "", 0, true}, {"cm", "", 2, false}, {"configmapz", "configmaps", 1, true}, {"configmapz", "configmap", 1, true},
		{"deploymnets", "deployments", 2, true}, {"kitten", "sitting", 3, false},
		{"cx", "cm", 1, false}, // two letters are not close to a short name
	} {
		if got, close := suggest.Distance(tc.a, tc.b); got != tc.want || close != tc.close {
			t.Errorf("Distance(%q, %q) = %d, %v; want %d, %v", tc.a, tc.b, got, close, tc.want, tc.close)
		}
	}
}

func TestClosest(t *testing.T) {
	names := []string{"secrets", "configmaps", "services", "serviceaccounts", "sercrets"}
	if got, want := suggest.Closest("secretz", names), []string{"secrets", "sercrets"}; !slices.Equal(got, want) {
		t.Errorf("Closest(secretz, %q) = %q; want %q", names, got, want)
	}
	if got := suggest.Closest("gizmos", names); got != nil {
		t.Errorf("Closest(gizmos, %q) = %q; want none", names, got)
	}
}
