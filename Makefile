# gibbs_nb: PGXS build.  `make && make install`; tests: `test/run-tests.sh`.

EXTENSION = gibbs_nb
MODULE_big = gibbs_nb
OBJS = \
	src/gibbs_nb.o \
	src/train.o \
	src/job.o \
	src/worker.o \
	src/corpus.o \
	src/publish.o \
	src/model.o \
	src/store.o \
	src/source.o \
	src/predict.o \
	src/vocab_index.o \
	src/class_counts.o \
	src/core/gnb_rng.o \
	src/core/gnb_sampler.o

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
# test/run-tests.sh (the README's test command) starts a throwaway server
# and calls these.  The server needs max_worker_processes >= 16.
REGRESS = $(sort $(patsubst test/sql/%.sql,%,$(wildcard test/sql/*.sql)))
REGRESS_OPTS = --inputdir=test
ISOLATION = $(sort $(patsubst test/isolation/specs/%.spec,%,$(wildcard test/isolation/specs/*.spec)))
ISOLATION_OPTS = --inputdir=test/isolation --outputdir=output_iso
EXTRA_CLEAN = results output_iso regression.diffs regression.out

PG_CPPFLAGS = -I$(srcdir)/src -I$(srcdir)/src/core
# -Werror is not here: a newer compiler's new warning must not break a
# packager's build.  The test command (and so CI) builds with
# EXTRA_CFLAGS=-Werror.
PG_CFLAGS = -Wall -Wextra -Wno-unused-parameter -Wno-sign-compare \
	-Wno-missing-field-initializers $(EXTRA_CFLAGS)

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# PGXS tracks header dependencies only in servers built with --enable-depend:
# every object depends on every header, so a changed struct is never read
# with two layouts by two objects.
$(OBJS): $(wildcard $(srcdir)/src/*.h $(srcdir)/src/core/*.h)

# ---- the sampler core on its own: unit tests, sanitizers, valgrind ----

CORE_SRC = src/core/gnb_rng.c src/core/gnb_sampler.c
CORE_HDR = src/core/gnb_rng.h src/core/gnb_sampler.h
CORE_CFLAGS = -std=c11 -Wall -Wextra -Werror -Wno-missing-field-initializers -Isrc/core

test/unit/test_core: test/unit/test_core.c $(CORE_SRC) $(CORE_HDR)
	$(CC) $(CORE_CFLAGS) -O2 -g -o $@ test/unit/test_core.c $(CORE_SRC) -lm

test/unit/test_core_asan: test/unit/test_core.c $(CORE_SRC) $(CORE_HDR)
	$(CC) $(CORE_CFLAGS) -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all \
		-fno-omit-frame-pointer -o $@ test/unit/test_core.c $(CORE_SRC) -lm

.PHONY: unit unit-asan unit-valgrind bench isolationcheck prove_installcheck

isolationcheck:
	$(pg_isolation_regress_installcheck) $(ISOLATION_OPTS) $(ISOLATION)

TAP_OUTPUT ?= $(CURDIR)/tmp_check
prove_installcheck:
	rm -rf '$(TAP_OUTPUT)' && mkdir -p '$(TAP_OUTPUT)'
	cd $(srcdir) && TESTDIR='$(TAP_OUTPUT)' PATH="$(bindir):$$PATH" \
		PG_REGRESS='$(pgxsdir)/src/test/regress/pg_regress' \
		$(PROVE) -I $(pgxsdir)/src/test/perl -I test $(PROVE_FLAGS) test/t/*.pl
unit: test/unit/test_core
	test/unit/test_core

unit-asan: test/unit/test_core_asan
	test/unit/test_core_asan

unit-valgrind: test/unit/test_core
	valgrind --error-exitcode=1 --leak-check=full -q test/unit/test_core

bench:
	test/bench/run-bench.sh

EXTRA_CLEAN += test/unit/test_core test/unit/test_core_asan
