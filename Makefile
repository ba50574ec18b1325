# Knit — see README.md for the two commands a new machine needs.

GO ?= go
BIN := bin
# protoc is Debian's protobuf-compiler; protoc-gen-go is pinned by go.mod.
PROTOC_VERSION := libprotoc 3.21.12
PROTO_FILES := $(wildcard protocols/commonpb/*.proto protocols/yarnpb/*.proto)

.PHONY: all build test test-short bench proto lint run fuzz clean

all: lint build test

build:
	$(GO) build ./...

# The README's test command: lint, then every test with the race detector.
test: lint
	$(GO) test -race -count=1 -timeout 20m ./...

test-short:
	$(GO) test -short -count=1 ./...

bench:
	$(GO) test -run '^$$' -bench . -benchtime 3s -timeout 20m ./test/bench/...

# Each decoder of network bytes has a fuzz target; FUZZTIME bounds each one.
FUZZTIME ?= 20s
fuzz:
	@for pkg in $$($(GO) list ./protocols/...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

proto:
	@protoc --version | grep -qx '$(PROTOC_VERSION)' || { echo "make proto needs $(PROTOC_VERSION) (apt-get install protobuf-compiler)"; exit 1; }
	$(GO) build -o $(BIN)/protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go
	protoc --plugin=protoc-gen-go=$(BIN)/protoc-gen-go -I protocols \
	  --go_out=protocols --go_opt=paths=source_relative \
	  $(patsubst protocols/%,%,$(PROTO_FILES))

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

run:
	$(GO) run ./cmd/knit demo

clean:
	rm -rf $(BIN)
