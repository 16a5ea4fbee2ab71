package controlplane

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) { os.Exit(RunWithSpare(m)) }
