package fencing_test

import (
	"errors"
	"fmt"

	"github.com/etcdlock/etcdlock/fencing"
)

// A token is remembered once admitted, even when its write fails after
// changing the resource: an older token is refused from then on.
func ExampleGuard_Do() {
	var g fencing.Guard
	var applied []fencing.Token
	write := func(t fencing.Token, err error) func() error {
		return func() error { applied = append(applied, t); return err }
	}
	fmt.Println(g.Do("orders", 5, write(5, nil)))
	fmt.Println(g.Do("orders", 7, write(7, errors.New("applied, then failed"))))
	fmt.Println(g.Do("orders", 6, write(6, nil)))
	fmt.Println(g.Current("orders"), applied)
	// Output:
	// <nil>
	// applied, then failed
	// fencing: stale token 6 for "orders" (current 7)
	// 7 [5 7]
}
