package integration

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// totalsTable is the table a long mode (chaos, session reuse) ends with: a
// title, then one fact per row, aligned.
type totalsTable struct {
	b strings.Builder
	w *tabwriter.Writer
}

// newTotalsTable starts the table title with the rows every long mode has:
// its runs and its wall time.
func newTotalsTable(title string, runs, controlRuns int, took time.Duration) *totalsTable {
	t := &totalsTable{}
	t.w = tabwriter.NewWriter(&t.b, 0, 4, 2, ' ', 0)
	fmt.Fprintf(t.w, "\n%s\t\n", title)
	t.row("runs (of which negative controls)", fmt.Sprintf("%d (%d)", runs, controlRuns))
	t.row("wall time", took.Round(time.Second))
	return t
}

func (t *totalsTable) row(k string, v any) { fmt.Fprintf(t.w, "%s\t%v\n", k, v) }

// counts adds a row per key of m, in key order, named prefix+key.
func (t *totalsTable) counts(prefix string, m map[string]int) {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		t.row(prefix+k, m[k])
	}
}

// String returns the table, which is then complete.
func (t *totalsTable) String() string {
	t.w.Flush()
	return t.b.String()
}
