/*
 * gnb_sampler.c
 *	  The "paper" and "collapsed" Gibbs samplers of docs/model.md, their estimates,
 *	  and the exact log joint used by tests.
 *
 * Counts are kept word-major (N[w * K + k]) so that scoring a document reads
 * the K counts of each of its words from one cache line.  Counts are doubles
 * because unlabelled documents weigh unlabeled_weight (lambda), not 1; with
 * lambda = 1 they hold exact integers.
 */
#include "gnb_sampler.h"
#include "gnb_rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* How many documents of a sweep between calls of hooks->check_interrupts. */
#define GNB_INTERRUPT_EVERY 2048

/* Counts up to this are scored with a running product instead of lgamma. */
#define GNB_PRODUCT_MAX_COUNT 8

static void *
default_alloc(size_t size, void *arg)
{
	void	   *p = calloc(1, size ? size : 1);

	(void) arg;
	if (p == NULL)
		abort();
	return p;
}

static void
default_release(void *ptr, void *arg)
{
	(void) arg;
	free(ptr);
}

const gnb_hooks gnb_default_hooks = {default_alloc, default_release, NULL, NULL, NULL};

/*
 * A sum of logs kept as a running product, taking the log only when the
 * product nears overflow or underflow: log() costs ten times a multiply.
 */
typedef struct log_product
{
	double		prod;
	double		log_sum;
} log_product;

static inline void
log_product_init(log_product *p)
{
	p->prod = 1.0;
	p->log_sum = 0.0;
}

static inline void
log_product_mul(log_product *p, double x)
{
	p->prod *= x;
	if (p->prod > 1e200 || p->prod < 1e-200)
	{
		p->log_sum += log(p->prod);
		p->prod = 1.0;
	}
}

static inline double
log_product_value(const log_product *p)
{
	return p->log_sum + log(p->prod);
}

/*
 * lgamma(n + c + g) - lgamma(n + g) for a count c >= 1: log of the rising
 * factorial (n + g)(n + g + 1)...(n + g + c - 1).  Small c goes into the
 * running product *p; large c is returned directly.
 */
static inline double
log_rising(log_product *p, double n_plus_g, int32_t c)
{
	if (c <= GNB_PRODUCT_MAX_COUNT)
	{
		double		f = n_plus_g;

		for (int32_t i = 1; i < c; i++)
			f *= n_plus_g + i;
		log_product_mul(p, f);
		return 0.0;
	}
	return lgamma(n_plus_g + c) - lgamma(n_plus_g);
}

/* What every chain of a run shares: derived once from the corpus. */
typedef struct run_shared
{
	const gnb_corpus *corpus;
	const gnb_params *params;
	const gnb_hooks *hooks;
	int32_t		K;
	int32_t		V;
	int32_t		D;
	int32_t    *unlabeled;		/* ids of unlabelled documents */
	int32_t		n_unlabeled;
	int32_t    *active;			/* words that occur in an unlabelled document */
	int32_t		n_active;
	double	   *inactive_shape; /* K: summed Dirichlet shape of other words */
	double	   *doc_length;		/* D: R_j */
	int			has_labels;
} run_shared;

/* The state of one chain. */
typedef struct chain_state
{
	const run_shared *sh;
	gnb_rng		rng;
	int32_t    *z;				/* D labels */
	double	   *C;				/* K weighted document counts */
	double	   *N;				/* V x K weighted word counts */
	double	   *Nk;				/* K: sum over w of N */
	double	   *S;				/* K: sum over w of lgamma(N + g) - lgamma(g) */
	/*
	 * The prior term of the conditionals, kept up to date as documents
	 * move rather than recomputed for every class of every document:
	 * log(C_k + g_pi), and log(C_k - lambda + g_pi) for a document's own class.
	 */
	double	   *log_prior;		/* K */
	double	   *log_prior_own;	/* K */
	double	   *log_theta;		/* V x K, paper sampler only */
	double	   *scores;			/* K scratch */
	double	   *scratch;		/* K scratch */
	log_product *products;		/* K scratch */
	/* sums over kept sweeps */
	double	   *prob_sum;		/* D x K */
	double	   *theta_sum;		/* V x K */
	double	   *pi_sum;			/* K */
} chain_state;

static void *
xalloc(const gnb_hooks *hooks, size_t n, size_t size)
{
	return hooks->alloc(n * size, hooks->arg);
}

/*
 * Keep in step with the allocations of derive_shared, gnb_train and the
 * chain alignment: every array sized by the corpus or the parameters is
 * counted once, as if all were alive together (some are released earlier,
 * so this bounds the peak from above).
 */
uint64_t
gnb_memory_needed(int32_t n_docs, int32_t n_words, int32_t n_classes, const gnb_params *params)
{
	uint64_t	D = (uint64_t) (n_docs > 0 ? n_docs : 1);
	uint64_t	V = (uint64_t) (n_words > 0 ? n_words : 1);
	uint64_t	K = (uint64_t) n_classes;
	uint64_t	vk = V * K + 1;
	uint64_t	trace = (uint64_t) params->chains * (uint64_t) params->sweeps;
	uint64_t	doubles = 0;
	uint64_t	bytes;

	/*
	 * V x K: labelled counts (shared), N, log theta (paper), theta sums, theta
	 * totals over chains, the reference chain's theta, the result's theta.
	 */
	doubles += 7 * vk;
	/* D x K: label probability sums and the result's */
	doubles += 2 * (D * K + 1);
	/* the trace: log joint and share changed per sweep and chain */
	if (!params->no_trace)
		doubles += 2 * trace;
	/* per chain: the log joints' running sums */
	doubles += 4 * (uint64_t) params->chains;
	/* per document: lengths; per class pair: the alignment's cost matrix */
	doubles += D + K * K;
	/* K-sized vectors (C, Nk, S, priors, scores, sums, alignment scratch) */
	doubles += 24 * (K + 1);
	bytes = doubles * sizeof(double);
	/* int32 per document (labels, last labels, unlabelled index), per word */
	bytes += 3 * D * sizeof(int32_t) + V * sizeof(int32_t) + V;
	bytes += K * (sizeof(log_product) + 4 * sizeof(int32_t));
	/* one allocation header each, generously */
	return bytes + 64 * 64;
}

const char *
gnb_check(const gnb_corpus *corpus, const gnb_params *params)
{
	if (params->sampler != GNB_SAMPLER_PAPER && params->sampler != GNB_SAMPLER_COLLAPSED)
		return "unknown sampler";
	if (params->sweeps <= 0)
		return "sweeps must be positive";
	if (params->burn_in < 0 || params->burn_in >= params->sweeps)
		return "burn_in must be at least 0 and less than sweeps";
	if (params->lag < 1)
		return "lag must be at least 1";
	if (params->lag > params->sweeps - params->burn_in)
		return "lag must not exceed sweeps - burn_in: no sweep would be kept";
	if (params->chains < 1)
		return "chains must be at least 1";
	if (!(params->gamma_pi > 0.0) || !isfinite(params->gamma_pi))
		return "gamma_pi must be positive and finite";
	if (!(params->gamma_theta > 0.0) || !isfinite(params->gamma_theta))
		return "gamma_theta must be positive and finite";
	if (!(params->unlabeled_weight >= 0.0 && params->unlabeled_weight <= 1.0))
		return "unlabeled_weight must be between 0 and 1";
	if (corpus->n_classes < 2)
		return "at least 2 classes are needed";
	if (corpus->n_docs < 0 || corpus->n_words < 0)
		return "negative corpus size";
	if (corpus->doc_start[0] != 0)
		return "document offsets must start at 0";
	for (int32_t j = 0; j < corpus->n_docs; j++)
	{
		if (corpus->doc_start[j + 1] < corpus->doc_start[j])
			return "document offsets must not decrease";
		if (corpus->label[j] < -1 || corpus->label[j] >= corpus->n_classes)
			return "label out of range";
	}
	for (int64_t p = 0; p < corpus->doc_start[corpus->n_docs]; p++)
	{
		if (corpus->word[p] < 0 || corpus->word[p] >= corpus->n_words)
			return "word id out of range";
		if (corpus->count[p] <= 0)
			return "word counts must be positive";
	}
	if ((corpus->extra_word_counts == NULL) != (corpus->extra_doc_counts == NULL))
		return "extra counts need both word and document counts";
	if (corpus->extra_word_counts)
	{
		for (int64_t i = 0; i < (int64_t) corpus->n_words * corpus->n_classes; i++)
			if (!(corpus->extra_word_counts[i] >= 0.0) || !isfinite(corpus->extra_word_counts[i]))
				return "extra word counts must be finite and not negative";
		for (int32_t k = 0; k < corpus->n_classes; k++)
			if (!(corpus->extra_doc_counts[k] >= 0.0) || !isfinite(corpus->extra_doc_counts[k]))
				return "extra document counts must be finite and not negative";
	}
	return NULL;
}

/* Weight of document j in the counts: 1 if clamped, lambda if not. */
static inline double
doc_weight(const run_shared *sh, int32_t j)
{
	return sh->corpus->label[j] >= 0 ? 1.0 : sh->params->unlabeled_weight;
}

/* Add document j, with weight w, to the counts of class k (S not updated). */
static void
add_doc_counts(const run_shared *sh, double *N, double *Nk, double *C,
			   int32_t j, int32_t k, double weight)
{
	const gnb_corpus *c = sh->corpus;
	int32_t		K = sh->K;

	for (int64_t p = c->doc_start[j]; p < c->doc_start[j + 1]; p++)
		N[(int64_t) c->word[p] * K + k] += weight * c->count[p];
	Nk[k] += weight * sh->doc_length[j];
	C[k] += weight;
}

/* S_k = sum over w of lgamma(N_kw + g) - lgamma(g), from scratch. */
static void
compute_word_terms(int32_t V, int32_t K, double g, const double *N, double *S)
{
	double		lg = lgamma(g);

	for (int32_t k = 0; k < K; k++)
		S[k] = 0.0;
	for (int64_t i = 0; i < (int64_t) V * K; i++)
		if (N[i] != 0.0)
			S[i % K] += lgamma(N[i] + g) - lg;
}

/* log P(L, W) from the class totals and S (docs/model.md, the exact posterior). */
static double
log_joint_from_counts(int32_t K, int32_t V, const gnb_params *params,
					  const double *C, const double *Nk, const double *S)
{
	double		gp = params->gamma_pi;
	double		vg = V * params->gamma_theta;
	double		total = 0.0;
	double		lj = 0.0;

	for (int32_t k = 0; k < K; k++)
	{
		total += C[k];
		lj += lgamma(C[k] + gp) - lgamma(gp);
		lj += lgamma(vg) - lgamma(Nk[k] + vg) + S[k];
	}
	lj += lgamma(K * gp) - lgamma(total + K * gp);
	return lj;
}

double
gnb_log_joint(const gnb_corpus *corpus, const gnb_params *params,
			  const int32_t *labels)
{
	const gnb_hooks *hooks = &gnb_default_hooks;
	run_shared	sh;
	int32_t		K = corpus->n_classes;
	int32_t		V = corpus->n_words;
	double	   *N = xalloc(hooks, (size_t) V * K, sizeof(double));
	double	   *Nk = xalloc(hooks, K, sizeof(double));
	double	   *C = xalloc(hooks, K, sizeof(double));
	double	   *S = xalloc(hooks, K, sizeof(double));
	double	   *len = xalloc(hooks, corpus->n_docs > 0 ? corpus->n_docs : 1, sizeof(double));
	double		lj;

	memset(&sh, 0, sizeof(sh));
	sh.corpus = corpus;
	sh.params = params;
	sh.K = K;
	sh.V = V;
	sh.doc_length = len;
	for (int32_t j = 0; j < corpus->n_docs; j++)
	{
		for (int64_t p = corpus->doc_start[j]; p < corpus->doc_start[j + 1]; p++)
			len[j] += corpus->count[p];
		add_doc_counts(&sh, N, Nk, C, j, labels[j], doc_weight(&sh, j));
	}
	compute_word_terms(V, K, params->gamma_theta, N, S);
	lj = log_joint_from_counts(K, V, params, C, Nk, S);
	hooks->release(N, hooks->arg);
	hooks->release(Nk, hooks->arg);
	hooks->release(C, hooks->arg);
	hooks->release(S, hooks->arg);
	hooks->release(len, hooks->arg);
	return lj;
}

static inline void
refresh_prior(chain_state *st, int32_t k)
{
	const double gp = st->sh->params->gamma_pi;

	st->log_prior[k] = log(st->C[k] + gp);
	st->log_prior_own[k] = log(st->C[k] - st->sh->params->unlabeled_weight + gp);
}

/*
 * Move unlabelled document j from class a to class b, keeping N, Nk, C, the
 * prior terms and the word terms S up to date.  With lambda = 1 the change of S is a log of
 * rising factorials, taken as running products; otherwise lgamma.
 */
static void
move_doc(chain_state *st, int32_t j, int32_t a, int32_t b)
{
	const run_shared *sh = st->sh;
	const gnb_corpus *c = sh->corpus;
	const double lambda = sh->params->unlabeled_weight;
	const double g = sh->params->gamma_theta;
	const int32_t K = sh->K;
	double		delta_a = 0.0;
	double		delta_b = 0.0;

	st->z[j] = b;
	if (lambda == 0.0)
		return;
	if (lambda == 1.0)
	{
		log_product pa,
					pb;

		log_product_init(&pa);
		log_product_init(&pb);
		for (int64_t p = c->doc_start[j]; p < c->doc_start[j + 1]; p++)
		{
			double	   *row = st->N + (int64_t) c->word[p] * K;
			int32_t		cnt = c->count[p];

			row[a] -= cnt;
			/* removing: lgamma(n_new + g) - lgamma(n_new + cnt + g) */
			delta_a -= log_rising(&pa, row[a] + g, cnt);
			delta_b += log_rising(&pb, row[b] + g, cnt);
			row[b] += cnt;
		}
		delta_a -= log_product_value(&pa);
		delta_b += log_product_value(&pb);
	}
	else
	{
		for (int64_t p = c->doc_start[j]; p < c->doc_start[j + 1]; p++)
		{
			double	   *row = st->N + (int64_t) c->word[p] * K;
			double		add = lambda * c->count[p];

			delta_a += lgamma(row[a] - add + g) - lgamma(row[a] + g);
			delta_b += lgamma(row[b] + add + g) - lgamma(row[b] + g);
			row[a] -= add;
			row[b] += add;
		}
	}
	st->S[a] += delta_a;
	st->S[b] += delta_b;
	st->Nk[a] -= lambda * sh->doc_length[j];
	st->Nk[b] += lambda * sh->doc_length[j];
	st->C[a] -= lambda;
	st->C[b] += lambda;
	refresh_prior(st, a);
	refresh_prior(st, b);
}

/*
 * Draw theta_k ~ Dirichlet(N_k + g) for every class, as log theta, from the
 * counts N.  Only words that occur in an unlabelled document are drawn one
 * by one: no other word's theta is ever read, and together they are one
 * Gamma draw of their summed shapes (the aggregation property).
 */
static void
theta_step(chain_state *st, const double *N)
{
	const run_shared *sh = st->sh;
	const int32_t K = sh->K;
	const double g = sh->params->gamma_theta;
	double	   *lt = st->log_theta;

	for (int32_t k = 0; k < K; k++)
	{
		double		lmax = -INFINITY;
		double		lrest = -INFINITY;
		double		sum = 0.0;
		double		lz;

		for (int32_t i = 0; i < sh->n_active; i++)
		{
			int64_t		idx = (int64_t) sh->active[i] * K + k;
			double		ly = gnb_rng_log_gamma(&st->rng, N[idx] + g);

			lt[idx] = ly;
			if (ly > lmax)
				lmax = ly;
		}
		if (sh->inactive_shape[k] > 0.0)
		{
			lrest = gnb_rng_log_gamma(&st->rng, sh->inactive_shape[k]);
			if (lrest > lmax)
				lmax = lrest;
		}
		for (int32_t i = 0; i < sh->n_active; i++)
			sum += exp(lt[(int64_t) sh->active[i] * K + k] - lmax);
		sum += exp(lrest - lmax);
		lz = lmax + log(sum);
		for (int32_t i = 0; i < sh->n_active; i++)
			lt[(int64_t) sh->active[i] * K + k] -= lz;
	}
}

static inline void
maybe_check_interrupts(const run_shared *sh, int32_t i)
{
	if (sh->hooks->check_interrupts && (i % GNB_INTERRUPT_EVERY) == 0)
		sh->hooks->check_interrupts(sh->hooks->arg);
}

/* The paper's label step: s_k = log(C_k^-j + g_pi) + sum_w W_jw log theta_kw. */
static int32_t
label_step_paper(chain_state *st)
{
	const run_shared *sh = st->sh;
	const gnb_corpus *c = sh->corpus;
	const int32_t K = sh->K;
	double	   *s = st->scores;
	int32_t		changed = 0;

	for (int32_t i = 0; i < sh->n_unlabeled; i++)
	{
		int32_t		j = sh->unlabeled[i];
		int32_t		a = st->z[j];
		int32_t		b;

		maybe_check_interrupts(sh, i);
		for (int32_t k = 0; k < K; k++)
			s[k] = st->log_prior[k];
		s[a] = st->log_prior_own[a];
		for (int64_t p = c->doc_start[j]; p < c->doc_start[j + 1]; p++)
		{
			const double *row = st->log_theta + (int64_t) c->word[p] * K;
			double		cnt = c->count[p];

			for (int32_t k = 0; k < K; k++)
				s[k] += cnt * row[k];
		}
		b = gnb_rng_categorical_log(&st->rng, s, K, st->scratch);
		if (b != a)
		{
			move_doc(st, j, a, b);
			changed++;
		}
	}
	return changed;
}

/*
 * The collapsed label step (docs/model.md):
 *   s_k = log(C_k^-j + g_pi)
 *       + sum_w [lgamma(N_kw^-j + W_jw + g) - lgamma(N_kw^-j + g)]
 *       - [lgamma(N_k^-j + R_j + Vg) - lgamma(N_k^-j + Vg)]
 * Document j is not taken out of the counts; its own share is subtracted for
 * its current class as the scores are built, and the counts change only if
 * its label does.
 */
static int32_t
label_step_collapsed(chain_state *st)
{
	const run_shared *sh = st->sh;
	const gnb_corpus *c = sh->corpus;
	const int32_t K = sh->K;
	const double g = sh->params->gamma_theta;
	const double vg = sh->V * g;
	const double lambda = sh->params->unlabeled_weight;
	double	   *s = st->scores;
	log_product *prod = st->products;
	int32_t		changed = 0;

	for (int32_t i = 0; i < sh->n_unlabeled; i++)
	{
		int32_t		j = sh->unlabeled[i];
		int32_t		a = st->z[j];
		double		R = sh->doc_length[j];
		int32_t		b;

		maybe_check_interrupts(sh, i);
		for (int32_t k = 0; k < K; k++)
		{
			double		own = (k == a) ? lambda : 0.0;
			double		nk = st->Nk[k] - own * R + vg;

			s[k] = (k == a ? st->log_prior_own[k] : st->log_prior[k]) -
				(lgamma(nk + R) - lgamma(nk));
			log_product_init(&prod[k]);
		}
		for (int64_t p = c->doc_start[j]; p < c->doc_start[j + 1]; p++)
		{
			const double *row = st->N + (int64_t) c->word[p] * K;
			int32_t		cnt = c->count[p];
			double		own = lambda * cnt;

			for (int32_t k = 0; k < K; k++)
			{
				double		n = row[k] - (k == a ? own : 0.0);

				s[k] += log_rising(&prod[k], n + g, cnt);
			}
		}
		for (int32_t k = 0; k < K; k++)
			s[k] += log_product_value(&prod[k]);
		b = gnb_rng_categorical_log(&st->rng, s, K, st->scratch);
		if (b != a)
		{
			move_doc(st, j, a, b);
			changed++;
		}
	}
	return changed;
}

/* Add the current state to the sums over kept sweeps. */
static void
accumulate_kept(chain_state *st)
{
	const run_shared *sh = st->sh;
	const int32_t K = sh->K;
	const double g = sh->params->gamma_theta;
	const double vg = sh->V * g;
	const double gp = sh->params->gamma_pi;
	double		total = 0.0;

	for (int32_t i = 0; i < sh->n_unlabeled; i++)
	{
		int32_t		j = sh->unlabeled[i];

		st->prob_sum[(int64_t) j * K + st->z[j]] += 1.0;
	}
	for (int32_t k = 0; k < K; k++)
	{
		double		inv = 1.0 / (st->Nk[k] + vg);

		for (int32_t w = 0; w < sh->V; w++)
		{
			int64_t		idx = (int64_t) w * K + k;

			st->theta_sum[idx] += (st->N[idx] + g) * inv;
		}
		total += st->C[k];
	}
	for (int32_t k = 0; k < K; k++)
		st->pi_sum[k] += (st->C[k] + gp) / (total + K * gp);
}

/*
 * A chain's kept log joints as running sums (Welford), so that R-hat needs no
 * trace, and its last sweep's log joint.
 */
typedef struct chain_sums
{
	int64_t		n;
	double		mean;
	double		m2;
	double		last;
} chain_sums;

static void
chain_sums_add(chain_sums *s, double x)
{
	double		d = x - s->mean;

	s->n++;
	s->mean += d / s->n;
	s->m2 += d * (x - s->mean);
}

/*
 * Set a chain to its starting state and run all its sweeps.  The trace
 * arrays may be NULL (no_trace); sums gets the kept sweeps' log joints.
 */
static void
run_chain(chain_state *st, int32_t chain, double *log_joint_trace,
		  double *changed_trace, chain_sums *sums)
{
	const run_shared *sh = st->sh;
	const gnb_corpus *c = sh->corpus;
	const gnb_params *params = sh->params;
	const int32_t K = sh->K;
	const int32_t V = sh->V;
	size_t		vk = (size_t) V * K;

	memset(st->C, 0, K * sizeof(double));
	memset(st->Nk, 0, K * sizeof(double));
	memset(st->N, 0, vk * sizeof(double));
	memset(st->prob_sum, 0, (size_t) sh->D * K * sizeof(double));
	memset(st->theta_sum, 0, vk * sizeof(double));
	memset(st->pi_sum, 0, K * sizeof(double));

	/* Clamped documents first: their counts alone give the initial theta. */
	for (int32_t j = 0; j < sh->D; j++)
		if (c->label[j] >= 0)
		{
			st->z[j] = c->label[j];
			add_doc_counts(sh, st->N, st->Nk, st->C, j, c->label[j], 1.0);
		}
	if (c->extra_word_counts)
	{
		for (int32_t w = 0; w < V; w++)
			for (int32_t k = 0; k < K; k++)
			{
				double		n = c->extra_word_counts[(int64_t) w * K + k];

				st->N[(int64_t) w * K + k] += n;
				st->Nk[k] += n;
			}
		for (int32_t k = 0; k < K; k++)
			st->C[k] += c->extra_doc_counts[k];
	}
	if (params->sampler == GNB_SAMPLER_PAPER && sh->n_unlabeled > 0 && !c->init_label)
		theta_step(st, st->N);

	/*
	 * Unlabelled documents: each label drawn from its prior marginal, which
	 * with pi integrated out is uniform over the K classes.  (Drawing one pi
	 * from Dir(g_pi) first would, for small g_pi, often put nearly every
	 * document in one class, a state the collapsed sampler leaves only very
	 * slowly when g_theta is small too.)  A warm start gives the labels, and
	 * the first theta is drawn given them.
	 */
	for (int32_t i = 0; i < sh->n_unlabeled; i++)
	{
		int32_t		j = sh->unlabeled[i];
		int32_t		k = (int32_t) (gnb_rng_uniform(&st->rng) * K);

		if (c->init_label && c->init_label[j] >= 0 && c->init_label[j] < K)
			k = c->init_label[j];
		st->z[j] = k;
		add_doc_counts(sh, st->N, st->Nk, st->C, j, k, params->unlabeled_weight);
	}
	if (params->sampler == GNB_SAMPLER_PAPER && sh->n_unlabeled > 0 && c->init_label)
		theta_step(st, st->N);
	compute_word_terms(V, K, params->gamma_theta, st->N, st->S);
	for (int32_t k = 0; k < K; k++)
		refresh_prior(st, k);

	for (int32_t t = 1; t <= params->sweeps; t++)
	{
		int32_t		changed = 0;
		double		lj;
		double		share;

		if (sh->n_unlabeled > 0)
		{
			if (params->sampler == GNB_SAMPLER_PAPER)
			{
				changed = label_step_paper(st);
				theta_step(st, st->N);
			}
			else
				changed = label_step_collapsed(st);
		}
		lj = log_joint_from_counts(K, V, params, st->C, st->Nk, st->S);
		share = sh->n_unlabeled > 0 ? (double) changed / sh->n_unlabeled : 0.0;
		if (log_joint_trace)
		{
			log_joint_trace[t - 1] = lj;
			changed_trace[t - 1] = share;
		}
		sums->last = lj;
		if (t > params->burn_in && (t - params->burn_in) % params->lag == 0)
		{
			accumulate_kept(st);
			chain_sums_add(sums, lj);
		}
		if (sh->hooks->progress)
			sh->hooks->progress(sh->hooks->arg, chain, t, lj, share);
	}
}

/*
 * Hungarian algorithm (Kuhn-Munkres, O(n^3)) on an n x n cost matrix:
 * assign[row] = column, minimising the summed cost.
 */
static void
hungarian(const gnb_hooks *hooks, const double *cost, int32_t n, int32_t *assign)
{
	double	   *u = xalloc(hooks, n + 1, sizeof(double));
	double	   *v = xalloc(hooks, n + 1, sizeof(double));
	double	   *minv = xalloc(hooks, n + 1, sizeof(double));
	int32_t    *p = xalloc(hooks, n + 1, sizeof(int32_t));
	int32_t    *way = xalloc(hooks, n + 1, sizeof(int32_t));
	char	   *used = xalloc(hooks, n + 1, 1);

	for (int32_t i = 1; i <= n; i++)
	{
		int32_t		j0 = 0;

		p[0] = i;
		for (int32_t j = 0; j <= n; j++)
		{
			minv[j] = INFINITY;
			used[j] = 0;
		}
		do
		{
			int32_t		i0 = p[j0];
			int32_t		j1 = 0;
			double		delta = INFINITY;

			used[j0] = 1;
			for (int32_t j = 1; j <= n; j++)
				if (!used[j])
				{
					double		cur = cost[(int64_t) (i0 - 1) * n + (j - 1)] - u[i0] - v[j];

					if (cur < minv[j])
					{
						minv[j] = cur;
						way[j] = j0;
					}
					if (minv[j] < delta)
					{
						delta = minv[j];
						j1 = j;
					}
				}
			for (int32_t j = 0; j <= n; j++)
			{
				if (used[j])
				{
					u[p[j]] += delta;
					v[j] -= delta;
				}
				else
					minv[j] -= delta;
			}
			j0 = j1;
		} while (p[j0] != 0);
		do
		{
			int32_t		j1 = way[j0];

			p[j0] = p[j1];
			j0 = j1;
		} while (j0);
	}
	for (int32_t j = 1; j <= n; j++)
		assign[p[j] - 1] = j - 1;
	hooks->release(u, hooks->arg);
	hooks->release(v, hooks->arg);
	hooks->release(minv, hooks->arg);
	hooks->release(p, hooks->arg);
	hooks->release(way, hooks->arg);
	hooks->release(used, hooks->arg);
}

/*
 * perm[l] = the class of the reference chain that class l of this chain is:
 * the matching that minimises the summed L1 distance between theta-hats.
 */
static void
align_classes(const run_shared *sh, const double *ref_theta,
			  const double *theta, int32_t *perm)
{
	const int32_t K = sh->K;
	double	   *cost = xalloc(sh->hooks, (size_t) K * K, sizeof(double));
	int32_t    *assign = xalloc(sh->hooks, K, sizeof(int32_t));

	for (int32_t w = 0; w < sh->V; w++)
		for (int32_t k = 0; k < K; k++)
			for (int32_t l = 0; l < K; l++)
				cost[k * K + l] += fabs(ref_theta[(int64_t) w * K + k] -
										theta[(int64_t) w * K + l]);
	hungarian(sh->hooks, cost, K, assign);
	for (int32_t k = 0; k < K; k++)
		perm[assign[k]] = k;
	sh->hooks->release(cost, sh->hooks->arg);
	sh->hooks->release(assign, sh->hooks->arg);
}

/* Potential scale reduction of the log joint over kept sweeps. */
/*
 * The potential scale reduction of the log joint over the kept sweeps of m
 * chains (Gelman and Rubin): NaN with fewer than 2 chains or 2 kept sweeps.
 */
static double
r_hat(const chain_sums *sums, int32_t m)
{
	int64_t		n;
	double		grand = 0.0,
				between = 0.0,
				within = 0.0;

	if (m < 2)
		return NAN;
	n = sums[0].n;
	if (n < 2)
		return NAN;
	for (int32_t c = 0; c < m; c++)
		grand += sums[c].mean / m;
	for (int32_t c = 0; c < m; c++)
	{
		within += sums[c].m2 / (n - 1) / m;
		between += (sums[c].mean - grand) * (sums[c].mean - grand) * n / (m - 1);
	}
	/* constant traces: equal means give 1, rounding aside */
	if (within <= 1e-24 * (grand * grand + 1.0))
		return between <= 1e-24 * (grand * grand + 1.0) ? 1.0 : INFINITY;
	return sqrt(((n - 1.0) / n * within + between / n) / within);
}

/* Derive what all chains share: unlabelled documents, active words, shapes. */
static void
setup_shared(run_shared *sh, const gnb_corpus *corpus, const gnb_params *params,
			 const gnb_hooks *hooks)
{
	const int32_t K = corpus->n_classes;
	const int32_t V = corpus->n_words;
	const int32_t D = corpus->n_docs;
	char	   *is_active = xalloc(hooks, V > 0 ? V : 1, 1);
	double	   *labelled_count = xalloc(hooks, (size_t) V * K + 1, sizeof(double));

	memset(sh, 0, sizeof(*sh));
	sh->corpus = corpus;
	sh->params = params;
	sh->hooks = hooks;
	sh->K = K;
	sh->V = V;
	sh->D = D;
	sh->unlabeled = xalloc(hooks, D > 0 ? D : 1, sizeof(int32_t));
	sh->doc_length = xalloc(hooks, D > 0 ? D : 1, sizeof(double));
	sh->inactive_shape = xalloc(hooks, K, sizeof(double));
	for (int32_t j = 0; j < D; j++)
	{
		int32_t		label = corpus->label[j];

		for (int64_t p = corpus->doc_start[j]; p < corpus->doc_start[j + 1]; p++)
		{
			sh->doc_length[j] += corpus->count[p];
			if (label < 0)
				is_active[corpus->word[p]] = 1;
			else
				labelled_count[(int64_t) corpus->word[p] * K + label] += corpus->count[p];
		}
		if (label < 0)
			sh->unlabeled[sh->n_unlabeled++] = j;
		else
			sh->has_labels = 1;
	}
	if (corpus->extra_word_counts)
	{
		for (int64_t i = 0; i < (int64_t) V * K; i++)
			labelled_count[i] += corpus->extra_word_counts[i];
		for (int32_t k = 0; k < K; k++)
			if (corpus->extra_doc_counts[k] > 0.0)
				sh->has_labels = 1;
	}
	sh->active = xalloc(hooks, V > 0 ? V : 1, sizeof(int32_t));
	for (int32_t w = 0; w < V; w++)
	{
		if (is_active[w])
			sh->active[sh->n_active++] = w;
		else
			for (int32_t k = 0; k < K; k++)
				sh->inactive_shape[k] += labelled_count[(int64_t) w * K + k] +
					params->gamma_theta;
	}
	hooks->release(is_active, hooks->arg);
	hooks->release(labelled_count, hooks->arg);
}

void
gnb_train(const gnb_corpus *corpus, const gnb_params *params,
		  const gnb_hooks *hooks, gnb_result *result)
{
	run_shared	sh;
	chain_state st;
	chain_sums *sums;
	const int32_t K = corpus->n_classes;
	const int32_t V = corpus->n_words;
	const int32_t D = corpus->n_docs;
	size_t		vk = (size_t) V * K;
	double	   *theta_total;
	double	   *ref_theta = NULL;
	int32_t    *perm;
	gnb_rng		base;

	if (hooks == NULL)
		hooks = &gnb_default_hooks;
	setup_shared(&sh, corpus, params, hooks);

	memset(result, 0, sizeof(*result));
	result->n_docs = D;
	result->n_words = V;
	result->n_classes = K;
	result->chains = params->chains;
	result->sweeps = params->sweeps;
	result->kept = (params->sweeps - params->burn_in) / params->lag;
	result->label_prob = xalloc(hooks, (size_t) D * K + 1, sizeof(double));
	result->theta = xalloc(hooks, vk + 1, sizeof(double));
	result->pi = xalloc(hooks, K, sizeof(double));
	if (!params->no_trace)
	{
		result->log_joint = xalloc(hooks, (size_t) params->chains * params->sweeps, sizeof(double));
		result->changed = xalloc(hooks, (size_t) params->chains * params->sweeps, sizeof(double));
	}
	sums = xalloc(hooks, params->chains, sizeof(chain_sums));
	result->last_labels = xalloc(hooks, D > 0 ? D : 1, sizeof(int32_t));

	memset(&st, 0, sizeof(st));
	st.sh = &sh;
	st.z = xalloc(hooks, D > 0 ? D : 1, sizeof(int32_t));
	st.C = xalloc(hooks, K, sizeof(double));
	st.N = xalloc(hooks, vk + 1, sizeof(double));
	st.Nk = xalloc(hooks, K, sizeof(double));
	st.S = xalloc(hooks, K, sizeof(double));
	st.log_prior = xalloc(hooks, K, sizeof(double));
	st.log_prior_own = xalloc(hooks, K, sizeof(double));
	if (params->sampler == GNB_SAMPLER_PAPER)
		st.log_theta = xalloc(hooks, vk + 1, sizeof(double));
	st.scores = xalloc(hooks, K, sizeof(double));
	st.scratch = xalloc(hooks, K, sizeof(double));
	st.products = xalloc(hooks, K, sizeof(log_product));
	st.prob_sum = xalloc(hooks, (size_t) D * K + 1, sizeof(double));
	st.theta_sum = xalloc(hooks, vk + 1, sizeof(double));
	st.pi_sum = xalloc(hooks, K, sizeof(double));
	theta_total = xalloc(hooks, vk + 1, sizeof(double));
	perm = xalloc(hooks, K, sizeof(int32_t));

	gnb_rng_seed(&base, params->seed);
	for (int32_t chain = 0; chain < params->chains; chain++)
	{
		double		kept = result->kept;

		st.rng = base;
		gnb_rng_jump(&base);
		run_chain(&st, chain,
				  result->log_joint ? result->log_joint + (int64_t) chain * params->sweeps : NULL,
				  result->changed ? result->changed + (int64_t) chain * params->sweeps : NULL,
				  &sums[chain]);

		for (size_t i = 0; i < vk; i++)
			st.theta_sum[i] /= kept;
		for (int32_t k = 0; k < K; k++)
			perm[k] = k;
		if (chain == 0)
		{
			ref_theta = xalloc(hooks, vk + 1, sizeof(double));
			memcpy(ref_theta, st.theta_sum, vk * sizeof(double));
		}
		else if (!sh.has_labels)
			align_classes(&sh, ref_theta, st.theta_sum, perm);

		for (int32_t w = 0; w < V; w++)
			for (int32_t k = 0; k < K; k++)
				theta_total[(int64_t) w * K + perm[k]] += st.theta_sum[(int64_t) w * K + k];
		for (int32_t k = 0; k < K; k++)
			result->pi[perm[k]] += st.pi_sum[k] / kept;
		for (int32_t i = 0; i < sh.n_unlabeled; i++)
		{
			int64_t		j = sh.unlabeled[i];

			for (int32_t k = 0; k < K; k++)
				result->label_prob[j * K + perm[k]] += st.prob_sum[j * K + k] / kept;
		}
	}

	/* Average over chains; theta-hat goes out class-major. */
	for (int32_t w = 0; w < V; w++)
		for (int32_t k = 0; k < K; k++)
			result->theta[(int64_t) k * V + w] =
				theta_total[(int64_t) w * K + k] / params->chains;
	for (int32_t k = 0; k < K; k++)
		result->pi[k] /= params->chains;
	for (int32_t j = 0; j < D; j++)
	{
		if (corpus->label[j] >= 0)
			result->label_prob[(int64_t) j * K + corpus->label[j]] = 1.0;
		else
			for (int32_t k = 0; k < K; k++)
				result->label_prob[(int64_t) j * K + k] /= params->chains;
	}
	for (int32_t chain = 0; chain < params->chains; chain++)
		result->final_log_joint += sums[chain].last / params->chains;
	result->r_hat = r_hat(sums, params->chains);
	hooks->release(sums, hooks->arg);
	memcpy(result->last_labels, st.z, (size_t) D * sizeof(int32_t));

	hooks->release(st.z, hooks->arg);
	hooks->release(st.C, hooks->arg);
	hooks->release(st.N, hooks->arg);
	hooks->release(st.Nk, hooks->arg);
	hooks->release(st.S, hooks->arg);
	hooks->release(st.log_prior, hooks->arg);
	hooks->release(st.log_prior_own, hooks->arg);
	if (st.log_theta)
		hooks->release(st.log_theta, hooks->arg);
	hooks->release(st.scores, hooks->arg);
	hooks->release(st.scratch, hooks->arg);
	hooks->release(st.products, hooks->arg);
	hooks->release(st.prob_sum, hooks->arg);
	hooks->release(st.theta_sum, hooks->arg);
	hooks->release(st.pi_sum, hooks->arg);
	hooks->release(theta_total, hooks->arg);
	hooks->release(perm, hooks->arg);
	if (ref_theta)
		hooks->release(ref_theta, hooks->arg);
	hooks->release(sh.unlabeled, hooks->arg);
	hooks->release(sh.doc_length, hooks->arg);
	hooks->release(sh.inactive_shape, hooks->arg);
	hooks->release(sh.active, hooks->arg);
}

void
gnb_result_free(gnb_result *result, const gnb_hooks *hooks)
{
	if (hooks == NULL)
		hooks = &gnb_default_hooks;
	hooks->release(result->label_prob, hooks->arg);
	hooks->release(result->theta, hooks->arg);
	hooks->release(result->pi, hooks->arg);
	if (result->log_joint)
		hooks->release(result->log_joint, hooks->arg);
	if (result->changed)
		hooks->release(result->changed, hooks->arg);
	hooks->release(result->last_labels, hooks->arg);
	memset(result, 0, sizeof(*result));
}
