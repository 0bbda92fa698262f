# gibbs_nb: PGXS build.  `make && make install`; tests: `test/run-tests.sh`.

EXTENSION = gibbs_nb
MODULE_big = gibbs_nb
# every source of every group (src/README.md): the top folder and one level
# of groups below it
OBJS = $(patsubst %.c,%.o,$(sort $(wildcard src/*.c src/*/*.c)))

# sql/ holds the install and upgrade scripts, and nothing else
DATA = $(wildcard sql/gibbs_nb--*.sql)

# Tests against an installed extension and a running server (PGHOST,
# PGPORT, PGUSER), the PGXS way:
#   make installcheck        pg_regress (test/sql, test/expected) and the
#                            isolation specs (test/isolation)
#   make isolationcheck      the isolation specs alone
#   make prove_installcheck  the TAP tests (test/t; they start their own
#                            clusters, so run them as a user that may:
#                            not root); TAP_OUTPUT is where they write
#   make upgradecheck        0.1.0 to this version (test/upgrade.sh)
#   make schemacheck REV=r   the update script makes the same extension as
#                            at git revision r (default HEAD), new and
#                            updated from 0.1.0 (test/schema-same.sh)
# test/run-tests.sh (the README's test command) starts a throwaway server
# and calls these.  A server with PostgreSQL's default settings will do
# (max_worker_processes 8); no expected output depends on timing.
REGRESS = $(sort $(patsubst test/sql/%.sql,%,$(wildcard test/sql/*.sql)))
REGRESS_OPTS = --inputdir=test --encoding=UTF8
ISOLATION = $(sort $(patsubst test/isolation/specs/%.spec,%,$(wildcard test/isolation/specs/*.spec)))
ISOLATION_OPTS = --inputdir=test/isolation --outputdir=output_iso
EXTRA_CLEAN = results output_iso regression.diffs regression.out

# the version the library reports (PostgreSQL 18's PG_MODULE_MAGIC_EXT) is
# the control file's
EXTVERSION = $(shell sed -n "s/^default_version *= *'\(.*\)'/\1/p" $(srcdir)/gibbs_nb.control)
PG_CPPFLAGS = -I$(srcdir)/src -I$(srcdir)/src/core -DGNB_VERSION='"$(EXTVERSION)"'
# -Werror is not here: a newer compiler's new warning must not break a
# packager's build.  The test command (and so CI) builds with
# EXTRA_CFLAGS=-Werror.
PG_CFLAGS = -Wall -Wextra -Wno-unused-parameter -Wno-sign-compare \
	-Wno-missing-field-initializers $(EXTRA_CFLAGS)

# Link libm by name: without it the library's references to log, exp and
# lgamma are unversioned and bind to glibc's oldest versions (log@GLIBC_2.2.5,
# the errno-setting wrapper), not the ones the sampler core is tested and
# benchmarked with (log@@GLIBC_2.29).
SHLIB_LINK += -lm

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

ifeq ($(EXTVERSION),)
$(error no default_version found in $(srcdir)/gibbs_nb.control)
endif

# PGXS tracks header dependencies only in servers built with --enable-depend:
# every object depends on every header, so a changed struct is never read
# with two layouts by two objects.
$(OBJS): $(wildcard $(srcdir)/src/*.h $(srcdir)/src/*/*.h)

# ---- the sampler core on its own: unit tests, sanitizers, valgrind ----

CORE_SRC = $(sort $(wildcard src/core/*.c))
CORE_HDR = $(wildcard src/core/*.h)
UNIT_HDR = test/unit/check.h
CORE_CFLAGS = -std=c11 -Wall -Wextra -Werror -Wno-missing-field-initializers -Isrc/core

test/unit/test_core: test/unit/test_core.c $(CORE_SRC) $(CORE_HDR) $(UNIT_HDR)
	$(CC) $(CORE_CFLAGS) -O2 -g -o $@ test/unit/test_core.c $(CORE_SRC) -lm

# (with 3 bits for a count in the paper sampler's packed pairs, so that the
# tests' larger counts take the escape path: see GNB_DENSE_WBITS_MIN; and
# float-cast-overflow, which GCC's -fsanitize=undefined leaves out: a double
# out of an int's range cast to int is undefined, and the core casts shapes
# and counts)
test/unit/test_core_asan: test/unit/test_core.c $(CORE_SRC) $(CORE_HDR) $(UNIT_HDR)
	$(CC) $(CORE_CFLAGS) -O1 -g -fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=all \
		-fno-omit-frame-pointer -DGNB_DENSE_WBITS_MIN=29 -o $@ test/unit/test_core.c $(CORE_SRC) -lm

# the collapsed scores against their formula, through the core's internal
# header (src/core/gnb_internal.h)
test/unit/test_scores: test/unit/test_scores.c $(CORE_SRC) $(CORE_HDR) $(UNIT_HDR)
	$(CC) $(CORE_CFLAGS) -O2 -g -o $@ test/unit/test_scores.c $(CORE_SRC) -lm

test/unit/test_scores_asan: test/unit/test_scores.c $(CORE_SRC) $(CORE_HDR) $(UNIT_HDR)
	$(CC) $(CORE_CFLAGS) -O1 -g -fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=all \
		-fno-omit-frame-pointer -o $@ test/unit/test_scores.c $(CORE_SRC) -lm

.PHONY: unit unit-asan unit-valgrind bench bench-core-ab bench-versions bench-chains bench-sweeps bench-fixed soak bench-import bench-quality bench-few-labels check-sklearn bench-citus bench-citus-probe isolationcheck prove_installcheck upgradecheck schemacheck

# 0.1.0 (built from git) trains a model, then ALTER EXTENSION UPDATE to this
# build: in a private copy of the PostgreSQL installation (run as root).
upgradecheck: all
	PG_CONFIG='$(PG_CONFIG)' UPGRADE_LOGS='$(UPGRADE_LOGS)' test/upgrade.sh

# the update script against its version at REV, in a private copy of the
# PostgreSQL installation (run as root)
schemacheck: all
	PG_CONFIG='$(PG_CONFIG)' test/schema-same.sh $(REV)

isolationcheck:
	$(pg_isolation_regress_installcheck) $(ISOLATION_OPTS) $(ISOLATION)

TAP_OUTPUT ?= $(CURDIR)/tmp_check
# (PostgreSQL 15 puts the tests' data and logs under TESTDIR/tmp_check, 18
# where TESTDATADIR and TESTLOGDIR say: the same place here)
prove_installcheck:
	rm -rf '$(TAP_OUTPUT)' && mkdir -p '$(TAP_OUTPUT)'
	cd $(srcdir) && TESTDIR='$(TAP_OUTPUT)' PATH="$(bindir):$$PATH" \
		TESTDATADIR='$(TAP_OUTPUT)/tmp_check' TESTLOGDIR='$(TAP_OUTPUT)/tmp_check/log' \
		PG_REGRESS='$(pgxsdir)/src/test/regress/pg_regress' \
		$(PROVE) -I $(pgxsdir)/src/test/perl -I test $(PROVE_FLAGS) test/t/*.pl
# (the benchmark's driver is built too, so that a change of the core's API
# cannot leave `make bench` broken)
unit: test/unit/test_core test/unit/test_scores test/bench/bench_core
	test/unit/test_core
	test/unit/test_scores

unit-asan: test/unit/test_core_asan test/unit/test_scores_asan
	test/unit/test_core_asan
	test/unit/test_scores_asan

unit-valgrind: test/unit/test_core
	valgrind --error-exitcode=1 --leak-check=full -q test/unit/test_core

# The benchmark suite (not part of the tests): the extension as users run it,
# the core alone (test/bench/bench_core, src/core compiled unchanged, -O2 as
# the server builds it) against numpy versions of both samplers, scaling,
# memory, prediction and counting.  See test/bench/run-bench.sh.
test/bench/bench_core: test/bench/bench_core.c $(CORE_SRC) $(CORE_HDR)
	$(CC) $(CORE_CFLAGS) -D_POSIX_C_SOURCE=200809L -O2 -g -pthread -o $@ test/bench/bench_core.c $(CORE_SRC) -lm

bench:
	test/bench/run-bench.sh

# the sampler core at BASE (a commit) against this tree, runs interleaved:
#   make bench-core-ab BASE=<commit> [ROUNDS=5]
bench-core-ab:
	test/bench/core-ab.sh $(BASE) $(or $(ROUNDS),5)

# the same training, prediction and count figures on PostgreSQL 15 and a
# release build of 18 in one run, with their ratio (not in the test command;
# the first run builds that 18, about 7 minutes; then about 2 minutes)
bench-versions:
	test/bench/run-versions.sh

# chains => 2 in parallel against chains => 1 and chains => 2 one after
# another, on SpamAssassin (not in the test command; about 10 minutes)
bench-chains:
	test/bench/run-chains.sh

# a job's fixed cost (read, sample 2 sweeps, publish) on the spam corpus,
# JOBS jobs, against BASE's build in the same run if given:
#   make bench-fixed [JOBS=7] [BASE=<commit>]
bench-fixed:
	test/bench/run-fixed.sh

# the blocked sampler with 1 and 2 sweep workers against paper (medians of 3):
#   make bench-sweeps [SWEEPS=400] [ROUNDS=3] [LAMBDA=1]
bench-sweeps:
	test/bench/run-sweeps.sh

# the soak: prediction load while roles train, cancel, deploy, drop, export
# and import and workers are killed and the server restarted mid-publish,
# then every invariant checked (test/t/012_soak.pl; the test command runs it
# for 20 s): make soak [SOAK_SECONDS=300]
SOAK_SECONDS ?= 300
soak:
	PG_CONFIG='$(PG_CONFIG)' test/soak.sh $(SOAK_SECONDS)

# accuracy, NMI and the closed-form check on SpamAssassin (not in the test
# command; about 10 minutes)
bench-quality:
	test/bench/run-quality.sh

# semi-supervised with default settings against Naive Bayes on the labels
# alone, 1-20% labels, SpamAssassin and Debian's fortunes (not in the test
# command; about 8 minutes)
bench-few-labels:
	test/bench/run-few-labels.sh

# the peak memory of gibbs_nb_import, a 70 MB model value (not in the test
# command; about a minute)
bench-import:
	test/bench/import-memory.sh

# gibbs_nb_evaluate against scikit-learn (installs python3-sklearn; not in
# the test command); test/metrics/sklearn_expected.json is its last output
check-sklearn: install
	test/metrics/run.sh --write test/metrics/sklearn_expected.json

# gibbs_nb on a local Citus cluster against one node (needs Citus installed)
bench-citus:
	test/bench/citus-bench.sh

# what a sweep of the blocked sampler would cost on Citus: the worker
# backends a distributed query reaches, a query's time by parameter size
bench-citus-probe:
	test/bench/citus-probe.sh

EXTRA_CLEAN += test/unit/test_core test/unit/test_core_asan test/unit/test_scores \
	test/unit/test_scores_asan test/bench/bench_core

# ---- fuzzing: the libFuzzer targets of test/fuzz (clang) ----
#   make fuzz                   build the targets, run each FUZZ_SECONDS (60)
#   make fuzz FUZZ_SECONDS=10   the short run test/run-tests.sh does
#   make fuzz-build             build only
# fuzz_counts feeds any bytes to the count value's parse and rows, the state
# type's text and binary input, and the combine, final, send and output
# functions; fuzz_model any bytes to gibbs_nb_import's parser
# (src/models/model_format.c) and writes what it accepts back; fuzz_tokens builds valid text[] and tsvector
# values and feeds them to gnb_each_token, the vocabulary hash and the
# aggregate's transition; fuzz_node any bytes (or any numbers in valid
# messages) as the setup and calls of gibbs_nb.blocked_node and the model of
# gibbs_nb.blocked_node_scores, through their decoders, the core's check and
# a node of the blocked sampler.
# They compile the files of src/counts, src/models/model_format.c,
# src/worker/node_setup.c and the core unchanged against the server headers, with test/fuzz/shim.c for the backend functions it
# calls, under AddressSanitizer and UBSan, with the server's -fwrapv (and
# without the warning about its gcc-only printf attribute, as PGXS does for
# its clang bitcode).
# Seeds are in test/fuzz/seeds/<target>; what a run finds, its log and any
# crashing input (<target>-crash-*) go to test/fuzz/build.  A crash, a
# sanitizer report or a broken invariant fails `make fuzz`.

FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
FUZZ_DIR = test/fuzz
FUZZ_BUILD = $(FUZZ_DIR)/build
FUZZ_TARGETS = counts tokens model node
FUZZ_SANITIZE = -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_CFLAGS = -g -O1 -fno-omit-frame-pointer -fwrapv -fno-strict-aliasing \
	-Wall -Wextra -Werror -Wno-unused-parameter -Wno-sign-compare \
	-Wno-missing-field-initializers -Wno-ignored-attributes \
	$(FUZZ_SANITIZE) -fsanitize=fuzzer-no-link \
	-I$(FUZZ_DIR) -Isrc -Isrc/core -I$(includedir_server)
# the encoding check's common/wchar.c, as installed with the server headers
# (Debian installs them in pkglibdir, a server built from source in libdir)
FUZZ_LIBS = $(firstword $(wildcard $(pkglibdir)/libpgcommon_shlib.a $(libdir)/libpgcommon_shlib.a)) \
	$(firstword $(wildcard $(pkglibdir)/libpgport_shlib.a $(libdir)/libpgport_shlib.a))
FUZZ_HDR = $(wildcard src/*.h src/*/*.h) $(FUZZ_DIR)/shim.h
FUZZ_BINS = $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/fuzz_%)
FUZZ_OWN_OBJS = $(FUZZ_BUILD)/shim.o $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/fuzz_%.o)
# the server code under test, compiled unchanged: the count aggregate, the
# export format, a blocked chain's node setup, and the sampler core
FUZZ_SERVER_SRC = $(sort $(wildcard src/counts/*.c)) src/models/model_format.c \
	src/worker/node_setup.c $(CORE_SRC)
FUZZ_SERVER_OBJS = $(FUZZ_SERVER_SRC:src/%.c=$(FUZZ_BUILD)/server/%.o)

$(FUZZ_SERVER_OBJS): $(FUZZ_BUILD)/server/%.o: src/%.c $(FUZZ_HDR)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -c -o $@ $<

$(FUZZ_OWN_OBJS): $(FUZZ_BUILD)/%.o: $(FUZZ_DIR)/%.c $(FUZZ_HDR)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -c -o $@ $<

$(FUZZ_BINS): $(FUZZ_BUILD)/%: $(FUZZ_BUILD)/%.o $(FUZZ_SERVER_OBJS) $(FUZZ_BUILD)/shim.o
	$(FUZZ_CC) $(FUZZ_SANITIZE) -fsanitize=fuzzer -o $@ $^ $(FUZZ_LIBS) -lm

.PHONY: fuzz fuzz-build
fuzz-build: $(FUZZ_BINS)

# Each target's log is kept; on success its final statistics are shown.
fuzz: $(FUZZ_BINS)
	@for t in $(FUZZ_TARGETS); do \
		mkdir -p $(FUZZ_BUILD)/corpus/$$t; \
		echo "fuzz_$$t: $(FUZZ_SECONDS) s"; \
		if ! $(FUZZ_BUILD)/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -timeout=10 \
				-print_final_stats=1 -artifact_prefix=$(FUZZ_BUILD)/$$t- \
				$(FUZZ_BUILD)/corpus/$$t $(FUZZ_DIR)/seeds/$$t \
				>$(FUZZ_BUILD)/$$t.log 2>&1; then \
			tail -n 60 $(FUZZ_BUILD)/$$t.log; \
			echo "fuzz_$$t: FAILED (log: $(FUZZ_BUILD)/$$t.log)"; \
			exit 1; \
		fi; \
		grep -E '^#[0-9]+[[:space:]]+DONE|^Done [0-9]+ runs|^stat::(number_of_executed_units|average_exec_per_sec|new_units_added|peak_rss_mb)' \
			$(FUZZ_BUILD)/$$t.log; \
	done

EXTRA_CLEAN += $(FUZZ_BUILD)
