# stado's build. `make test` is what CI runs; it installs what the tests
# need (the S3 test server) on first use.

GO        ?= go
GOBIN     := $(shell $(GO) env GOPATH)/bin
export PATH := $(GOBIN):$(PATH)

VERSITYGW_VERSION   := v1.8.0
STATICCHECK_VERSION := v0.8.2

.PHONY: all build test bench bench-quick lint tools clean demo

all: build

build:
	$(GO) build -o bin/stado ./cmd/stado

test: tools
	$(GO) test -count=1 -timeout 14m ./...

# reliability is the full-size reliability suite (README, "Reliability"):
# every store fault kind against every target, 120+ crashes, the 2-minute
# soaks, then every fuzz target for FUZZTIME each. `make test` runs the
# CI-sized suite; this scales it up. Figures go to bin/reliability/.
FUZZTIME ?= 60s

reliability: tools
	GO=$(GO) FUZZTIME=$(FUZZTIME) ./reliability/run.sh bin/reliability

# bench runs the performance benchmarks (docs/benchmarks.md says what and
# how) and regenerates docs/benchmarks.md; about 35 minutes on 2 cores. It
# installs what it needs (Versity Gateway, Debian's etcd-server and
# redis-server) when missing. bench-quick: fewer repeats, no 100,000-service
# fleet on S3 + 20 ms, no sequential 100,000-service ticks on S3 (about 6).
# The Go micro-benchmarks: go test -run '^$$' -bench . -benchmem ./...
bench: tools
	bash bench/run.sh full

bench-quick: tools
	bash bench/run.sh quick

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

# tools installs the S3 test server (Versity Gateway) unless it is present.
tools:
	@command -v versitygw >/dev/null 2>&1 || { \
		echo "installing versitygw $(VERSITYGW_VERSION) (the S3 server the tests run against)"; \
		$(GO) install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION); }

# demo: three local services, one killed, a tick in report mode and one in
# enforce-safe, with status after each. Cleans up after itself.
demo:
	./scripts/demo.sh

clean:
	rm -rf bin
