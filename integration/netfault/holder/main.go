// Command holder is the command the network fault harness runs under a
// lock. It records in FILE, on the machine's wall clock, when it started,
// the token it was given, and, every 5 ms until it exits, that it is still
// alive: so a holder killed when its lock ended leaves its last sign of life
// behind, and the harness can tell whether the next holder started before
// it. It exits after HOLD unless it is killed first.
//
//	holder FILE HOLD
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

// beatEvery is how often the holder records that it is alive: the
// overlap check's resolution.
const beatEvery = 5 * time.Millisecond

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: holder FILE HOLD")
		os.Exit(2)
	}
	hold, err := time.ParseDuration(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "holder:", err)
		os.Exit(2)
	}
	f, err := os.OpenFile(os.Args[1], os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "holder:", err)
		os.Exit(1)
	}
	start := time.Now()
	tok := os.Getenv("ETCDLOCK_TOKEN")
	// One line, rewritten in place: start, token, last beat (fixed width),
	// and "end" once the holder exits by itself.
	line := func(last time.Time, end string) {
		_, _ = f.WriteAt([]byte(fmt.Sprintf("%d %s %019d %-3s\n", start.UnixNano(), pad(tok), last.UnixNano(), end)), 0)
	}
	for now := start; now.Sub(start) < hold; now = time.Now() {
		line(now, "")
		time.Sleep(beatEvery)
	}
	line(time.Now(), "end")
	_ = f.Close()
}

// pad gives the token a fixed width so that rewrites cover the line.
func pad(tok string) string {
	if _, err := strconv.ParseInt(tok, 10, 64); err != nil {
		tok = "0"
	}
	return fmt.Sprintf("%019s", tok)
}
