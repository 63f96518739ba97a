# zerolayer — top-level driver around CMake.
#   make run    install missing Debian packages (as root), build Release, stream a story
#   make test   build, fetch SmolLM2-135M if it is not cached, run the suite through ctest
#               but the tests labelled real-large
#   make test-real  fetch every model of tools/models.tsv, run the real-large tests
#   make asan   the suite under AddressSanitizer + UBSan
#   make fuzz   the libFuzzer targets of tests/fuzz (clang), each FUZZ_SECONDS (default 60)
BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_TARGETS = gguf tokenizer anthropic
JOBS       ?= $(shell nproc)
DEB_PKGS    = build-essential cmake pkg-config libcriterion-dev libmicrohttpd-dev libjansson-dev libssl-dev nodejs
ZL          = $(BUILD)/bin/zerolayer

.PHONY: all build run test test-real asan fuzz deps clean

all: build

deps:
	@missing=$$(for p in $(DEB_PKGS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done; \
	  command -v npm >/dev/null 2>&1 || echo npm); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing:$$missing"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	  else \
	    echo "missing Debian packages; run:"; echo "  sudo apt-get install -y$$missing"; exit 1; \
	  fi; \
	fi

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD) -j $(JOBS)

run: build
	$(ZL) run -m models/stories260K.gguf -n 256 --seed $${SEED:-42}

# ctest marks a test whose model is missing "***Skipped" and lists it at the end
test: build
	@tools/models.sh smollm2-135m >/dev/null || \
	  echo "make test: could not fetch smollm2-135m; the real-model tests (label real-small) will be SKIPPED"
	cd $(BUILD) && ctest --output-on-failure -j 1 -LE real-large

test-real: build
	tools/models.sh all >/dev/null
	cd $(BUILD) && ctest --output-on-failure -j 1 -L real-large

asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DZL_SANITIZE=ON
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j 1 -E 'perf|compat'

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
