# tallyd — `make run` starts the server with defaults, `make test` runs every test.
GO       ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
FUZZTIME ?= 10s
export GOFLAGS ?= -buildvcs=false

.PHONY: all build run test vet deps unit e2e race fuzz clean

all: build

build:
	$(GO) build -o bin/tallyd .
	$(GO) build -o bin/tallyctl ./cmd/tallyctl

run: build
	./bin/tallyd

test: vet deps unit race fuzz

# The reference servers the conformance tests compare against, and iproute2 for the cluster
# tests' network namespaces (installed with apt-get when run as root, as CI is; elsewhere
# those tests skip, or use their proxy, and say how to install them).
deps:
	-./scripts/ensure-yrmcds.sh
	-./scripts/ensure-redis-tools.sh
	-./scripts/ensure-python-redis.sh
	-./scripts/ensure-tmux.sh
	-./scripts/ensure-iproute2.sh

vet:
	$(GO) vet ./...

unit:
	$(GO) test -count=1 ./...

# Only the end-to-end tests (e2e/): they build tallyd, run it as a process and talk to it
# over TCP. `unit` runs them too.
e2e:
	$(GO) test -count=1 ./e2e/

race:
	$(GO) test -count=1 -race ./store/... ./loop/... ./aof/... ./stats/... ./client/...

# A short pass of every fuzz target: the codecs, the store's record functions and the log's replay
# (seed corpora live in testdata/fuzz).
fuzz:
	GO="$(GO)" FUZZTIME="$(FUZZTIME)" ./scripts/fuzz.sh ./proto/... ./store/... ./aof/...

clean:
	rm -rf bin

-include bench/bench.mk
