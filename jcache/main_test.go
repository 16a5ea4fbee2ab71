package jcache_test

import (
	"os"
	"testing"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
)

// Most tests here start a control plane of their own: the next one starts
// while a test runs.
func TestMain(m *testing.M) { os.Exit(controlplane.RunWithSpare(m)) }
