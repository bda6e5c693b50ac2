# etcdlock — see README.md. `make demo` and `make test` are the two set-up
# commands; both work on a fresh machine with Go installed.

SHELL       := /bin/bash
.SHELLFLAGS := -o pipefail -c

GO       ?= go
PKGS     ?= ./...
BENCHTIME ?= 1s
BENCHCOUNT ?= 5

.PHONY: all build test demo lint bench bench-scale chaos tidy-check clean

all: lint build test

## build: every package, and the two commands as static binaries in bin/
## (CGO_ENABLED=0, as etcd's own releases are built: no libc to map, which
## keeps etcdlock's memory below etcdctl's; see README, Performance).
build:
	$(GO) build $(PKGS)
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/ ./cmd/etcdlock ./cmd/etcdlock-dev

## test: all tests with the race detector, against real embedded etcd and a
## throwaway PostgreSQL (started and stopped by hack/test.sh).
test:
	hack/test.sh $(PKGS)

## demo: the worker-a / worker-b story against an embedded etcd.
demo:
	$(GO) run ./hack/demo

## lint: formatting, vet and a tidy go.mod, in every module (hack/modules.sh).
lint: tidy-check
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@for m in $$(hack/modules.sh); do echo "go vet ($$m)"; (cd $$m && $(GO) vet ./...) || exit 1; done

tidy-check:
	@for m in $$(hack/modules.sh); do ( cd $$m; \
	  cp go.mod .go.mod.bak; cp go.sum .go.sum.bak; $(GO) mod tidy; \
	  if ! cmp -s go.mod .go.mod.bak || ! cmp -s go.sum .go.sum.bak; then \
	    echo "$$m: go.mod/go.sum are not tidy: run go mod tidy there"; diff .go.mod.bak go.mod; \
	    mv .go.mod.bak go.mod; mv .go.sum.bak go.sum; exit 1; fi; \
	  rm -f .go.mod.bak .go.sum.bak ) || exit 1; done

## bench: benchmarks, each comparing contenders side by side in one run.
bench:
	BENCHTIME=$(BENCHTIME) BENCHCOUNT=$(BENCHCOUNT) hack/bench.sh

## bench-scale: benchmarks against a 3-member etcd cluster of separate
## processes (so far: throughput beside concurrency.Mutex and raw writes).
bench-scale:
	hack/bench-scale.sh

clean:
	rm -rf bin

## chaos: long randomized runs, each part ending with a totals table: the
## fault suite (CHAOS_RUNS, CHAOS_SEED) and the session-reuse checker
## (REUSE_RUNS, REUSE_SEED, REUSE_DURATION per run; REUSE_REPORT_ONLY=1
## reports violations without failing).
CHAOS_RUNS ?= 200
REUSE_RUNS ?= 30
chaos:
	CHAOS_RUNS=$(CHAOS_RUNS) CHAOS_SEED=$(CHAOS_SEED) REUSE_RUNS=$(REUSE_RUNS) REUSE_SEED=$(REUSE_SEED) REUSE_DURATION=$(REUSE_DURATION) \
	  $(GO) test -count=1 -timeout 4h -run '^(TestChaos.*|TestReuseLong)$$' -v ./integration | grep -v -e '^=== RUN' -e 'logger.go'
