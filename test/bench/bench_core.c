/*
 * bench_core.c
 *	  The sampler core, timed on its own: src/core compiled unchanged and
 *	  linked into this driver, fed the real corpus (or a synthetic one of the
 *	  same shape) through its public API (gnb_train, gnb_rng_log_gamma).
 *
 *	  bench_core real FILE SAMPLER SWEEPS REPLICATE
 *	      the corpus of FILE, its documents repeated REPLICATE times (same
 *	      vocabulary, same hidden labels)
 *	  bench_core synth FILE SAMPLER SWEEPS K
 *	      a synthetic corpus with FILE's document lengths and vocabulary
 *	      size, K classes, every other document's label hidden
 *	  bench_core gamma FILE
 *	      ns per gnb_rng_log_gamma draw, over the shapes the theta step of the
 *	      paper sampler draws on this corpus (labelled counts + gamma_theta)
 *
 *	FILE (written by run-bench.sh from the database): a line "D V K", then one
 *	line per document "label truth n w1 c1 ... wn cn": label the clamped class
 *	or -1, truth the true class, then n distinct word ids and their counts.
 *
 *	The core gets the corpus as the server gives it: the unlabelled
 *	documents as pairs, the clamped ones as their counts alone, both the
 *	counts and the word array lent (serve).  corpus_bytes is what that holds.
 *
 *	Parameters are gibbs_nb_train's defaults: one chain, burn_in = sweeps / 2,
 *	lag 1, gamma_pi = gamma_theta = 1, unlabeled_weight 1, seed 42.
 *
 *	With BENCH_THREADS=n (1 to 8; 1, the default, splits nothing) the
 *	blocked sampler's phases are split over n threads (the chain's and n - 1
 *	helpers), which watch a step number and never sleep: the sweep workers'
 *	split without PostgreSQL's processes, latches and shared memory, to tell
 *	the cost of the split itself from theirs.  The model is the same bit for
 *	bit (checksum=).  Then ms_per_sweep is what to read: cpu_ms_per_sweep
 *	counts every thread, watching included, and core_peak_bytes leaves out
 *	the shared arrays and the helpers.  More threads than cores only spin.
 *
 *	The core has no entry point for the label step or the theta step alone, so
 *	the per-unit figures are derived from whole sweeps: ns per (unlabelled
 *	document-word pair x class) is the whole sweep's time divided by that
 *	product (for `paper` it includes the theta step), and the theta step's
 *	Gamma draws are timed separately by `gamma`.  perf on this binary shows
 *	where within a sweep the time goes.
 *
 *	With BENCH_LAMBDA=x the chain runs at unlabeled_weight x (1 by default).
 *
 *	Output: one line of key=value pairs.
 */
#include "gnb_rng.h"
#include "gnb_sampler.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

typedef struct corpus_buf
{
	int32_t		D,
				V,
				K;
	int64_t    *start;
	int32_t    *word;
	int32_t    *count;
	int32_t    *label;
	int32_t    *truth;
} corpus_buf;

static double
now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* CPU seconds of this process: on a shared machine, less disturbed than wall time. */
static double
cpu_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *
xmalloc(size_t n)
{
	void	   *p = malloc(n ? n : 1);

	if (p == NULL)
	{
		fprintf(stderr, "out of memory\n");
		exit(2);
	}
	return p;
}

static int64_t
read_int(FILE *f)
{
	long long	v;

	if (fscanf(f, "%lld", &v) != 1)
	{
		fprintf(stderr, "corpus file: malformed\n");
		exit(2);
	}
	return v;
}

/* Read FILE, its documents repeated `replicate` times. */
static void
read_corpus(const char *path, int replicate, corpus_buf *c)
{
	FILE	   *f = fopen(path, "r");
	int32_t		D;
	int64_t		cap = 1 << 20,
				n = 0;
	int64_t    *start1;
	int32_t    *word1,
			   *count1,
			   *label1,
			   *truth1;

	if (f == NULL)
	{
		perror(path);
		exit(2);
	}
	D = (int32_t) read_int(f);
	c->V = (int32_t) read_int(f);
	c->K = (int32_t) read_int(f);
	start1 = xmalloc(sizeof(int64_t) * (D + 1));
	label1 = xmalloc(sizeof(int32_t) * D);
	truth1 = xmalloc(sizeof(int32_t) * D);
	word1 = xmalloc(sizeof(int32_t) * cap);
	count1 = xmalloc(sizeof(int32_t) * cap);
	for (int32_t j = 0; j < D; j++)
	{
		int64_t		len;

		label1[j] = (int32_t) read_int(f);
		truth1[j] = (int32_t) read_int(f);
		len = read_int(f);
		start1[j] = n;
		for (int64_t i = 0; i < len; i++)
		{
			if (n == cap)
			{
				cap *= 2;
				word1 = realloc(word1, sizeof(int32_t) * cap);
				count1 = realloc(count1, sizeof(int32_t) * cap);
				if (!word1 || !count1)
					exit(2);
			}
			word1[n] = (int32_t) read_int(f);
			count1[n] = (int32_t) read_int(f);
			n++;
		}
	}
	start1[D] = n;
	fclose(f);

	c->D = D * replicate;
	c->start = xmalloc(sizeof(int64_t) * (c->D + 1));
	c->label = xmalloc(sizeof(int32_t) * c->D);
	c->truth = xmalloc(sizeof(int32_t) * c->D);
	c->word = xmalloc(sizeof(int32_t) * n * replicate);
	c->count = xmalloc(sizeof(int32_t) * n * replicate);
	for (int r = 0; r < replicate; r++)
	{
		memcpy(c->word + r * n, word1, sizeof(int32_t) * n);
		memcpy(c->count + r * n, count1, sizeof(int32_t) * n);
		memcpy(c->label + (int64_t) r * D, label1, sizeof(int32_t) * D);
		memcpy(c->truth + (int64_t) r * D, truth1, sizeof(int32_t) * D);
		for (int32_t j = 0; j < D; j++)
			c->start[(int64_t) r * D + j] = r * n + start1[j];
	}
	c->start[c->D] = n * replicate;
	free(start1);
	free(word1);
	free(count1);
	free(label1);
	free(truth1);
}

/*
 * A synthetic corpus shaped like `real` (document lengths in distinct words,
 * vocabulary size) with K classes: each class has its own Zipf-like word
 * distribution (a class-specific permutation of the frequent words), counts
 * from a geometric distribution; odd documents keep their label.
 */
static void
synth_corpus(const corpus_buf *real, int32_t K, corpus_buf *c)
{
	gnb_rng		rng;
	int32_t		V = real->V;
	int64_t		n = real->start[real->D];
	double	   *cdf = xmalloc(sizeof(double) * V);
	int32_t   **perm = xmalloc(sizeof(int32_t *) * K);
	double		total = 0.0;

	gnb_rng_seed(&rng, 7);
	for (int32_t w = 0; w < V; w++)
	{
		total += 1.0 / (w + 10.0);
		cdf[w] = total;
	}
	for (int32_t k = 0; k < K; k++)
	{
		perm[k] = xmalloc(sizeof(int32_t) * V);
		for (int32_t w = 0; w < V; w++)
			perm[k][w] = w;
		/* shuffle the 2,000 most frequent ranks: the classes differ there */
		for (int32_t w = 1999; w > 0; w--)
		{
			int32_t		o = (int32_t) (gnb_rng_uniform(&rng) * (w + 1));
			int32_t		t = perm[k][w];

			perm[k][w] = perm[k][o];
			perm[k][o] = t;
		}
	}
	c->D = real->D;
	c->V = V;
	c->K = K;
	c->start = xmalloc(sizeof(int64_t) * (c->D + 1));
	c->label = xmalloc(sizeof(int32_t) * c->D);
	c->truth = xmalloc(sizeof(int32_t) * c->D);
	c->word = xmalloc(sizeof(int32_t) * n);
	c->count = xmalloc(sizeof(int32_t) * n);
	{
		unsigned char *seen = calloc(V, 1);
		int64_t		p = 0;

		for (int32_t j = 0; j < c->D; j++)
		{
			int64_t		len = real->start[j + 1] - real->start[j];
			int32_t		k = (int32_t) (gnb_rng_uniform(&rng) * K);
			int64_t		first = p;

			c->start[j] = p;
			c->truth[j] = k;
			c->label[j] = (j % 2) ? k : -1;
			for (int64_t i = 0; i < len; i++)
			{
				double		u = gnb_rng_uniform(&rng) * total;
				int32_t		lo = 0,
							hi = V - 1,
							w;

				while (lo < hi)
				{
					int32_t		mid = (lo + hi) / 2;

					if (cdf[mid] < u)
						lo = mid + 1;
					else
						hi = mid;
				}
				w = perm[k][lo];
				if (seen[w])
					continue;	/* distinct words: a repeat is dropped */
				seen[w] = 1;
				c->word[p] = w;
				c->count[p] = 1 + (int32_t) (-log(gnb_rng_uniform_pos(&rng)) * 1.2);
				p++;
			}
			for (int64_t i = first; i < p; i++)
				seen[c->word[i]] = 0;
		}
		c->start[c->D] = p;
		free(seen);
	}
	for (int32_t k = 0; k < K; k++)
		free(perm[k]);
	free(perm);
	free(cdf);
}

/* Allocation through the core's hooks, counted: current and peak bytes. */
typedef struct alloc_meter
{
	size_t		current;
	size_t		peak;
	int32_t		sweeps_done;
	double		t_first;		/* end of sweep 1 */
	double		t_last;			/* end of the last sweep */
	double		cpu_first;		/* CPU seconds at the end of sweep 1 */
	double		cpu_last;		/* and at the end of the last */
} alloc_meter;

static void *
meter_alloc(size_t size, void *arg)
{
	alloc_meter *m = arg;
	size_t	   *p = calloc(1, size + sizeof(size_t) * 2);

	if (p == NULL)
		exit(2);
	p[0] = size;
	m->current += size;
	if (m->current > m->peak)
		m->peak = m->current;
	return p + 2;
}

static void
meter_release(void *ptr, void *arg)
{
	alloc_meter *m = arg;
	size_t	   *p = (size_t *) ptr - 2;

	m->current -= p[0];
	free(p);
}

static void
meter_progress(void *arg, const gnb_sweep *s)
{
	alloc_meter *m = arg;
	double		t = now_seconds();
	double		cpu = cpu_seconds();

	if (s->sweep == 1)
	{
		m->t_first = t;
		m->cpu_first = cpu;
	}
	m->t_last = t;
	m->cpu_last = cpu;
	m->sweeps_done = s->sweep;
}

static gnb_sampler_kind
parse_sampler(const char *s)
{
	if (gnb_sampler_from_name(s) >= 0)
		return (gnb_sampler_kind) gnb_sampler_from_name(s);
	fprintf(stderr, "unknown sampler %s\n", s);
	exit(2);
}

/*
 * The corpus as the server gives it to the core: the unlabelled documents
 * as pairs, the clamped ones as their counts alone (V x K, lent: a chain
 * counts in them), the word array lent (the paper sampler packs its pairs
 * there).  truth: the unlabelled documents' true classes, in order.
 */
typedef struct served_corpus
{
	gnb_corpus	corpus;
	int64_t    *start;
	int32_t    *word;
	int32_t    *count;
	int32_t    *label;
	int32_t    *truth;
	double	   *word_counts;
	double	   *doc_counts;
} served_corpus;

static void
serve(const corpus_buf *c, served_corpus *s)
{
	int64_t		n = 0;
	int32_t		d = 0;

	memset(s, 0, sizeof(*s));
	s->start = xmalloc(sizeof(int64_t) * (c->D + 1));
	s->word = xmalloc(sizeof(int32_t) * (c->start[c->D] + 1));
	s->count = xmalloc(sizeof(int32_t) * (c->start[c->D] + 1));
	s->label = xmalloc(sizeof(int32_t) * (c->D + 1));
	s->truth = xmalloc(sizeof(int32_t) * (c->D + 1));
	s->word_counts = calloc((size_t) c->V * c->K + 1, sizeof(double));
	s->doc_counts = calloc(c->K, sizeof(double));
	for (int32_t j = 0; j < c->D; j++)
	{
		if (c->label[j] >= 0)
		{
			s->doc_counts[c->label[j]] += 1;
			for (int64_t p = c->start[j]; p < c->start[j + 1]; p++)
				s->word_counts[(int64_t) c->word[p] * c->K + c->label[j]] += c->count[p];
			continue;
		}
		s->start[d] = n;
		for (int64_t p = c->start[j]; p < c->start[j + 1]; p++)
		{
			s->word[n] = c->word[p];
			s->count[n++] = c->count[p];
		}
		s->label[d] = -1;
		s->truth[d++] = c->truth[j];
	}
	s->start[d] = n;
	s->corpus.n_docs = d;
	s->corpus.n_words = c->V;
	s->corpus.n_classes = c->K;
	s->corpus.doc_start = s->start;
	s->corpus.word = s->word;
	s->corpus.count = s->count;
	s->corpus.label = s->label;
	s->corpus.extra_word_counts = s->word_counts;
	s->corpus.extra_doc_counts = s->doc_counts;
	s->corpus.lent_extra_word_counts = s->word_counts;
	s->corpus.lent_word = s->word;
}

static void
free_served(served_corpus *s)
{
	free(s->start);
	free(s->word);
	free(s->count);
	free(s->label);
	free(s->truth);
	free(s->word_counts);
	free(s->doc_counts);
}

/* ---------- the blocked sampler's phases split over threads ---------- */

#define MAX_THREADS 8

typedef struct thread_split
{
	int			n;				/* threads, the chain's included */
	gnb_blocked_arrays arrays;
	gnb_blocked_helper *helper[MAX_THREADS];
	pthread_t	tid[MAX_THREADS];
	gnb_blocked_step step;		/* the one under way, written before generation */
	atomic_uint_fast64_t generation;
	atomic_uint_fast64_t done[MAX_THREADS];
	atomic_int	stop;
	void	   *meter;			/* the chain's hooks' argument */
	struct split_self
	{
		struct thread_split *ts;
		int			t;
	}			self[MAX_THREADS];	/* each helper thread's argument */
} thread_split;

static void *
plain_alloc(size_t size, void *arg)
{
	void	   *p = calloc(1, size ? size : 1);

	(void) arg;
	if (p == NULL)
		exit(2);
	return p;
}

static void
plain_release(void *ptr, void *arg)
{
	(void) arg;
	free(ptr);
}

static const gnb_hooks plain_hooks = {plain_alloc, plain_release, NULL, NULL, NULL};

static void
run_part(thread_split *ts, int t)
{
	int64_t		from,
				to;

	gnb_blocked_part(ts->helper[t], ts->step.phase, t, ts->n, &from, &to);
	gnb_blocked_helper_run(ts->helper[t], &ts->arrays, &ts->step, from, to);
}

static void *
split_thread(void *arg)
{
	struct split_self *self = arg;
	thread_split *ts = self->ts;
	int			t = self->t;
	uint_fast64_t seen = 0;

	for (;;)
	{
		uint_fast64_t g;

		while ((g = atomic_load_explicit(&ts->generation, memory_order_acquire)) == seen)
			if (atomic_load_explicit(&ts->stop, memory_order_acquire))
				return NULL;
		run_part(ts, t);
		atomic_store_explicit(&ts->done[t], g, memory_order_release);
		seen = g;
	}
}

static int
split_arrays_hook(void *arg, gnb_blocked_arrays *arrays)
{
	*arrays = ((thread_split *) arg)->arrays;
	return 1;
}

static void
split_phase_hook(void *arg, const gnb_blocked_step *step)
{
	thread_split *ts = arg;
	uint_fast64_t g;

	ts->step = *step;
	g = atomic_load_explicit(&ts->generation, memory_order_relaxed) + 1;
	atomic_store_explicit(&ts->generation, g, memory_order_release);
	run_part(ts, 0);
	for (int t = 1; t < ts->n; t++)
		while (atomic_load_explicit(&ts->done[t], memory_order_acquire) != g)
			;
}

static void
split_progress_hook(void *arg, const gnb_sweep *s)
{
	meter_progress(((thread_split *) arg)->meter, s);
}

static void *
split_alloc_hook(size_t size, void *arg)
{
	return meter_alloc(size, ((thread_split *) arg)->meter);
}

static void
split_release_hook(void *ptr, void *arg)
{
	meter_release(ptr, ((thread_split *) arg)->meter);
}

/* The arrays, the helpers and the threads of n-way splits; hooks set to use them. */
static thread_split *
split_begin(const gnb_corpus *corpus, const gnb_params *params, int n, gnb_hooks *hooks)
{
	thread_split *ts = calloc(1, sizeof(thread_split));
	size_t		sizes[GNB_BLOCKED_N_ARRAYS];

	ts->n = n;
	ts->meter = hooks->arg;
	gnb_blocked_sizes(corpus->n_docs, corpus->n_words, corpus->n_classes, params, sizes);
	ts->arrays.log_theta = plain_alloc(sizes[GNB_BLOCKED_LOG_THETA], NULL);
	ts->arrays.N = plain_alloc(sizes[GNB_BLOCKED_N], NULL);
	ts->arrays.log_pi = plain_alloc(sizes[GNB_BLOCKED_LOG_PI], NULL);
	ts->arrays.next_label = plain_alloc(sizes[GNB_BLOCKED_NEXT_LABEL], NULL);
	ts->arrays.pred = plain_alloc(sizes[GNB_BLOCKED_PRED], NULL);
	ts->arrays.block_lse = plain_alloc(sizes[GNB_BLOCKED_BLOCK_LSE], NULL);
	for (int t = 0; t < n; t++)
		ts->helper[t] = gnb_blocked_helper_begin(corpus, params, &plain_hooks);
	for (int t = 1; t < n; t++)
	{
		ts->self[t].ts = ts;
		ts->self[t].t = t;
		pthread_create(&ts->tid[t], NULL, split_thread, &ts->self[t]);
	}
	hooks->alloc = split_alloc_hook;
	hooks->release = split_release_hook;
	hooks->progress = split_progress_hook;
	hooks->blocked_arrays = split_arrays_hook;
	hooks->blocked_phase = split_phase_hook;
	hooks->arg = ts;
	return ts;
}

static void
split_end(thread_split *ts)
{
	atomic_store_explicit(&ts->stop, 1, memory_order_release);
	for (int t = 1; t < ts->n; t++)
		pthread_join(ts->tid[t], NULL);
	for (int t = 0; t < ts->n; t++)
		gnb_blocked_helper_end(ts->helper[t]);
	free(ts->arrays.log_theta);
	free(ts->arrays.N);
	free(ts->arrays.log_pi);
	free(ts->arrays.next_label);
	free(ts->arrays.pred);
	free(ts->arrays.block_lse);
	free(ts);
}

static void
run_sweeps(const corpus_buf *c, gnb_sampler_kind kind, int32_t sweeps)
{
	served_corpus served;
	gnb_corpus	corpus = {0};
	gnb_params	params = {0};
	alloc_meter meter = {0};
	gnb_hooks	hooks = {meter_alloc, meter_release, meter_progress, NULL, &meter};
	gnb_result	result;
	const char *err;
	int64_t		pairs = 0,
				tokens = 0;
	int32_t		unlabelled = 0,
				correct = 0;
	unsigned char *active = calloc(c->V ? c->V : 1, 1);
	int32_t		n_active = 0;
	double		t0,
				t1,
				per_sweep,
				cpu_per_sweep,
				ess;
	int32_t		moves;
	int			n_threads = 1;
	thread_split *split = NULL;
	uint64_t	checksum = UINT64_C(0xcbf29ce484222325);
	size_t		corpus_bytes;
	struct rusage ru;

	serve(c, &served);
	corpus = served.corpus;
	params.sampler = kind;
	params.sweeps = sweeps;
	params.burn_in = sweeps / 2;
	params.lag = 1;
	params.chains = 1;
	params.gamma_pi = 1.0;
	params.gamma_theta = 1.0;
	params.unlabeled_weight = getenv("BENCH_LAMBDA") ? atof(getenv("BENCH_LAMBDA")) : 1.0;
	params.seed = 42;
	params.no_trace = 1;
	if ((err = gnb_check(&corpus, &params)) != NULL)
	{
		fprintf(stderr, "gnb_check: %s\n", err);
		exit(2);
	}
	for (int32_t j = 0; j < corpus.n_docs; j++)
	{
		unlabelled++;
		pairs += corpus.doc_start[j + 1] - corpus.doc_start[j];
		for (int64_t p = corpus.doc_start[j]; p < corpus.doc_start[j + 1]; p++)
		{
			tokens += corpus.count[p];
			if (!active[corpus.word[p]])
				n_active++;
			active[corpus.word[p]] = 1;
		}
	}
	free(active);

	if (getenv("BENCH_THREADS") && kind == GNB_SAMPLER_BLOCKED)
	{
		n_threads = atoi(getenv("BENCH_THREADS"));
		if (n_threads < 1 || n_threads > MAX_THREADS)
		{
			fprintf(stderr, "BENCH_THREADS: 1 to %d\n", MAX_THREADS);
			exit(2);
		}
		if (n_threads > 1)
			split = split_begin(&corpus, &params, n_threads, &hooks);
	}

	t0 = now_seconds();
	gnb_train(&corpus, &params, &hooks, &result);
	t1 = now_seconds();
	if (split)
	{
		split_end(split);
		hooks.arg = &meter;
		hooks.alloc = meter_alloc;
		hooks.release = meter_release;
	}
	for (int64_t i = 0; i < (int64_t) corpus.n_docs * c->K; i++)
	{
		uint64_t	bits;

		/* FNV-1a's step, a double at a time, with a fold of the high bits down */
		memcpy(&bits, &result.label_prob[i], sizeof(bits));
		checksum = (checksum ^ bits) * UINT64_C(0x100000001b3);
		checksum ^= checksum >> 29;
	}
	for (int32_t j = 0; j < corpus.n_docs; j++)
	{
		int32_t		best = 0;

		for (int32_t k = 1; k < c->K; k++)
			if (result.label_prob[(int64_t) j * c->K + k] >
				result.label_prob[(int64_t) j * c->K + best])
				best = k;
		correct += best == served.truth[j];
	}
	ess = result.ess_total;
	moves = result.changed_after_burn_in ? result.changed_after_burn_in[0] : 0;
	gnb_result_free(&result, &hooks);
	getrusage(RUSAGE_SELF, &ru);

	/* steady state: from the end of sweep 1 to the end of the last */
	per_sweep = sweeps > 1 ? (meter.t_last - meter.t_first) / (sweeps - 1) : t1 - t0;
	cpu_per_sweep = sweeps > 1 ? (meter.cpu_last - meter.cpu_first) / (sweeps - 1) : 0.0;
	/* the corpus as served: pairs, offsets, labels, clamped counts */
	corpus_bytes = (size_t) (corpus.n_docs + 1) * sizeof(int64_t) +
		(size_t) pairs * 2 * sizeof(int32_t) + (size_t) corpus.n_docs * sizeof(int32_t) +
		(size_t) c->V * c->K * sizeof(double) + (size_t) c->K * sizeof(double);
	printf("docs=%d unlabelled=%d words=%d classes=%d pairs=%lld tokens=%lld active_words=%d "
		   "sweeps=%d ms_per_sweep=%.4f ns_per_pair_class=%.4f "
		   "gamma_draws_per_sweep=%lld total_s=%.3f accuracy=%.4f "
		   "core_peak_bytes=%zu corpus_bytes=%zu maxrss_kb=%ld cpu_ms_per_sweep=%.4f "
		   "ess=%.1f moves_after_burn_in=%d threads=%d checksum=%016llx\n",
		   c->D, unlabelled, c->V, c->K, (long long) pairs, (long long) tokens, n_active,
		   sweeps, per_sweep * 1e3, per_sweep * 1e9 / ((double) pairs * c->K),
		   (long long) n_active * c->K + c->K, t1 - t0,
		   unlabelled ? (double) correct / unlabelled : 0.0,
		   meter.peak, corpus_bytes, ru.ru_maxrss, cpu_per_sweep * 1e3, ess, (int) moves,
		   n_threads, (unsigned long long) checksum);
	free_served(&served);
}

/*
 * ns per gnb_rng_log_gamma draw over the theta step's shapes: for every word
 * of an unlabelled document and every class, its labelled count + 1, drawn
 * REPS times over.
 */
static void
time_gamma(const corpus_buf *c)
{
	int32_t		K = c->K;
	double	   *n = calloc((size_t) c->V * K, sizeof(double));
	unsigned char *active = calloc(c->V, 1);
	double	   *shapes;
	int64_t		m = 0;
	gnb_rng		rng;
	double		sink = 0.0,
				best = INFINITY;
	const int	reps = 20;

	for (int32_t j = 0; j < c->D; j++)
		for (int64_t p = c->start[j]; p < c->start[j + 1]; p++)
		{
			if (c->label[j] >= 0)
				n[(int64_t) c->word[p] * K + c->label[j]] += c->count[p];
			else
				active[c->word[p]] = 1;
		}
	shapes = xmalloc(sizeof(double) * (size_t) c->V * K);
	for (int32_t w = 0; w < c->V; w++)
		if (active[w])
			for (int32_t k = 0; k < K; k++)
				shapes[m++] = n[(int64_t) w * K + k] + 1.0;
	gnb_rng_seed(&rng, 42);
	/* the fastest of 5 blocks of reps passes: the least disturbed by load */
	for (int b = 0; b < 5; b++)
	{
		double		t0 = now_seconds(),
					t;

		for (int r = 0; r < reps; r++)
			for (int64_t i = 0; i < m; i++)
				sink += gnb_rng_log_gamma(&rng, shapes[i]);
		t = (now_seconds() - t0) * 1e9 / ((double) reps * m);
		if (t < best)
			best = t;
	}
	printf("gamma_draws=%lld ns_per_gamma_draw=%.3f (checksum %g)\n",
		   (long long) m, best, sink / ((double) reps * m * 5));
	free(n);
	free(active);
	free(shapes);
}

int
main(int argc, char **argv)
{
	corpus_buf	c;

	if (argc == 6 && strcmp(argv[1], "real") == 0)
	{
		read_corpus(argv[2], atoi(argv[5]), &c);
		run_sweeps(&c, parse_sampler(argv[3]), atoi(argv[4]));
	}
	else if (argc == 6 && strcmp(argv[1], "synth") == 0)
	{
		corpus_buf	real;

		read_corpus(argv[2], 1, &real);
		synth_corpus(&real, atoi(argv[5]), &c);
		run_sweeps(&c, parse_sampler(argv[3]), atoi(argv[4]));
	}
	else if (argc == 3 && strcmp(argv[1], "gamma") == 0)
	{
		read_corpus(argv[2], 1, &c);
		time_gamma(&c);
	}
	else
	{
		fprintf(stderr, "usage: bench_core real FILE SAMPLER SWEEPS REPLICATE\n"
				"       bench_core synth FILE SAMPLER SWEEPS K\n"
				"       bench_core gamma FILE\n");
		return 2;
	}
	return 0;
}
