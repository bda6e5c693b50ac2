//go:build linux

package main

import (
	"slices"
	"strings"
	"testing"
)

// parseEvents gives each top-level test's end and a skip's reason without
// its file:line, keeps a failure's output with its subtests', drops a
// passing test's, and keeps the lines of no test for a binary that failed
// beyond its tests.
func TestParseEvents(t *testing.T) {
	events := strings.Join([]string{
		`{"Action":"run","Test":"TestA"}`,
		`{"Action":"output","Test":"TestA","Output":"=== RUN   TestA\n"}`,
		`{"Action":"output","Test":"TestA","Output":"    a_test.go:10: log line\n"}`,
		`{"Action":"pass","Test":"TestA","Elapsed":1.5}`,
		`{"Action":"run","Test":"TestB"}`,
		`{"Action":"output","Test":"TestB","Output":"    etcdtest.go:105: needs an etcd of its own\n"}`,
		`{"Action":"output","Test":"TestB","Output":"--- SKIP: TestB (0.00s)\n"}`,
		`{"Action":"skip","Test":"TestB"}`,
		`{"Action":"run","Test":"TestC/sub"}`,
		`{"Action":"output","Test":"TestC/sub","Output":"    c_test.go:3: got 1, want 2\n"}`,
		`{"Action":"fail","Test":"TestC/sub"}`,
		`{"Action":"fail","Test":"TestC","Elapsed":2}`,
		`{"Action":"output","Output":"panic: after the tests\n"}`,
		`not json`,
	}, "\n")
	res, tail := parseEvents(strings.NewReader(events), nil)
	if len(res) != 3 {
		t.Fatalf("%d results, want 3: %+v", len(res), res)
	}
	a, b, c := res[0], res[1], res[2]
	if a.name != "TestA" || a.action != "pass" || a.output != nil || a.reason != "" {
		t.Errorf("TestA: %+v, want pass without output", a)
	}
	if b.name != "TestB" || b.action != "skip" || b.reason != "needs an etcd of its own" {
		t.Errorf("TestB: %+v, want skip with its reason", b)
	}
	if c.name != "TestC" || c.action != "fail" || !slices.Contains(c.output, "    c_test.go:3: got 1, want 2") {
		t.Errorf("TestC: %+v, want fail with its subtest's output", c)
	}
	if !slices.Equal(tail, []string{"panic: after the tests", "not json"}) {
		t.Errorf("tail = %q", tail)
	}
}

// messages keeps a failure's own lines, not its loggers' nor test2json's.
func TestMessages(t *testing.T) {
	got := messages([]string{
		"=== RUN   TestX",
		"    logger.go:146: 2026-12-07T05:48:41.209Z	DEBUG	w0	session started",
		"    x_test.go:12: got 1, want 2",
		"--- FAIL: TestX (1.00s)",
	})
	if !slices.Equal(got, []string{"x_test.go:12: got 1, want 2"}) {
		t.Errorf("messages = %q", got)
	}
}
