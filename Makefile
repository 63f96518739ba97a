# zerolayer — top-level driver around CMake.
#   make build  configure + build Release (needs cmake, a C11 compiler, pkg-config,
#               Criterion, libmicrohttpd, jansson, OpenSSL; never installs anything)
#   make run    build, stream a story; when the build fails it runs `make deps` once
#   make test   build, fetch SmolLM2-135M if it is not cached, run the suite through ctest
#               but the tests labelled real-large; tests whose model, SDK client or ISA
#               level is missing are reported SKIPPED
#   make test-real  fetch every model of tools/models.tsv, run the real-large tests
#   make asan   the tests labelled asan under AddressSanitizer + UBSan
#   make fuzz   the libFuzzer targets of tests/fuzz (clang), each FUZZ_SECONDS (default 60)
#   make deps   install missing Debian packages (apt-get, as root; prints the command otherwise)
#   make sdks   install the SDK clients the compat tests drive (npm ci in tests/compat,
#               the Python venv of tests/compat/pyenv.sh; both need the network)
# CMAKE_ARGS is passed to the configure step (CI: CMAKE_ARGS=-DZL_WERROR=ON).
BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_TARGETS = gguf tokenizer anthropic zlc snapshot
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=
DEB_PKGS    = build-essential cmake pkg-config libcriterion-dev libmicrohttpd-dev libjansson-dev libssl-dev nodejs
ZL          = $(BUILD)/bin/zerolayer

.PHONY: all build run test test-real asan fuzz deps sdks clean

all: build

deps:
	@command -v dpkg-query >/dev/null 2>&1 || { echo "make deps: not a Debian system; install by hand: $(DEB_PKGS) npm"; exit 1; }
	@missing=$$(for p in $(DEB_PKGS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done; \
	  command -v npm >/dev/null 2>&1 || echo npm); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing:$$missing"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	  else \
	    echo "missing Debian packages; run:"; echo "  sudo apt-get install -y$$missing"; exit 1; \
	  fi; \
	fi

sdks:
	cd tests/compat && npm ci --no-audit --no-fund
	tests/compat/pyenv.sh >/dev/null

build:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)
	cmake --build $(BUILD) -j $(JOBS)

run:
	@$(MAKE) --no-print-directory build || { \
	  echo "make run: the build failed; running 'make deps' once to install missing Debian packages, then building again"; \
	  $(MAKE) --no-print-directory deps && $(MAKE) --no-print-directory build; }
	$(ZL) run -m models/stories260K.gguf -n 256 --seed $${SEED:-42}

# ctest marks a skipped test "***Skipped" and lists it at the end
test: build
	@tools/models.sh smollm2-135m >/dev/null || \
	  echo "make test: could not fetch smollm2-135m; the real-model tests (label real-small) will be SKIPPED"
	cd $(BUILD) && ctest --output-on-failure -j 1 -LE real-large

test-real: build
	tools/models.sh all >/dev/null
	cd $(BUILD) && ctest --output-on-failure -j 1 -L real-large

asan:
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DZL_SANITIZE=ON $(CMAKE_ARGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j 1 -L asan

# new inputs go to $(FUZZ_BUILD)/corpus/NAME; crashes to $(FUZZ_BUILD)/crash-* (add them to tests/fuzz/corpus/NAME)
fuzz:
	@if ! command -v clang >/dev/null 2>&1; then \
	  echo "make fuzz: SKIPPED, clang is not installed (apt-get install clang): the libFuzzer targets did not run."; \
	  echo "make fuzz: (make test still replays their corpora with variants: ctest -R fuzz_replay)"; exit 0; fi
	cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang -DZL_FUZZ=ON -DZL_WERROR=OFF
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target $(addprefix fuzz_,$(FUZZ_TARGETS))
	@for t in $(FUZZ_TARGETS); do \
	  dict=; case $$t in gguf) dict=-dict=tests/fuzz/gguf.dict;; anthropic) dict=-dict=tests/fuzz/json.dict;; esac; \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$t; echo "== fuzz_$$t for $(FUZZ_SECONDS) s"; \
	  (cd $(FUZZ_BUILD) && ./tests/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=4096 -print_final_stats=1 \
	     $$(echo $$dict | sed 's|=|=$(CURDIR)/|') corpus/$$t $(CURDIR)/tests/fuzz/corpus/$$t) || exit 1; \
	done

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
