# stado's build. `make test` is what CI runs; it installs what the tests
# need (the S3 test server) on first use.

GO        ?= go
GOBIN     := $(shell $(GO) env GOPATH)/bin
export PATH := $(GOBIN):$(PATH)

VERSITYGW_VERSION   := v1.8.0
STATICCHECK_VERSION := v0.8.2

.PHONY: all build test bench lint tools clean demo

all: build

build:
	$(GO) build -o bin/stado ./cmd/stado

test: tools
	$(GO) test -count=1 -timeout 14m ./...

bench: tools
	$(GO) test -run '^$$' -bench . -benchmem ./...

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
