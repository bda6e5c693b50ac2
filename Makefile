# etcdlock — see README.md. `make demo` and `make test` are the two set-up
# commands; both work on a fresh machine with Go installed.

SHELL       := /bin/bash
.SHELLFLAGS := -o pipefail -c

GO       ?= go
PKGS     ?= ./...
BENCHTIME ?= 1s
BENCHCOUNT ?= 5

.PHONY: all build test demo lint cross release bench bench-scale chaos chaos-net chaos-net-short surface tidy-check clean

all: lint build test

## build: every package, and the three commands as static binaries in bin/
## (CGO_ENABLED=0, as etcd's own releases are built: no libc to map, which
## keeps etcdlock's memory below etcdctl's; see hack/README.md), stamped
## with git describe and the commit as a release is (etcdlock version).
build:
	$(GO) build $(PKGS)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-X main.buildVersion=$(VERSION) -X main.buildCommit=$(COMMIT)" -o bin/ ./cmd/etcdlock ./cmd/etcdlock-dev ./cmd/etcdlock-guardian

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

## cross: every package of every module builds for each release target,
## and go vet (tests included) passes for each GOOS but windows, whose
## build is checked but whose tests send POSIX signals.
TARGETS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 freebsd/amd64 windows/amd64
VET_GOOS ?= darwin freebsd
cross:
	@for m in $$(hack/modules.sh); do for t in $(TARGETS); do echo "go build ($$m, $$t)"; \
	  (cd $$m && GOOS=$${t%/*} GOARCH=$${t#*/} $(GO) build ./...) || exit 1; done; \
	  for os in $(VET_GOOS); do echo "go vet ($$m, $$os)"; (cd $$m && GOOS=$$os $(GO) vet ./...) || exit 1; done; done

## release: static binaries of the three commands for every target (Windows:
## no guardian, as run and elect refuse there), with the version and commit
## stamped (etcdlock version prints them), README, MANUAL (the CLI's),
## LICENSE, shell completions and man pages, one archive per target and
## SHA256SUMS, in dist/. VERSION defaults to git describe.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS := -s -w -X main.buildVersion=$(VERSION) -X main.buildCommit=$(COMMIT)
# Reproducible: the commit's time dates the man pages and every archive
# member, archives list files in name order with numeric owner 0, and gzip
# leaves out its own time stamp, so two runs on one commit give the same
# SHA256SUMS.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
export SOURCE_DATE_EPOCH
TAR := tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@$(SOURCE_DATE_EPOCH)
release:
	rm -rf dist && mkdir -p dist/share/completion dist/share/man/man1
	CGO_ENABLED=0 $(GO) build -trimpath -tags gendocs -ldflags "$(LDFLAGS)" -o dist/gendocs ./cmd/etcdlock
	for sh in bash zsh fish powershell; do dist/gendocs completion $$sh > dist/share/completion/etcdlock.$$sh; done
	dist/gendocs gen-man dist/share/man/man1
	rm dist/gendocs
	@for t in $(TARGETS); do os=$${t%/*}; arch=$${t#*/}; ext=; cmds="etcdlock etcdlock-dev etcdlock-guardian"; \
	  [ $$os = windows ] && ext=.exe && cmds="etcdlock etcdlock-dev"; \
	  d=etcdlock-$(VERSION)-$$os-$$arch; echo "build $$d"; mkdir -p dist/$$d; \
	  for c in $$cmds; do \
	    CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o dist/$$d/$$c$$ext ./cmd/$$c || exit 1; done; \
	  cp LICENSE dist/$$d/ && cp README.md dist/$$d/ && cp cmd/etcdlock/README.md dist/$$d/MANUAL.md && cp -r dist/share dist/$$d/ && \
	  $(TAR) -C dist -cf - $$d | gzip -n > dist/$$d.tar.gz && rm -rf dist/$$d || exit 1; done
	rm -rf dist/share
	cd dist && sha256sum *.tar.gz > SHA256SUMS && cat SHA256SUMS

tidy-check:
	@for m in $$(hack/modules.sh); do ( cd $$m; \
	  cp go.mod .go.mod.bak; cp go.sum .go.sum.bak; $(GO) mod tidy; \
	  if ! cmp -s go.mod .go.mod.bak || ! cmp -s go.sum .go.sum.bak; then \
	    echo "$$m: go.mod/go.sum are not tidy: run go mod tidy there"; diff .go.mod.bak go.mod; \
	    mv .go.mod.bak go.mod; mv .go.sum.bak go.sum; exit 1; fi; \
	  rm -f .go.mod.bak .go.sum.bak ) || exit 1; done

## bench: benchmarks, each comparing contenders side by side in one run,
## in interleaved rounds, with a summary of medians and min-max (hack/README.md).
bench:
	BENCHTIME=$(BENCHTIME) BENCHCOUNT=$(BENCHCOUNT) hack/bench.sh

## bench-scale: benchmarks against a 3-member etcd cluster of separate
## processes (so far: throughput beside concurrency.Mutex and raw writes).
bench-scale:
	hack/bench-scale.sh

clean:
	rm -rf bin dist

## surface: pkg/lock's size and readability beside etcd's concurrency
## package: exported identifiers, go doc lines, doc comment length, the
## files and functions one contended Acquire runs (by coverage), kind
## checks outside the kinds' files, the Session type, cmd/'s longest
## function.
surface:
	$(GO) run ./hack/surface

## chaos: long randomized runs, each part ending with a totals table: the
## fault suite (CHAOS_RUNS, CHAOS_SEED), the session-reuse checker
## (REUSE_RUNS, REUSE_SEED, REUSE_DURATION per run; REUSE_REPORT_ONLY=1
## reports violations without failing) and etcdlock break's handovers on
## trees of 3, 200 and 1,000 processes and a fork-and-exit hopper
## (BREAK_RUNS trials each).
CHAOS_RUNS ?= 200
REUSE_RUNS ?= 30
BREAK_RUNS ?= 10
chaos:
	CHAOS_RUNS=$(CHAOS_RUNS) CHAOS_SEED=$(CHAOS_SEED) REUSE_RUNS=$(REUSE_RUNS) REUSE_SEED=$(REUSE_SEED) REUSE_DURATION=$(REUSE_DURATION) BREAK_RUNS=$(BREAK_RUNS) \
	  $(GO) test -count=1 -timeout 4h -run '^(TestChaos.*|TestReuseLong)$$' -v ./integration | grep -v -e '^=== RUN' -e 'logger.go'

## chaos-net: the real-network fault harness (integration/netfault/README.md):
## three etcd member processes and the clients in network namespaces of
## their own, joined by veths and a bridge (198.18.0.0/15, nothing leaves
## the machine), faults injected by the kernel (nftables drops, SIGSTOP,
## SIGKILL); NETFAULT_TRIALS trials of each fault in NETFAULT_FAULTS
## (default: every fault), drawn from NETFAULT_SEED, then a table per
## fault. Needs root and nftables (apt-get install nftables), and says so.
NETFAULT_TRIALS ?= 5
chaos-net:
	@[ "$$(id -u)" = 0 ] || { echo "make chaos-net needs root: it makes network namespaces, veths and nftables rules" >&2; exit 1; }
	@command -v nft >/dev/null || { echo "make chaos-net needs nftables: apt-get install nftables" >&2; exit 1; }
	NETFAULT=1 NETFAULT_TRIALS=$(NETFAULT_TRIALS) NETFAULT_SEED=$(NETFAULT_SEED) NETFAULT_FAULTS=$(NETFAULT_FAULTS) \
	  $(GO) test -count=1 -timeout 4h -run '^TestNetFault$$' -v ./integration/netfault | grep --line-buffered -v -e '^=== RUN'

## chaos-net-short: one trial each of a cut-off holder and of the control,
## on a fixed seed (its times: integration/netfault/README.md).
chaos-net-short:
	$(MAKE) chaos-net NETFAULT_TRIALS=1 NETFAULT_SEED=1 NETFAULT_FAULTS=cut-client,control-no-deadline
