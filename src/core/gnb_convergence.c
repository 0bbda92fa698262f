/*
 * gnb_convergence.c
 *	  Convergence diagnostics: R-hat, split R-hat, effective sample size,
 *	  and the warnings they give.
 */
#include "gnb_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/*
 * The potential scale reduction of the log joint over the kept sweeps of m
 * chains (Gelman and Rubin): NaN with fewer than 2 chains or 2 kept sweeps.
 */
double
gnb_r_hat(const chain_sums *sums, int32_t m)
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

/* Autocorrelations beyond this lag are not summed (bounds the cost). */
#define GNB_ESS_MAX_LAG 5000

double
gnb_ess(const double *x, int64_t n)
{
	double		mean = 0.0;
	double		c0 = 0.0;
	double		tau;
	double		prev_pair = INFINITY;
	double		sum_pairs = 0.0;

	if (n < 4)
		return NAN;
	for (int64_t t = 0; t < n; t++)
		mean += x[t];
	mean /= n;
	for (int64_t t = 0; t < n; t++)
		c0 += (x[t] - mean) * (x[t] - mean);
	c0 /= n;
	if (!(c0 > 1e-24 * (mean * mean + 1.0)))
		return NAN;

	/*
	 * Geyer: Gamma_m = rho(2m) + rho(2m + 1), summed while positive, each
	 * capped by the one before (the initial monotone sequence); the
	 * integrated autocorrelation time is then -1 + 2 sum Gamma_m.
	 */
	for (int64_t m = 0; 2 * m + 1 < n && 2 * m + 1 <= GNB_ESS_MAX_LAG; m++)
	{
		double		pair = 0.0;

		for (int64_t lag = 2 * m; lag <= 2 * m + 1; lag++)
		{
			double		c = 0.0;

			for (int64_t t = 0; t + lag < n; t++)
				c += (x[t] - mean) * (x[t + lag] - mean);
			pair += c / n / c0;
		}
		if (pair <= 0.0)
			break;
		if (pair > prev_pair)
			pair = prev_pair;
		prev_pair = pair;
		sum_pairs += pair;
	}
	tau = -1.0 + 2.0 * sum_pairs;
	/* an antithetic series can give tau < 1; the estimate is capped at n log10 n (Stan's cap) */
	if (tau < 1.0 / log10((double) n))
		tau = 1.0 / log10((double) n);
	return n / tau;
}

double
gnb_split_r_hat(const double *x, int32_t m, int64_t n)
{
	int64_t		half = n / 2;
	int32_t		mm = 2 * m;
	double		grand = 0.0,
				between = 0.0,
				within = 0.0;

	if (n < 4 || m < 1)
		return NAN;
	/* halves: series c's first half x[c n .. c n + half), its second the last half values */
	for (int32_t h = 0; h < mm; h++)
	{
		const double *y = x + (int64_t) (h / 2) * n + (h % 2 ? n - half : 0);
		double		mean = 0.0,
					var = 0.0;

		for (int64_t t = 0; t < half; t++)
			mean += y[t];
		mean /= half;
		for (int64_t t = 0; t < half; t++)
			var += (y[t] - mean) * (y[t] - mean);
		var /= half - 1;
		within += var / mm;
		grand += mean / mm;
	}
	for (int32_t h = 0; h < mm; h++)
	{
		const double *y = x + (int64_t) (h / 2) * n + (h % 2 ? n - half : 0);
		double		mean = 0.0;

		for (int64_t t = 0; t < half; t++)
			mean += y[t];
		mean /= half;
		between += (mean - grand) * (mean - grand);
	}
	between *= (double) half / (mm - 1);
	if (within <= 1e-24 * (grand * grand + 1.0))
		return between <= 1e-24 * (grand * grand + 1.0) ? 1.0 : INFINITY;
	return sqrt(((half - 1.0) / half * within + between / half) / within);
}

int32_t
gnb_diagnose(double split_r_hat, double ess_total,
			 const int32_t *locked, int32_t chains,
			 int32_t n_unlabeled, int sampled_gamma, double chain_agreement)
{
	int32_t		w = 0;

	if (n_unlabeled == 0 && !sampled_gamma)
		return 0;
	if (split_r_hat > GNB_R_HAT_LIMIT)
		w |= GNB_WARN_R_HAT;
	if (ess_total < GNB_ESS_LIMIT)
		w |= GNB_WARN_ESS;
	if (n_unlabeled > 0)
		for (int32_t c = 0; c < chains; c++)
			if (locked[c] > 0)
				w |= GNB_WARN_STUCK;
	if (chain_agreement < GNB_AGREEMENT_LIMIT)
		w |= GNB_WARN_CHAINS;
	return w;
}

const char *
gnb_warning_text(int32_t warning)
{
	switch (warning)
	{
		case GNB_WARN_R_HAT:
			return "the chains (or the two halves of one chain) disagree: run more sweeps, a longer burn_in or more chains";
		case GNB_WARN_ESS:
			return "the log joint is strongly autocorrelated: run more sweeps";
		case GNB_WARN_STUCK:
			return "the chain is stuck on them: the collapsed sampler, unlabeled_weight < 1 "
				"or more chains help";
		case GNB_WARN_LABELS:
			return "the model disagrees with its own labels more than a model of the labels "
				"alone does";
		case GNB_WARN_CHAINS:
			return "the chains found different labellings: the data hold more than one "
				"mode; compare the chains' labels, or keep more labels";
	}
	return "unknown warning";
}
