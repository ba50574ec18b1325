# Knit — see README.md for the two commands a new machine needs.

GO ?= go
BIN := bin
# protoc is Debian's protobuf-compiler; protoc-gen-go is pinned by go.mod;
# protoc-gen-hadooprpc is Knit's own (protocols/protoc-gen-hadooprpc).
PROTOC_VERSION := libprotoc 3.21.12
PROTO_FILES := $(wildcard protocols/commonpb/*.proto protocols/hadooprpcpb/*.proto protocols/yarnpb/*.proto)

# The local cluster's Kubernetes binaries, built once from the k8s.io/kubernetes
# release that tools/k8s pins, into a cache folder that later runs reuse. The
# folder must match controlplane.DefaultBinDir.
K8S_VERSION := v1.34.4
K8S_BIN ?= $(or $(KNIT_K8S_BIN),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/knit/k8s-$(K8S_VERSION)/bin)
K8S_TOOLS := kube-apiserver kube-scheduler kube-controller-manager kubectl
export KNIT_K8S_BIN := $(K8S_BIN)

# kwok, which simulates nodes and their pods for the scale benchmarks, built
# once from the release tools/kwok pins.
KWOK_VERSION := v0.8.0
KWOK_BIN ?= $(or $(KNIT_KWOK_BIN),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/knit/kwok-$(KWOK_VERSION)/bin/kwok)
export KNIT_KWOK_BIN := $(KWOK_BIN)

.PHONY: all build test test-short bench proto lint fuzz clean tools kwok local local-mr etcd webshell-assets

all: lint build test

build:
	$(GO) build ./...

# The README's test command: lint, then every test with the race detector,
# the integration tests on a real control plane among them (that package's
# many local clusters take over 20 minutes on 2 cores, hence the timeout).
test: lint tools
	$(GO) test -race -count=1 -timeout 40m ./...

test-short:
	$(GO) test -short -count=1 ./...

bench: tools kwok
	$(GO) test -run '^$$' -bench . -benchtime 3s -timeout 90m ./test/bench/...

# Each decoder of network bytes has a fuzz target; FUZZTIME bounds each one.
# The closing table gives each target's executions and executions per second
# while fuzzing (from go test's last progress line, after the seconds spent
# running the corpus first, its "baseline" column, which grows with the
# corpus go test keeps in its cache);
# before a release run FUZZTIME=10m (see README.md).
FUZZTIME ?= 20s
# A run that ends in go test's own "context deadline exceeded" without a
# failing input written is Go 1.26's coordinator race, reported and passed.
# Each new input a worker finds is minimized for at most FUZZMINIMIZETIME;
# go test's default (60s) stalls every worker for most of a short run.
FUZZMINIMIZETIME ?= 100x
FUZZPKGS ?= ./protocols/... ./hadoopconf/... ./rm/... ./rks/... ./daemonsets/... ./test/procnode/... ./examples/...
fuzz:
	@log=$$(mktemp); table=$$(mktemp); trap 'rm -f $$log $$table' EXIT; rc=0; \
	for pkg in $$($(GO) list $(FUZZPKGS)); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; \
	    $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) $$pkg >$$log 2>&1 || rc=1; cat $$log; \
	    if [ $$rc = 1 ] && grep -q '^    context deadline exceeded$$' $$log && ! grep -q 'Failing input written to' $$log; then \
	      echo "== $$f: go test's own deadline race at the end of FUZZTIME (go.dev/issue/75804, fixed in Go 1.27), no failing input: not a finding"; rc=0; \
	    fi; \
	    awk -v t="$${pkg#github.com/knitdev/knit/} $$f" \
	      'function secs(e,  s) { s = 0; \
	         if (match(e, /[0-9]+h/)) s += 3600*substr(e, RSTART, RLENGTH-1); \
	         if (match(e, /[0-9]+m/)) s += 60*substr(e, RSTART, RLENGTH-1); \
	         if (match(e, /[0-9]+s/)) s += substr(e, RSTART, RLENGTH-1); return s } \
	       /^fuzz: elapsed: [0-9hms]+, gathering baseline coverage: .* now fuzzing/ {b = secs($$3)} \
	       /^fuzz: elapsed: [0-9hms]+, execs: [0-9]+ / {s = secs($$3); n = $$5} \
	       END {printf "%-52s %10d %9.0f %9d\n", t, n, (s > b ? n/(s-b) : 0), b}' $$log >>$$table; \
	    [ $$rc = 0 ] || break 2; \
	  done; \
	done; \
	printf '\n%-52s %10s %9s %9s\n' target execs execs/s baseline; cat $$table; exit $$rc

proto:
	@protoc --version | grep -qx '$(PROTOC_VERSION)' || { echo "make proto needs $(PROTOC_VERSION) (apt-get install protobuf-compiler)"; exit 1; }
	$(GO) build -o $(BIN)/protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go
	protoc --plugin=protoc-gen-go=$(BIN)/protoc-gen-go -I protocols \
	  --go_out=protocols --go_opt=paths=source_relative \
	  $(patsubst protocols/%,%,$(PROTO_FILES))
	@# The stub generator reads the options through hadooprpcpb, so it is
	@# built once the messages above are.
	$(GO) build -o $(BIN)/protoc-gen-hadooprpc ./protocols/protoc-gen-hadooprpc
	protoc --plugin=protoc-gen-hadooprpc=$(BIN)/protoc-gen-hadooprpc -I protocols \
	  --hadooprpc_out=protocols --hadooprpc_opt=paths=source_relative \
	  $(patsubst protocols/%,%,$(PROTO_FILES))

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# The README's first command: the local cluster up in the background, then a
# DistributedShell job on it and its containers' output.
LOCAL_DIR ?= $(HOME)/.knit/local
local: tools etcd
	$(GO) build -o $(BIN)/ ./cmd/knit ./cmd/knit-rm ./cmd/knit-launcher ./cmd/knit-node ./cmd/knit-router ./cmd/knit-gpg ./examples/distshell ./examples/mrjob ./examples/sparkjob
	$(BIN)/knit local up --nodes 2 --dir $(LOCAL_DIR)
	HADOOP_CONF_DIR=$(LOCAL_DIR)/hadoop-conf $(BIN)/distshell -shell_command echo -shell_args 'hello from a YARN container on Knit' \
	  -num_containers 2 >$(LOCAL_DIR)/distshell.out 2>&1 || { cat $(LOCAL_DIR)/distshell.out; exit 1; }
	@grep -v ' level=' $(LOCAL_DIR)/distshell.out
	@app=$$(sed -n 's/.*Submitted application \(application_[0-9_]*\).*/\1/p' $(LOCAL_DIR)/distshell.out); \
	  export HADOOP_CONF_DIR=$(LOCAL_DIR)/hadoop-conf; \
	  for i in $$(seq 60); do $(BIN)/knit application -status $$app | grep -Eq 'Log Aggregation Status : (SUCCEEDED|FAILED|TIME_OUT|DISABLED)' && break; sleep 0.5; done; \
	  echo "== $(BIN)/knit logs -applicationId $$app -log_files stdout"; $(BIN)/knit logs -applicationId $$app -log_files stdout

# A MapReduce-shaped job on the cluster `make local` brings up: WordCount
# (examples/mrjob) over README.md, Makefile and go.mod, one map each and two
# reducers that fetch every map's output from its node's mapreduce_shuffle
# service; then its most frequent words.
local-mr: local
	rm -rf $(LOCAL_DIR)/mrjob-out
	HADOOP_CONF_DIR=$(LOCAL_DIR)/hadoop-conf $(BIN)/mrjob -input README.md,Makefile,go.mod -output $(LOCAL_DIR)/mrjob-out -reduces 2 \
	  >$(LOCAL_DIR)/mrjob.out 2>&1 || { cat $(LOCAL_DIR)/mrjob.out; exit 1; }
	@grep -E '^(Submitted|Running job|Job |Diagnostics)' $(LOCAL_DIR)/mrjob.out
	@echo "== the 15 most frequent words ($(LOCAL_DIR)/mrjob-out/part-r-*)"
	@sort -t '	' -k2,2nr -k1,1 $(LOCAL_DIR)/mrjob-out/part-r-* | head -15

etcd:
	@command -v etcd >/dev/null || { [ "$$(id -u)" = 0 ] && apt-get update -qq && apt-get install -y -qq etcd-server; } || \
	  { echo "the local cluster needs etcd: apt-get install etcd-server"; exit 1; }

# One go build for all four: they share most of their packages.
tools:
	@missing=; for t in $(K8S_TOOLS); do [ -x "$(K8S_BIN)/$$t" ] || missing=1; done; \
	  if [ -n "$$missing" ]; then \
	    echo "building Kubernetes $(K8S_VERSION) into $(K8S_BIN) (several minutes, once)"; \
	    mkdir -p "$(K8S_BIN)" && cd tools/k8s && \
	    $(GO) build -trimpath -ldflags=-s -o "$(K8S_BIN)/" $(addprefix k8s.io/kubernetes/cmd/,$(K8S_TOOLS)); \
	  fi

kwok:
	@[ -x "$(KWOK_BIN)" ] || { echo "building kwok $(KWOK_VERSION) into $(dir $(KWOK_BIN)) (a few minutes, once)"; \
	  mkdir -p "$(dir $(KWOK_BIN))" && cd tools/kwok && \
	  $(GO) build -trimpath -ldflags=-s -o "$(KWOK_BIN)" sigs.k8s.io/kwok/cmd/kwok; }

# The web shell's terminal, xterm.js and its fit addon, are committed as the
# npm registry ships them (rm/webshell/static/vendor, embedded in knit-rm);
# this refreshes them to the versions named here.
XTERM_VERSION := 6.0.0
XTERM_FIT_VERSION := 0.11.0
WEBSHELL_VENDOR := rm/webshell/static/vendor
webshell-assets:
	@tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	cd $$tmp && npm pack --silent @xterm/xterm@$(XTERM_VERSION) @xterm/addon-fit@$(XTERM_FIT_VERSION) >/dev/null && \
	mkdir xterm fit && tar xzf xterm-xterm-$(XTERM_VERSION).tgz -C xterm && tar xzf xterm-addon-fit-$(XTERM_FIT_VERSION).tgz -C fit && cd - >/dev/null && \
	cp $$tmp/xterm/package/lib/xterm.js $$tmp/xterm/package/css/xterm.css $(WEBSHELL_VENDOR)/ && \
	cp $$tmp/xterm/package/LICENSE $(WEBSHELL_VENDOR)/xterm.LICENSE && \
	cp $$tmp/fit/package/lib/addon-fit.js $(WEBSHELL_VENDOR)/ && \
	cp $$tmp/fit/package/LICENSE $(WEBSHELL_VENDOR)/addon-fit.LICENSE && \
	sed -i '/^\/\/# sourceMappingURL=/d' $(WEBSHELL_VENDOR)/xterm.js $(WEBSHELL_VENDOR)/addon-fit.js

clean:
	rm -rf $(BIN)
