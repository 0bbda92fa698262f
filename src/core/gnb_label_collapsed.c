/*
 * gnb_label_collapsed.c
 *	  The label step of the "collapsed" sampler: each unlabelled
 *	  document's label drawn with theta integrated out, its rising factorials
 *	  scored in products (the K = 2 path in vector registers).
 */
#include "gnb_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__) || defined(__clang__)
/*
 * collapsed_full_scores2 works on both classes at once, in the compiler's
 * vector types (two doubles: SSE2 on x86-64, NEON on ARM).  Each lane's
 * operations are the scalar IEEE ones (no contraction into fused
 * multiply-adds without -march), so the results do not depend on it.
 */
#define GNB_VEC2 1
typedef double gnb_v2d __attribute__((vector_size(16)));
typedef uint64_t gnb_v2u __attribute__((vector_size(16)));

/*
 * The product of a document's rising factorials is kept as m 2^e, m brought
 * back into [1, 2) after every four factors by its exponent bits (exact, no
 * log, no branch).  A factor (below) is at most (x + 3)^4 < 2^241 and at
 * least min(x, 1) when x = N_kw + g lies in [GNB_X_MIN, GNB_X_MAX], so m
 * times four factors stays normal and finite.  That holds for every word
 * when g >= GNB_X_MIN and N_k + g <= GNB_X_MAX (N_kw <= N_k), checked per
 * document.  (With lambda < 1 the counts less a document's share carry a
 * rounding residue of about 1e-16 N_kw, which a gamma_theta that small need
 * not dominate: then x, and the scores on any path, are not determined by
 * the state.)
 */
#define GNB_X_MAX 0x1p60
#define GNB_X_MIN 0x1p-60
#define GNB_LN2 0.693147180559945309417232121458176568

/*
 * rising_poly[c] for c = 1 .. 4: the coefficients a0 .. a4 of the rising
 * factorial x (x + 1) ... (x + c - 1) = a0 + a1 x + ... + a4 x^4;
 * rising_poly[0] and [5] are the constant 1.
 */
static const double rising_poly[6][5] = {
	{1, 0, 0, 0, 0},
	{0, 1, 0, 0, 0},
	{0, 1, 1, 0, 0},
	{0, 2, 3, 1, 0},
	{0, 6, 11, 6, 1},
	{1, 0, 0, 0, 0},
};

/*
 * What the first pass over a document needs per count c, column min(c, 5) of
 * a table built per document (rising_table): own * c for the document's own
 * class (0 for c > 4), the coefficients of rising_poly, each twice (one per
 * class), and whether the pair is set aside (c > 4: then the polynomial is
 * the constant 1).  A table load, not a comparison, chooses: the compiler
 * cannot turn it into branches on the count, which varies from word to word
 * and would be mispredicted on most words.  Stored field by field (one
 * vector per column), so that a column's fields are at fixed distances from
 * its first: one shifted index addresses them all.
 */
#define GNB_COLS 6
enum
{
	RT_OWNC = 0,
	RT_A0 = GNB_COLS,			/* a0 .. a4: RT_A0 + i * GNB_COLS */
	RT_SIZE = 6 * GNB_COLS
};

/* rising_big[2 c]: 1 if a pair with count c is set aside (16 bytes a column, as table's) */
static const int64_t rising_big[2 * GNB_COLS] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1};

static void
rising_table(gnb_v2d *t, gnb_v2d own)
{
	for (int32_t c = 0; c < GNB_COLS; c++)
	{
		const gnb_v2d zero = {0.0, 0.0};

		t[RT_OWNC + c] = c <= 4 ? own * (double) c : zero;
		for (int32_t i = 0; i < 5; i++)
		{
			t[RT_A0 + i * GNB_COLS + c][0] = rising_poly[c][i];
			t[RT_A0 + i * GNB_COLS + c][1] = rising_poly[c][i];
		}
	}
}

/* the polynomial of column t (t = table + c) at x, in each lane, by Horner's rule */
static inline gnb_v2d
rising_eval(gnb_v2d x, const gnb_v2d *t)
{
	return (((t[RT_A0 + 4 * GNB_COLS] * x + t[RT_A0 + 3 * GNB_COLS]) * x +
			 t[RT_A0 + 2 * GNB_COLS]) * x + t[RT_A0 + GNB_COLS]) * x + t[RT_A0];
}

/* m (positive, normal) brought into [1, 2); its biased exponent added to *e */
static inline gnb_v2d
renormalise(gnb_v2d m, gnb_v2u *e)
{
	const gnb_v2u mantissa = {UINT64_C(0x000fffffffffffff), UINT64_C(0x000fffffffffffff)};
	const gnb_v2u one = {UINT64_C(0x3ff0000000000000), UINT64_C(0x3ff0000000000000)};
	gnb_v2u		bits = (gnb_v2u) m;

	*e += bits >> 52;
	return (gnb_v2d) ((bits & mantissa) | one);
}

/*
 * The factor of pair p in the first pass over a document: its rising
 * factorial if its count is at most 4, else 1 and the pair is set aside (its
 * offset in the block written to big[*n_big], kept by counting it).
 */
static inline gnb_v2d
pair_factor(const int32_t *word, const int32_t *count, const double *N,
			const gnb_v2d *table, gnb_v2d gv, int64_t p, int32_t offset,
			int32_t *big, int64_t *n_big)
{
	int32_t		cnt = count[p];
	int64_t		col = cnt < 5 ? cnt : 5;
	const gnb_v2d *t = table + col;
	gnb_v2d		x;

	memcpy(&x, N + 2 * (int64_t) word[p], sizeof(x));
	x = (x - t[RT_OWNC]) + gv;
	big[*n_big] = offset;
	*n_big += rising_big[2 * col];
	return rising_eval(x, t);
}

/*
 * gnb_collapsed_full_scores for K = 2: both classes in one pass.  The pairs with
 * counts up to 4 (nine in ten) contribute their rising factorials at once,
 * four pairs per renormalisation, without a branch on the count.  The others
 * are set aside, a block of GNB_BLOCK pairs at a time, without a branch
 * either (the next slot is written always and kept when the count is above
 * 4), and their factors are multiplied in afterwards, eight per pass, each
 * pass keeping the pairs that still need more.  Past
 * GNB_PRODUCT_MAX_COUNT_K2 factors the rest is lgamma(x + c) - lgamma(x +
 * done), by lgamma_diff.
 *
 * Returns 0, leaving s alone, when some x = N_kw + g may lie outside
 * [GNB_X_MIN, GNB_X_MAX] (the caller then takes the general path).
 */
#define GNB_BLOCK 256

static int
collapsed_full_scores2(chain_state *st, int32_t j, int32_t a, double *s)
{
	const run_shared *sh = st->sh;
	const gnb_corpus *c = sh->corpus;
	const int32_t *word = c->word;
	const int32_t *count = c->count;
	const double *N = st->N;
	const double g = st->g_theta;
	const double vg = sh->V * g;
	const double R = sh->doc_length[j];
	const double own0 = a == 0 ? st->lambda : 0.0;
	const double own1 = a == 1 ? st->lambda : 0.0;
	const double nk0 = st->Nk[0] - own0 * R + vg;
	const double nk1 = st->Nk[1] - own1 * R + vg;
	const gnb_v2d own = {own0, own1};
	const gnb_v2d gv = {g, g};
	const int64_t end = c->doc_start[j + 1];
	const int64_t ahead_end = sh->n_pairs - GNB_PREFETCH_AHEAD;
	gnb_v2d		table[RT_SIZE];
	gnb_v2d		m = {1.0, 1.0};
	gnb_v2u		e = {0, 0};
	int64_t		steps = 0;		/* renormalisations, each adding the bias 1023 to e */
	double		l0 = 0.0,
				l1 = 0.0;
	double		big_x[2 * GNB_BLOCK] __attribute__((aligned(16)));
	int32_t		big_c[GNB_BLOCK];
	int32_t		big[GNB_BLOCK];

	if (!(g >= GNB_X_MIN && st->Nk[0] + g <= GNB_X_MAX && st->Nk[1] + g <= GNB_X_MAX))
		return 0;
	rising_table(table, own);
	for (int64_t block = c->doc_start[j]; block < end; block += GNB_BLOCK)
	{
		const int64_t block_end = end - block > GNB_BLOCK ? block + GNB_BLOCK : end;
		const int64_t fast_end = block_end < ahead_end ? block_end : ahead_end;
		int64_t		n_big = 0;
		int64_t		p;

		for (p = block; p + 3 < fast_end; p += 4)
		{
			gnb_v2d		f0,
						f1,
						f2,
						f3;

			gnb_prefetch(N + 2 * (int64_t) word[p + GNB_PREFETCH_AHEAD]);
			gnb_prefetch(N + 2 * (int64_t) word[p + GNB_PREFETCH_AHEAD + 1]);
			gnb_prefetch(N + 2 * (int64_t) word[p + GNB_PREFETCH_AHEAD + 2]);
			gnb_prefetch(N + 2 * (int64_t) word[p + GNB_PREFETCH_AHEAD + 3]);
			f0 = pair_factor(word, count, N, table, gv, p, (int32_t) (p - block), big, &n_big);
			f1 = pair_factor(word, count, N, table, gv, p + 1, (int32_t) (p + 1 - block), big, &n_big);
			f2 = pair_factor(word, count, N, table, gv, p + 2, (int32_t) (p + 2 - block), big, &n_big);
			f3 = pair_factor(word, count, N, table, gv, p + 3, (int32_t) (p + 3 - block), big, &n_big);
			m = renormalise(m * ((f0 * f1) * (f2 * f3)), &e);
			steps++;
		}
		for (; p < block_end; p++)
		{
			if (p < ahead_end)
				gnb_prefetch(N + 2 * (int64_t) word[p + GNB_PREFETCH_AHEAD]);
			m = renormalise(m * pair_factor(word, count, N, table, gv, p, (int32_t) (p - block),
											big, &n_big), &e);
			steps++;
		}

		/*
		 * The pairs set aside: their x, their first eight factors (of the
		 * second four as many as the count has); those with more kept.
		 */
		{
			int64_t		n_more = 0;

			for (int64_t i = 0; i < n_big; i++)
			{
				int64_t		q = block + big[i];
				int32_t		cnt = count[q];
				int32_t		left = cnt - 4;
				gnb_v2d		x;

				memcpy(&x, N + 2 * (int64_t) word[q], sizeof(x));
				x = (x - own * (double) cnt) + gv;
				m = renormalise(m * (rising_eval(x, table + 4) *
									 rising_eval(x + 4.0, table + (left < 4 ? left : 4))), &e);
				memcpy(big_x + 2 * n_more, &x, sizeof(x));
				big_c[n_more] = cnt;
				n_more += cnt > 8;
			}
			steps += n_big;
			n_big = n_more;
		}
		/* the factors from x + done on, eight per pass */
		for (int32_t done = 8; n_big > 0; done += 8)
		{
			int64_t		n_more = 0;

			if (done >= GNB_PRODUCT_MAX_COUNT_K2)
			{
				for (int64_t i = 0; i < n_big; i++)
				{
					l0 += lgamma_diff(big_x[2 * i] + done, big_c[i] - done);
					l1 += lgamma_diff(big_x[2 * i + 1] + done, big_c[i] - done);
				}
				break;
			}
			steps += n_big;
			for (int64_t i = 0; i < n_big; i++)
			{
				int32_t		left = big_c[i] - done;
				int32_t		i1 = left < 4 ? left : 4;
				/* left - 4 clamped to [0, 4] (0: the constant 1), by masks */
				int32_t		i2 = (left - 4) & -(int32_t) (left > 4);
				gnb_v2d		x;
				gnb_v2d		xd;

				i2 = i2 < 4 ? i2 : 4;
				memcpy(&x, big_x + 2 * i, sizeof(x));
				xd = x + (double) done;
				m = renormalise(m * (rising_eval(xd, table + i1) *
									 rising_eval(xd + 4.0, table + i2)), &e);
				memcpy(big_x + 2 * n_more, &x, sizeof(x));
				big_c[n_more] = big_c[i];
				n_more += left > 8;
			}
			n_big = n_more;
		}
	}
	s[0] = (a == 0 ? st->log_pred_own[0] : st->log_pred[0]) -
		lgamma_diff(nk0, R) + l0 +
		(log(m[0]) + (double) ((int64_t) e[0] - 1023 * steps) * GNB_LN2);
	s[1] = (a == 1 ? st->log_pred_own[1] : st->log_pred[1]) -
		lgamma_diff(nk1, R) + l1 +
		(log(m[1]) + (double) ((int64_t) e[1] - 1023 * steps) * GNB_LN2);
	return 1;
}
#endif							/* GNB_VEC2 */

/*
 * The collapsed conditional of document j at full weight, against the counts
 * with j's weighted share taken out (docs/model.md):
 *   s_k = log(C_k^-j + g_pi)
 *       + sum_w [lgamma(N_kw^-j + W_jw + g) - lgamma(N_kw^-j + g)]
 *       - [lgamma(N_k^-j + R_j + Vg) - lgamma(N_k^-j + Vg)]
 * Document j is not taken out of the counts; its own share is subtracted for
 * its current class as the scores are built.  Integer increments: running
 * products of rising factorials.
 */
void
gnb_collapsed_full_scores(chain_state *st, int32_t j, int32_t a, double *s)
{
	const run_shared *sh = st->sh;
	const gnb_corpus *c = sh->corpus;
	const int32_t K = sh->K;
	const double g = st->g_theta;
	const double vg = sh->V * g;
	const double lambda = st->lambda;
	const double R = sh->doc_length[j];
	log_product *prod = st->products;

#ifdef GNB_VEC2
	if (K == 2 && collapsed_full_scores2(st, j, a, s))
		return;
#endif
	for (int32_t k = 0; k < K; k++)
	{
		double		nk = st->Nk[k] - (k == a ? lambda * R : 0.0) + vg;

		s[k] = (k == a ? st->log_pred_own[k] : st->log_pred[k]) -
			lgamma_diff(nk, R);
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
}

/*
 * The tempered collapsed conditional (lambda < 1): the same ratio with j's
 * weighted counts lambda W_jw and lambda R_j, through lgamma, and the
 * prior term with its weight.  At lambda = 0 every class scores 0.
 */
static void
collapsed_tempered_scores(chain_state *st, int32_t j, int32_t a, double *s)
{
	const run_shared *sh = st->sh;
	const gnb_corpus *c = sh->corpus;
	const int32_t K = sh->K;
	const double g = st->g_theta;
	const double vg = sh->V * g;
	const double lambda = st->lambda;
	const double lr = lambda * sh->doc_length[j];

	if (lambda == 0.0)
	{
		for (int32_t k = 0; k < K; k++)
			s[k] = 0.0;
		return;
	}
	for (int32_t k = 0; k < K; k++)
	{
		double		nk = st->Nk[k] - (k == a ? lr : 0.0) + vg;

		s[k] = (k == a ? st->log_prior_own[k] : st->log_prior[k]) -
			lgamma_diff(nk, lr);
	}
	for (int64_t p = c->doc_start[j]; p < c->doc_start[j + 1]; p++)
	{
		const double *row = st->N + (int64_t) c->word[p] * K;
		double		add = lambda * c->count[p];

		for (int32_t k = 0; k < K; k++)
		{
			double		n = row[k] - (k == a ? add : 0.0) + g;

			s[k] += lgamma_diff(n, add);
		}
	}
}

/*
 * The collapsed label step: full-weight scores at lambda = 1, tempered ones
 * otherwise (then, on a kept sweep, the full-weight conditional goes to the
 * label probability sums).
 */
int32_t
gnb_label_step_collapsed(chain_state *st)
{
	const run_shared *sh = st->sh;
	const int32_t K = sh->K;
	const int	tempered = st->lambda != 1.0;
	double	   *s = st->scores;
	int32_t		changed = 0;

	for (int32_t i = 0; i < sh->n_unlabeled; i++)
	{
		int32_t		j = sh->unlabeled[i];
		int32_t		a = st->z[j];
		int32_t		b;

		maybe_check_interrupts(sh, i);
		if (tempered)
		{
			collapsed_tempered_scores(st, j, a, s);
			if (st->kept_sweep)
			{
				gnb_collapsed_full_scores(st, j, a, st->pred);
				add_probabilities(st, j, st->pred);
			}
		}
		else
			gnb_collapsed_full_scores(st, j, a, s);
		if (K == 2)
			b = categorical2(&st->rng, s[0], s[1]);
		else
			b = gnb_rng_categorical_log(&st->rng, s, K, st->scratch);
		if (b != a)
		{
			move_doc(st, j, a, b);
			st->moved[j] = 1;
			changed++;
		}
	}
	return changed;
}
