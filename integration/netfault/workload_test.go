package netfault

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ttl is every lease's TTL in the harness (etcd's minimum with its
// default 1 s election timeout is 2 s).
const ttl = 3 * time.Second

// runRecord is one etcdlock run a worker started.
type runRecord struct {
	client string
	file   string // where its holder wrote, if it ran
	code   int    // the run's exit code (-1: killed by a signal)
}

// cleanEnv is the environment without ETCDLOCK_ and ETCDCTL_ settings.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ETCDLOCK_") && !strings.HasPrefix(kv, "ETCDCTL_") {
			env = append(env, kv)
		}
	}
	return env
}

// worker runs commands under name from client's namespace, one after
// the other, until ctx ends, and returns what each run did. A run still
// going when ctx ends gets SIGTERM (a waiting run gives up, a holding one
// stops its command and releases). Each holds for a random 0.3 s to two
// TTLs, so that a cut holder can outlive its lease. With
// noDeadline it is the negative control: it takes the lock with a lease
// that nobody renews (etcdlock acquire) and holds 2 TTLs past it.
func (h *harness) worker(ctx context.Context, client, name, dir string, rng *rand.Rand, noDeadline bool) []runRecord {
	nd := h.net.node(client)
	global := []string{"--endpoints", h.cluster.endpoints(), "--prefix", h.prefix}
	var recs []runRecord
	for i := 0; ctx.Err() == nil; i++ {
		file := filepath.Join(dir, fmt.Sprintf("%s-%s-%d", name, client, i))
		hold := 300*time.Millisecond + time.Duration(rng.Int64N(int64(2*ttl-300*time.Millisecond)))
		var bin string
		var args []string
		if noDeadline {
			el := h.bins.etcdlock + " " + strings.Join(global, " ")
			script := fmt.Sprintf(`set -a; out=$(%[1]s acquire %[2]s --ttl %[3]s) || exit $?; eval "$out"; set +a
%[4]s %[5]s %[6]s
%[1]s release %[2]s --owner "$ETCDLOCK_OWNER" --token "$ETCDLOCK_TOKEN" >/dev/null`,
				el, name, ttl, h.bins.holder, file, 3*ttl)
			bin, args = "/bin/sh", []string{"-c", script}
		} else {
			bin = h.bins.etcdlock
			args = append(append([]string(nil), global...), "run", "--ttl", ttl.String(), "--timeout", "60s", name, "--", h.bins.holder, file, hold.String())
		}
		errf, err := os.Create(file + ".err")
		if err != nil {
			break
		}
		p, err := startInEnv(nd, cleanEnv(), nil, errf, bin, args...)
		errf.Close()
		if err != nil {
			break
		}
		select {
		case <-p.done:
		case <-ctx.Done():
			p.signal(syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(3 * ttl):
				p.kill()
			}
		}
		code := p.cmd.ProcessState.ExitCode()
		recs = append(recs, runRecord{client: client, file: file, code: code})
		if noDeadline && code != 0 {
			// Refused (75): the other client holds; try again soon.
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return recs
}

// probeStep is one of the probe's timings.
type probeStep struct {
	Op  string  `json:"op"`
	Ms  float64 `json:"ms"`
	Err string  `json:"err,omitempty"`
}

// probe runs the probe's rounds from p0 for d and returns its timings.
func (h *harness) probe(ctx context.Context, d time.Duration) ([]probeStep, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	var stderr strings.Builder
	var mu sync.Mutex
	p, err := startInEnv(h.net.node("p0"), cleanEnv(), w, writerFunc(func(b []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return stderr.Write(b)
	}), h.bins.probe, "measure", h.cluster.endpoints(), h.prefix+"probe/", ttl.String(), d.String())
	w.Close()
	if err != nil {
		r.Close()
		return nil, err
	}
	var steps []probeStep
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var s probeStep
		if json.Unmarshal(sc.Bytes(), &s) == nil {
			steps = append(steps, s)
		}
	}
	r.Close()
	select {
	case <-p.done:
	case <-ctx.Done():
		p.kill()
	}
	if p.err != nil {
		mu.Lock()
		defer mu.Unlock()
		return steps, fmt.Errorf("probe: %v: %s", p.err, stderr.String())
	}
	return steps, nil
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
