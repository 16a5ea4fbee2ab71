// Package testenv decides what a test does when the machine cannot give it
// what it needs beyond the control plane: root, a size-limited tmpfs, a
// memory cgroup. Outside `make test` such a test skips, saying why; under
// `make test` (which sets WATCHJOURNAL_REQUIRE_PRIVILEGED=1) it fails with
// the same reason, so a green `make test` means every such test ran. CI
// runs `make test` as root, where they all can run.
//
// The control plane itself has its own switch,
// WATCHJOURNAL_REQUIRE_CONTROLPLANE (internal/testing/controlplane.EnvRequire).
package testenv

import (
	"fmt"
	"os"
	"testing"
)

// EnvRequirePrivileged is the environment variable that turns Unavailable
// from a skip into a failure when it is "1".
const EnvRequirePrivileged = "WATCHJOURNAL_REQUIRE_PRIVILEGED"

// Unavailable ends the test because the machine lacks what it needs, with
// the reason given by format and args: t.Fatalf when
// WATCHJOURNAL_REQUIRE_PRIVILEGED is "1" (as under `make test`), t.Skipf
// otherwise. It does not return.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	reason := fmt.Sprintf(format, args...)
	if os.Getenv(EnvRequirePrivileged) == "1" {
		t.Fatalf("%s (%s=1: this test must run; run the tests as root on Linux with a memory cgroup, or unset it to skip)", reason, EnvRequirePrivileged)
	}
	t.Skipf("skipping: %s (set %s=1 to fail instead)", reason, EnvRequirePrivileged)
}
