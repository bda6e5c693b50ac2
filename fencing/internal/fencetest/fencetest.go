// Package fencetest holds what the tests of package fencing and of its
// resource packages share.
package fencetest

import (
	"math/rand/v2"

	"github.com/etcdlock/etcdlock/fencing"
)

// Tokens returns a closed channel holding n tokens that rise like
// successive lock owners' but arrive out of order within windows of window
// tokens, in runs of repeat equal tokens (an owner writing several times):
// the tokens 1 to n/repeat, each repeat times. n must be a multiple of
// window, and window of repeat. Writers racing to apply them see both
// stale and current tokens; the newest is n/repeat.
func Tokens(n, window, repeat int) <-chan fencing.Token {
	ch := make(chan fencing.Token, n)
	for base := 0; base < n; base += window {
		for _, i := range rand.Perm(window) {
			ch <- fencing.Token((base+i)/repeat + 1)
		}
	}
	close(ch)
	return ch
}
