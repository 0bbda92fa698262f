/*
 * gnb_log_joint.c
 *	  The exact log joint of a labelling (docs/model.md), for the trace and
 *	  the tests.
 */
#include "gnb_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* log P(L, W) from the class totals and S (docs/model.md, the exact posterior). */
double
gnb_log_joint_from_counts(int32_t K, int32_t V, double g_theta, double g_pi,
					  const double *C, const double *Nk, const double *S)
{
	double		gp = g_pi;
	double		vg = V * g_theta;
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
	double	   *N = gnb_xalloc(hooks, (size_t) V * K, sizeof(double));
	double	   *Nk = gnb_xalloc(hooks, K, sizeof(double));
	double	   *C = gnb_xalloc(hooks, K, sizeof(double));
	double	   *S = gnb_xalloc(hooks, K, sizeof(double));
	double	   *len = gnb_xalloc(hooks, corpus->n_docs > 0 ? corpus->n_docs : 1, sizeof(double));
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
	if (corpus->extra_word_counts)
	{
		for (int32_t w = 0; w < V; w++)
			for (int32_t k = 0; k < K; k++)
			{
				N[(int64_t) w * K + k] += corpus->extra_word_counts[(int64_t) w * K + k];
				Nk[k] += corpus->extra_word_counts[(int64_t) w * K + k];
			}
		for (int32_t k = 0; k < K; k++)
			C[k] += corpus->extra_doc_counts[k];
	}
	compute_word_terms(V, K, params->gamma_theta, N, S);
	lj = gnb_log_joint_from_counts(K, V, params->gamma_theta, params->gamma_pi, C, Nk, S);
	hooks->release(N, hooks->arg);
	hooks->release(Nk, hooks->arg);
	hooks->release(C, hooks->arg);
	hooks->release(S, hooks->arg);
	hooks->release(len, hooks->arg);
	return lj;
}
