package netfault

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// enabled skips t unless the harness was asked for (NETFAULT=1, as make
// chaos-net sets), and fails it with the reason when the machine cannot
// run it.
func enabled(t *testing.T) {
	t.Helper()
	if os.Getenv("NETFAULT") != "1" {
		t.Skip("the network fault harness runs with NETFAULT=1 (make chaos-net), as root")
	}
	if err := usable(); err != nil {
		t.Fatal(err)
	}
	sweep()
}
