# zerolayer — top-level driver around CMake.
#   make build  configure + build Release (needs cmake, a C11 compiler, pkg-config,
#               Criterion, libmicrohttpd, jansson, OpenSSL; never installs anything)
#   make run    build, stream a story; when the build fails it runs `make deps` once
#   make test   build, fetch SmolLM2-135M if it is not cached, run the suite through ctest
#               but the tests labelled real-large; tests whose model, SDK client or ISA
#               level is missing are reported SKIPPED
#   make test-real  fetch every model of tools/models.tsv, run the real-large tests
#   make asan   the tests labelled asan under AddressSanitizer + UBSan
#   make tsan   the tests labelled tsan (scheduler, sessions, server) under ThreadSanitizer;
#               any race report fails the test
#   make fuzz   the libFuzzer targets of tests/fuzz (clang), each FUZZ_SECONDS (default 60)
#   make fuzz-campaign   the same, each FUZZ_CAMPAIGN_SECONDS (default 3600); both summarise
#               executions, exec/s, corpus size and findings per target in build-fuzz/fuzz-summary.txt
#   make test-aarch64  cross-build the engine for AArch64 (gcc-aarch64-linux-gnu; the engine library
#               and its tests only: no server or CLI, whose libraries would need arm64 multiarch) and
#               run the kernel, attention, determinism, tokenizer and greedy-text tests under
#               qemu-aarch64 at every NEON level (qemu's -cpu max has dotprod and i8mm), then on a CPU
#               model without dotprod (cortex-a53) and capped with ZL_ISA=neon and ZL_ISA=scalar
#   make deps   install missing Debian packages (apt-get, as root; prints the command otherwise)
#   make sdks   install the SDK clients the compat tests drive (npm ci in tests/compat,
#               the Python venv of tests/compat/pyenv.sh; both need the network), and make webui
#   make webui  npm ci in web/: the chat page's libraries and bundler (the next build embeds the
#               page at /; without them / says how to get it) and playwright-core for its test
# CMAKE_ARGS is passed to the configure step (CI: CMAKE_ARGS=-DZL_WERROR=ON).
BUILD      ?= build
ASAN_BUILD ?= build-asan
AARCH64_BUILD ?= build-aarch64
TSAN_BUILD ?= build-tsan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_CAMPAIGN_SECONDS ?= 3600
FUZZ_TARGETS = gguf tokenizer detok anthropic openai session_token http zlc snapshot grammar
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=
# The one list of Debian packages (make deps; .ci/run calls make deps): the build, the SDK clients'
# runtimes (nodejs, npm below; python3-venv, python3-pip for tests/compat/pyenv.sh), the browser test
# (chromium), make fuzz (clang), make test-aarch64 (the cross toolchain, qemu-user), the terminal test
# (tmux) and the scale-out tests (nginx, redis-server).
DEB_PKGS    = build-essential cmake pkg-config libcriterion-dev libmicrohttpd-dev libjansson-dev libssl-dev nodejs curl \
              python3 python3-jsonschema python3-venv python3-pip clang tmux \
              gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user chromium \
              libhiredis-dev nginx redis-server
ZL          = $(BUILD)/bin/zerolayer

.PHONY: all build run test test-real test-aarch64 asan tsan fuzz fuzz-campaign fuzz-build deps sdks webui clean

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

sdks: webui
	cd tests/compat && npm ci --no-audit --no-fund
	tests/compat/pyenv.sh >/dev/null

webui:
	cd web && npm ci --no-audit --no-fund

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

# qemu-user runs the AArch64 binaries (ctest prefixes them with the emulator of
# cmake/aarch64-linux-gnu.cmake); QEMU_CPU picks the CPU model qemu emulates
QEMU_AARCH64 = qemu-aarch64 -L /usr/aarch64-linux-gnu
test-aarch64:
	cmake -S . -B $(AARCH64_BUILD) -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
	  -DCMAKE_BUILD_TYPE=Release -DZL_ENGINE_ONLY=ON $(CMAKE_ARGS)
	cmake --build $(AARCH64_BUILD) -j $(JOBS)
	cd $(AARCH64_BUILD) && QEMU_CPU=max ctest --output-on-failure -j $(JOBS)
	@echo "== a CPU without dotprod/i8mm (cortex-a53): detection picks plain NEON"
	QEMU_CPU=cortex-a53 $(QEMU_AARCH64) $(AARCH64_BUILD)/tests/test_kernels --filter 'neon/*'
	QEMU_CPU=cortex-a53 ZL_EXPECT_ISA=neon $(QEMU_AARCH64) $(AARCH64_BUILD)/tests/test_kernels --filter 'cpu/*'
	QEMU_CPU=cortex-a53 $(QEMU_AARCH64) $(AARCH64_BUILD)/tests/test_greedy
	@echo "== ZL_ISA caps the level"
	for isa in neon scalar; do \
	  QEMU_CPU=max ZL_ISA=$$isa ZL_EXPECT_ISA=$$isa $(QEMU_AARCH64) $(AARCH64_BUILD)/tests/test_kernels --filter 'cpu/*' && \
	  QEMU_CPU=max ZL_ISA=$$isa $(QEMU_AARCH64) $(AARCH64_BUILD)/tests/test_greedy || exit 1; \
	done

asan:
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DZL_SANITIZE=ON $(CMAKE_ARGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j 1 -L asan

# halt_on_error: a race ends the process, so the test that ran it fails;
# ZL_TEST_TIME_SCALE: the e2e bounds on CPU time are 4x as loose (TSan is slower);
# ZL_TEST_SANITIZER: the load tests skip their RSS bound
tsan:
	cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZL_TSAN=ON -DZL_BENCHES=OFF $(CMAKE_ARGS)
	cmake --build $(TSAN_BUILD) -j $(JOBS)
	cd $(TSAN_BUILD) && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 $${TSAN_OPTIONS:-}" ZL_TEST_TIME_SCALE=4 ZL_TEST_SANITIZER=tsan \
	  ctest --output-on-failure -j 1 -L tsan

# new inputs go to $(FUZZ_BUILD)/corpus/NAME; findings to $(FUZZ_BUILD)/NAME-crash-* (add them to
# tests/fuzz/corpus/NAME); each run appends its per-target summary to $(FUZZ_BUILD)/fuzz-summary.txt
# (tests/fuzz/run.sh); fuzz-campaign runs each target FUZZ_CAMPAIGN_SECONDS and writes that file anew
fuzz: fuzz-build
	@[ ! -f $(FUZZ_BUILD)/.no-clang ] || exit 0; tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) append $(FUZZ_TARGETS)

fuzz-campaign: fuzz-build
	@[ ! -f $(FUZZ_BUILD)/.no-clang ] || exit 0; tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_CAMPAIGN_SECONDS) write $(FUZZ_TARGETS)

fuzz-build:
	@mkdir -p $(FUZZ_BUILD); rm -f $(FUZZ_BUILD)/.no-clang
	@if ! command -v clang >/dev/null 2>&1; then touch $(FUZZ_BUILD)/.no-clang; \
	  echo "make fuzz: SKIPPED, clang is not installed (apt-get install clang): the libFuzzer targets did not run."; \
	  echo "make fuzz: (make test still replays their corpora with variants: ctest -R fuzz_replay)"; exit 0; fi; \
	cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang -DZL_FUZZ=ON -DZL_WERROR=OFF && \
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target $(addprefix fuzz_,$(FUZZ_TARGETS))

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD)
