package clocktest_test

import (
	"fmt"
	"time"

	"github.com/etcdlock/etcdlock/pkg/clock/clocktest"
)

func ExampleFake() {
	f := clocktest.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	t := f.NewTimer(5 * time.Second)

	f.Step(4 * time.Second)
	select {
	case <-t.C():
		fmt.Println("fired early")
	default:
		fmt.Println("waiting, waiters:", f.Waiters())
	}

	f.Step(time.Minute)
	fmt.Println("fired at", (<-t.C()).Format(time.TimeOnly))
	fmt.Println("now", f.Now().Format(time.TimeOnly))
	// Output:
	// waiting, waiters: 1
	// fired at 00:00:05
	// now 00:01:04
}
