# tallyd — `make run` starts the server with defaults, `make test` runs every test,
# `make install` installs the binaries, the manual pages and the systemd unit.
GO       ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
# How long `make fuzz` (and so `make test`) feeds each fuzz target new inputs, after its seed
# corpus. The seeds also run as ordinary tests in `plain` and `race`, so this pass only adds
# the search: a second each in make test (the 30 took 171 s at 3s on a quiet 2-core machine,
# most of it each run's start; issue 31, item 6). For a real search: make fuzz FUZZTIME=5m.
FUZZTIME ?= 1s
# The packages that `make test` runs with the race detector (`race`): those where goroutines
# meet (the loop and its log writers, TLS bridge, metrics HTTP, raft's log writer, the client
# library). `plain` runs the others without it. store/ and proto/ are single-owner code with
# no goroutines, where the detector can find nothing: they run once, without it.
RACE_PKGS ?= ./loop/... ./aof/... ./raftlog/... ./logfile/... ./cluster/... ./stats/... ./client/... ./tlsbridge/...
# Tests of RACE_PKGS that `race` skips (go test -skip) and `plain` runs without the detector
# (go test -run): volume tests (hundreds of thousands of keys, channels or damaged logs) whose
# goroutines are the same as lighter tests' and which under the detector took 10-45 s each
# and most of its process's 3.7 GB (issue 31, item 6). Every test runs in exactly one of the
# two; a name here that no test of HEAVY_PKGS has is an error (TestHeavyTestsExist).
HEAVY_PKGS  ?= ./loop/ ./aof/
HEAVY_TESTS ?= ^(TestExplore|TestExploreMutants|TestExploreReplay|TestReaderOfHugeRepliesGetsThemAll|TestSimRaftSnapshotSliced|TestSimSnapshotInstallSliced|TestSimRaftSnapshotYieldsToBackup|TestPublishManyPatternsLongChannel|TestUnsubscribeAllAcrossTurns|TestKeysRefusedPastLimitScanWalksAll|TestPubsubFanout|TestMemoryCountsQueuedData|TestMemoryUnlockDataRefused|TestPoolManyKeysNeverGrantedTwice|TestPublishAcrossTurns|TestKeysAcrossTurns|TestMemoryBudgetRefusesWrites|TestMultiQueueBounds|TestReplayRandomDamage|TestReplayDamagedMiddleWithEmbeddedRecords|TestReplayTornTailAtEveryOffset|TestUIRenderLargeStore)$$
# Where the test targets keep `go test -json` events, for the slowest-tests report.
TESTLOG   ?= $(BIN)/testlog
# How many tests of a package run at once: the e2e tests marked parallel mostly wait on the
# tallyd processes they start, so more than the 2 cores' worth (go test's default) fit.
PARALLEL  ?= 4
export GOFLAGS ?= -buildvcs=false

# Where `make install` puts things (under DESTDIR, for packaging).
PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
MANDIR     ?= $(PREFIX)/share/man
UNITDIR    ?= $(PREFIX)/lib/systemd/system
SYSCONFDIR ?= /etc
# Where `make build` puts the binaries and `make man` the pages.
BIN        ?= bin

.PHONY: all build man install uninstall run test vet deps unit plain e2e e2e-cluster e2e-rest race race-pkgs race-loop-1 race-loop-2 race-loop-3 heavy fuzz print-heavy slowest clean image sim sim-mutants

all: build

# make VERSION=0.2.0 stamps that version into both binaries (tallyd --version, tallyctl version).
VERSION ?=
VERSION_FLAGS = $(if $(VERSION),-ldflags "-X github.com/tallyd/tallyd/internal/version.Tag=$(VERSION)")

build:
	$(GO) build $(VERSION_FLAGS) -o $(BIN)/tallyd .
	$(GO) build $(VERSION_FLAGS) -o $(BIN)/tallyctl ./cmd/tallyctl

# The container image (the Dockerfile's, without a daemon or registry): static binaries in
# $(IMAGEBIN), then an OCI archive at $(IMAGE) (`podman load -i $(IMAGE)`; docs/operations.md).
IMAGE    ?= out/image/tallyd.oci.tar
IMAGEBIN ?= out/image/bin
image:
	CGO_ENABLED=0 $(GO) build -trimpath -o $(IMAGEBIN)/tallyd .
	CGO_ENABLED=0 $(GO) build -trimpath -o $(IMAGEBIN)/tallyctl ./cmd/tallyctl
	$(GO) run scripts/mkimage.go -bin $(IMAGEBIN) -o $(IMAGE)

# The manual pages tallyd(8) and tallyctl(1), written by the binaries from their own flag
# definitions (the hidden --man flag), so they cannot drift from them.
man: build
	mkdir -p $(BIN)/man
	$(BIN)/tallyd --man > $(BIN)/man/tallyd.8
	$(BIN)/tallyctl --man > $(BIN)/man/tallyctl.1

# The units' ExecStart names $(BINDIR)/tallyd (tallyd.service, and tallyd-node.service for a
# cluster member); an existing /etc/tallyd/tallyd.conf is kept.
install: build man
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(UNITDIR)
	install -m 0755 $(BIN)/tallyd $(BIN)/tallyctl $(DESTDIR)$(BINDIR)/
	install -m 0644 $(BIN)/man/tallyd.8 $(DESTDIR)$(MANDIR)/man8/tallyd.8
	install -m 0644 $(BIN)/man/tallyctl.1 $(DESTDIR)$(MANDIR)/man1/tallyctl.1
	sed 's|/usr/local/bin/tallyd|$(BINDIR)/tallyd|g' scripts/tallyd.service > $(BIN)/tallyd.service
	install -m 0644 $(BIN)/tallyd.service $(DESTDIR)$(UNITDIR)/tallyd.service
	sed 's|/usr/local/bin/tallyd|$(BINDIR)/tallyd|g' scripts/tallyd-node.service > $(BIN)/tallyd-node.service
	install -m 0644 $(BIN)/tallyd-node.service $(DESTDIR)$(UNITDIR)/tallyd-node.service
	test -e $(DESTDIR)$(SYSCONFDIR)/tallyd/tallyd.conf || \
		install -D -m 0644 scripts/tallyd.conf $(DESTDIR)$(SYSCONFDIR)/tallyd/tallyd.conf

# Leaves /etc/tallyd/tallyd.conf and the data in /var/lib/tallyd.
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/tallyd $(DESTDIR)$(BINDIR)/tallyctl $(DESTDIR)$(MANDIR)/man8/tallyd.8 \
		$(DESTDIR)$(MANDIR)/man1/tallyctl.1 $(DESTDIR)$(UNITDIR)/tallyd.service \
		$(DESTDIR)$(UNITDIR)/tallyd-node.service

run: build
	./bin/tallyd

# Every package's tests once (RACE_PKGS with the race detector, the others without), then
# the fuzz pass, then the slowest packages and tests, also when something failed. plain, the
# two halves of e2e and race's three processes run three at a time: the e2e tests mostly wait
# on their tallyd processes, and most of them run one at a time (namespaces, memory and
# latency measurements), so one e2e process was the longest path (487 s of 15:53).
test: vet deps
	rm -rf $(TESTLOG)
	{ $(MAKE) --no-print-directory -j3 plain heavy e2e-cluster e2e-rest race && $(MAKE) --no-print-directory fuzz; } || \
		{ $(MAKE) --no-print-directory slowest; exit 1; }
	$(MAKE) --no-print-directory slowest

# The reference servers the conformance tests compare against, iproute2 for the cluster
# tests' network namespaces and chromium for the status page's browser test (installed with apt-get when run as root, as CI is; elsewhere
# those tests skip, or use their proxy, and say how to install them).
deps:
	-./scripts/ensure-yrmcds.sh
	-./scripts/ensure-redis-tools.sh
	-./scripts/ensure-python-redis.sh
	-./scripts/ensure-node-redlock.sh
	-./scripts/ensure-tmux.sh
	-./scripts/ensure-iproute2.sh
	-./scripts/ensure-image-tools.sh
	-./scripts/ensure-chromium.sh

vet:
	$(GO) vet ./...

# Every package without the race detector.
unit:
	GO="$(GO)" TESTLOG="$(TESTLOG)" ./scripts/gotest.sh unit -count=1 -timeout 45m -parallel $(PARALLEL) ./...

# The packages that `race` does not run, but e2e (e2e-cluster and e2e-rest).
plain:
	GO="$(GO)" TESTLOG="$(TESTLOG)" ./scripts/gotest.sh plain -count=1 -timeout 45m -parallel $(PARALLEL) \
		$$($(GO) list ./... | grep -v -x -F "$$($(GO) list $(RACE_PKGS) ./e2e/)")

# The tests of HEAVY_TESTS, without the race detector.
heavy:
	GO="$(GO)" TESTLOG="$(TESTLOG)" ./scripts/gotest.sh heavy -count=1 -timeout 45m -run '$(HEAVY_TESTS)' $(HEAVY_PKGS)

# Only the end-to-end tests (e2e/): they build tallyd, run it as a process and talk to it
# over TCP. `unit` runs them too.
e2e:
	GO="$(GO)" TESTLOG="$(TESTLOG)" ./scripts/gotest.sh e2e -count=1 -timeout 45m -parallel $(PARALLEL) ./e2e/

# make test runs e2e in two processes side by side: the cluster tests (E2E_CLUSTER: their
# own network namespaces or proxies, one cluster at a time) and the rest.
E2E_CLUSTER ?= ^Test(Cluster|Fencing|Deploy|Rolling|TallyctlSecured|BackupRestore|LockModel|CounterModel|FaultLink|LockSurvives)
e2e-cluster:
	GO="$(GO)" TESTLOG="$(TESTLOG)" ./scripts/gotest.sh e2e-cluster -count=1 -timeout 45m -parallel $(PARALLEL) -run '$(E2E_CLUSTER)' ./e2e/
e2e-rest:
	GO="$(GO)" TESTLOG="$(TESTLOG)" ./scripts/gotest.sh e2e-rest -count=1 -timeout 45m -parallel $(PARALLEL) -skip '$(E2E_CLUSTER)' ./e2e/

# loop's tests under the detector run in three processes split by name (each test in exactly
# one: ^Test[^P-Z], ^Test([P-R]|S[^l-z]), ^Test(S[l-z]|[T-Z])), beside the others under make -j:
# one process with half of them reached 2.6 GB (the detector's shadow memory follows every heap
# page the process ever used; issue 31, item 6).
race: race-pkgs race-loop-1 race-loop-2 race-loop-3

race-pkgs:
	GO="$(GO)" TESTLOG="$(TESTLOG)" ./scripts/gotest.sh race -count=1 -timeout 45m -race -skip '$(HEAVY_TESTS)' $(filter-out ./loop/...,$(RACE_PKGS))

race-loop-1:
	$(if $(filter ./loop/...,$(RACE_PKGS)),GO="$(GO)" TESTLOG="$(TESTLOG)" ./scripts/gotest.sh race-loop-1 -count=1 -timeout 45m -race -skip '$(HEAVY_TESTS)' -run '^Test[^P-Z]' ./loop/)

race-loop-2:
	$(if $(filter ./loop/...,$(RACE_PKGS)),GO="$(GO)" TESTLOG="$(TESTLOG)" ./scripts/gotest.sh race-loop-2 -count=1 -timeout 45m -race -skip '$(HEAVY_TESTS)' -run '^Test([P-R]|S[^l-z])' ./loop/)

race-loop-3:
	$(if $(filter ./loop/...,$(RACE_PKGS)),GO="$(GO)" TESTLOG="$(TESTLOG)" ./scripts/gotest.sh race-loop-3 -count=1 -timeout 45m -race -skip '$(HEAVY_TESTS)' -run '^Test(S[l-z]|[T-Z])' ./loop/)

# A short pass of every fuzz target: the codecs, the store's record functions and the log's replay
# (seed corpora live in testdata/fuzz).
fuzz:
	GO="$(GO)" FUZZTIME="$(FUZZTIME)" TESTLOG="$(TESTLOG)" ./scripts/fuzz.sh ./proto/... ./store/... ./aof/... ./raftlog/... ./snapfile/...

# The explorer (loop/explore_test.go, issue 34): seeded cluster histories, checked.
# make sim SEEDS=N runs N seeds from FIRST in SIMJOBS processes (scripts/sim.sh); make sim
# SEED=s runs one, verbose (its history and trace); a failure prints its seed and the command
# that replays it. make sim-mutants
# runs each planted bug (TALLYD_SIM_MUTANT=name: one) until a seed catches it. make test
# runs the explorer's CI seeds in `heavy` (TestExplore, TestExploreMutants, TestExploreReplay).
SEEDS ?= 1000
FIRST ?= 1
SIMJOBS ?= 2
sim:
	GO="$(GO)" ./scripts/sim.sh $(if $(SEED),SEED=$(SEED),SEEDS=$(SEEDS) FIRST=$(FIRST) JOBS=$(SIMJOBS))

sim-mutants:
	TALLYD_SIM_MUTANT_SEARCH=1 $(GO) test -count=1 -timeout 0 -run 'TestExploreMutants' -v ./loop/

# The HEAVY_TESTS pattern, for running a test binary by hand (docs/testing.md).
print-heavy:
	@echo '$(HEAVY_TESTS)'

# The slowest packages and tests of the test targets run since `make test` began.
slowest:
	@ls $(TESTLOG)/*.json >/dev/null 2>&1 || { echo "slowest: no test run saved in $(TESTLOG)"; exit 0; }
	@$(GO) run scripts/testlog.go -slowest 15 $(TESTLOG)/*.json

clean:
	rm -rf $(BIN)

-include bench/bench.mk
