package netfault

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// holding is one holder's record: a command that ran under the lock.
type holding struct {
	client string
	file   string
	token  int64
	start  time.Time // the command started (wall clock)
	last   time.Time // its last sign of life: its last beat, or its exit
	ended  bool      // it exited by itself, not killed
}

// readHolding reads the record a holder wrote (ok false: it never ran).
func readHolding(client, file string) (h holding, ok bool, err error) {
	b, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		return h, false, nil
	}
	if err != nil {
		return h, false, err
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return h, false, fmt.Errorf("%s: short record %q", file, b)
	}
	start, err1 := strconv.ParseInt(f[0], 10, 64)
	tok, err2 := strconv.ParseInt(f[1], 10, 64)
	last, err3 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return h, false, fmt.Errorf("%s: bad record %q", file, b)
	}
	return holding{client: client, file: file, token: tok, start: time.Unix(0, start), last: time.Unix(0, last),
		ended: len(f) > 3 && f[3] == "end"}, true, nil
}

// verdict is what check found in one name's holdings.
type verdict struct {
	holdings  int
	overlaps  []string // a holder seen alive after a later one started
	regressed []string // a later holder's token not above an earlier one's
	// The smallest and largest start of a holder − last sign of its
	// predecessor: the margin the lock kept, and the longest the name
	// stayed free while the other client waited for it.
	minGap, maxGap time.Duration
	hasGap         bool
	// The smallest gap after a holder that did not exit by itself (its
	// run stopped it when the lock was lost, or it was stopped at the
	// end): the margin where it is thinnest.
	minKilledGap time.Duration
	killed       int
}

// check checks one name's holdings: no two holders' lives overlap on the
// machine's wall clock (every namespace shares it), and tokens rise in
// the order holders started. The gap from a holder's last sign of life to
// the next one's start is the margin the lock kept.
func check(hs []holding) verdict {
	sort.Slice(hs, func(i, j int) bool { return hs[i].start.Before(hs[j].start) })
	v := verdict{holdings: len(hs)}
	for j := range hs {
		for i := range j {
			if hs[j].start.Before(hs[i].last) {
				v.overlaps = append(v.overlaps, fmt.Sprintf("%s (token %d) alive %v after %s (token %d) started",
					hs[i].client, hs[i].token, hs[i].last.Sub(hs[j].start), hs[j].client, hs[j].token))
			}
			if hs[j].token <= hs[i].token {
				v.regressed = append(v.regressed, fmt.Sprintf("token %d of %s after token %d of %s", hs[j].token, hs[j].client, hs[i].token, hs[i].client))
			}
		}
		if j > 0 {
			gap := hs[j].start.Sub(hs[j-1].last)
			if !v.hasGap || gap < v.minGap {
				v.minGap = gap
			}
			if !v.hasGap || gap > v.maxGap {
				v.maxGap = gap
			}
			v.hasGap = true
			if !hs[j-1].ended {
				if v.killed == 0 || gap < v.minKilledGap {
					v.minKilledGap = gap
				}
				v.killed++
			}
		}
	}
	return v
}

func TestCheck(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(1000, 0).Add(time.Duration(ms) * time.Millisecond) }
	tests := []struct {
		name              string
		hs                []holding
		overlaps, regress int
		minGap, maxGap    time.Duration
		killed            int // gaps after a holder that did not end by itself
		minKilled         time.Duration
	}{
		{"apart", []holding{{client: "a", token: 5, start: at(0), last: at(100)}, {client: "b", token: 9, start: at(150), last: at(300)}}, 0, 0, 50 * time.Millisecond, 50 * time.Millisecond, 1, 50 * time.Millisecond},
		{"order of the input does not matter", []holding{{client: "b", token: 9, start: at(150), last: at(300)}, {client: "a", token: 5, start: at(0), last: at(100)}, {client: "a", token: 12, start: at(1300), last: at(1400)}}, 0, 0, 50 * time.Millisecond, time.Second, 2, 50 * time.Millisecond},
		{"overlap", []holding{{client: "a", token: 5, start: at(0), last: at(200)}, {client: "b", token: 9, start: at(150), last: at(300)}}, 1, 0, -50 * time.Millisecond, -50 * time.Millisecond, 1, -50 * time.Millisecond},
		{"overlap with an earlier one than the last", []holding{{client: "a", token: 5, start: at(0), last: at(1000)}, {client: "b", token: 9, start: at(100), last: at(200)}, {client: "c", token: 12, start: at(300), last: at(400)}}, 2, 0, -900 * time.Millisecond, 100 * time.Millisecond, 2, -900 * time.Millisecond},
		{"killed", []holding{{client: "a", token: 5, start: at(0), last: at(100), ended: true}, {client: "b", token: 9, start: at(150), last: at(300)}, {client: "a", token: 12, start: at(370), last: at(400)}}, 0, 0, 50 * time.Millisecond, 70 * time.Millisecond, 1, 70 * time.Millisecond},
		{"token regression", []holding{{client: "a", token: 9, start: at(0), last: at(100)}, {client: "b", token: 5, start: at(150), last: at(300)}}, 0, 1, 50 * time.Millisecond, 50 * time.Millisecond, 1, 50 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := check(tt.hs)
			if v.killed != tt.killed || v.minKilledGap != tt.minKilled {
				t.Errorf("%d gaps after a killed holder, the smallest %v; want %d, %v", v.killed, v.minKilledGap, tt.killed, tt.minKilled)
			}
			if len(v.overlaps) != tt.overlaps || len(v.regressed) != tt.regress || v.minGap != tt.minGap || v.maxGap != tt.maxGap {
				t.Errorf("overlaps %v, regressions %v, gaps %v–%v; want %d, %d, %v–%v", v.overlaps, v.regressed, v.minGap, v.maxGap, tt.overlaps, tt.regress, tt.minGap, tt.maxGap)
			}
		})
	}
}
