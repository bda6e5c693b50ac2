package netfault

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// summary is a fault's totals over its trials.
type summary struct {
	f                   fault
	trials, caught      int
	holdings            int
	overlaps, regressed []string
	minGap, maxGap      time.Duration
	hasGap              bool
	minKilledGap        time.Duration
	killed              int
	codes               map[int]int
	steps               map[string][]probeStep
}

func (s *summary) add(r trialResult) {
	s.trials++
	s.holdings += r.holdings
	if len(r.overlaps) > 0 {
		s.caught++
	}
	s.overlaps = append(s.overlaps, r.overlaps...)
	s.regressed = append(s.regressed, r.regressed...)
	if r.hasGap {
		if !s.hasGap || r.minGap < s.minGap {
			s.minGap = r.minGap
		}
		if !s.hasGap || r.maxGap > s.maxGap {
			s.maxGap = r.maxGap
		}
		s.hasGap = true
	}
	if r.killed > 0 && (s.killed == 0 || r.minKilledGap < s.minKilledGap) {
		s.minKilledGap = r.minKilledGap
	}
	s.killed += r.killed
	for c, n := range r.codes {
		s.codes[c] += n
	}
	for _, st := range r.steps {
		s.steps[st.Op] = append(s.steps[st.Op], st)
	}
}

// table prints the summaries: the checks, then the probe's timings.
func table(sums []*summary, seed uint64, took time.Duration) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(&b, "\nnetfault: seed %d, %v, TTL %v\n", seed, took.Round(time.Second), ttl)
	fmt.Fprintln(w, "fault\ttrials\tholders\toverlaps\ttoken regressions\tgap min / max\tgap after a killed holder (n)\trun exits\t")
	for _, s := range sums {
		ov := fmt.Sprint(len(s.overlaps))
		if s.f.control {
			ov = fmt.Sprintf("%d (caught %d/%d)", len(s.overlaps), s.caught, s.trials)
		}
		gap := "-"
		if s.hasGap {
			gap = s.minGap.Round(time.Millisecond).String() + " / " + s.maxGap.Round(time.Millisecond).String()
		}
		killed := "-"
		if s.killed > 0 {
			killed = fmt.Sprintf("%v (%d)", s.minKilledGap.Round(time.Millisecond), s.killed)
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%d\t%s\t%s\t%s\t\n", s.f.name, s.trials, s.holdings, ov, len(s.regressed), gap, killed, codes(s.codes))
	}
	w.Flush()
	if !slices.ContainsFunc(sums, func(s *summary) bool { return s.f.member }) {
		return b.String()
	}
	fmt.Fprintln(&b)
	w = tabwriter.NewWriter(&b, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "fault (probe while it lasts)\tNewSession p50/p99 (n, stalled)\tAcquire p50/p99\thandoff p50/p99\tdeleted-key notice p50/p99\t")
	for _, s := range sums {
		if !s.f.member {
			continue
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t\n", s.f.name, pcts(s.steps["session"]), pcts(s.steps["acquire"]), pcts(s.steps["handoff"]), pcts(s.steps["notice"]))
	}
	w.Flush()
	return b.String()
}

// stepErrors lists the probe's failed steps, "" if none failed.
func stepErrors(steps []probeStep) string {
	var errs []string
	for _, s := range steps {
		if s.Err != "" {
			errs = append(errs, fmt.Sprintf("%s after %s: %s", s.Op, msStr(s.Ms), s.Err))
		}
	}
	if len(errs) == 0 {
		return ""
	}
	return "; probe steps failed: " + strings.Join(errs, "; ")
}

// codes prints exit code counts as "0×12 79×1".
func codes(m map[int]int) string {
	var ks []int
	for k := range m {
		ks = append(ks, k)
	}
	sort.Ints(ks)
	var parts []string
	for _, k := range ks {
		name := strconv.Itoa(k)
		if k < 0 {
			name = "signal"
		}
		parts = append(parts, fmt.Sprintf("%s×%d", name, m[k]))
	}
	return strings.Join(parts, " ")
}

// pcts prints the p50 and p99 of steps in ms (nearest rank), their count
// and how many failed or hit the probe's bound.
func pcts(steps []probeStep) string {
	if len(steps) == 0 {
		return "-"
	}
	var ms []float64
	failed := 0
	for _, s := range steps {
		ms = append(ms, s.Ms)
		if s.Err != "" {
			failed++
		}
	}
	sort.Float64s(ms)
	rank := func(p float64) float64 {
		i := int(p*float64(len(ms))+0.999999) - 1
		return ms[max(0, min(i, len(ms)-1))]
	}
	return fmt.Sprintf("%s / %s (%d, %d)", msStr(rank(0.5)), msStr(rank(0.99)), len(ms), failed)
}

func msStr(ms float64) string {
	if ms >= 1000 {
		return fmt.Sprintf("%.2f s", ms/1000)
	}
	return fmt.Sprintf("%.1f ms", ms)
}
