/*
 * gnb_align.c
 *	  Chains aligned to the first: the class permutation that matches their
 *	  label probabilities best (Hungarian algorithm).
 */
#include "gnb_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/*
 * Hungarian algorithm (Kuhn-Munkres, O(n^3)) on an n x n cost matrix:
 * assign[row] = column, minimising the summed cost.
 */
static void
hungarian(const gnb_hooks *hooks, const double *cost, int32_t n, int32_t *assign)
{
	double	   *u = gnb_xalloc(hooks, n + 1, sizeof(double));
	double	   *v = gnb_xalloc(hooks, n + 1, sizeof(double));
	double	   *minv = gnb_xalloc(hooks, n + 1, sizeof(double));
	int32_t    *p = gnb_xalloc(hooks, n + 1, sizeof(int32_t));
	int32_t    *way = gnb_xalloc(hooks, n + 1, sizeof(int32_t));
	char	   *used = gnb_xalloc(hooks, n + 1, 1);

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
 * A class with a clamped document is its own identity in every chain: it
 * may only match itself.
 */
void
gnb_align_classes(const run_shared *sh, const double *ref_theta,
			  const double *theta, int32_t *perm)
{
	const int32_t K = sh->K;
	double	   *cost = gnb_xalloc(sh->hooks, (size_t) K * K, sizeof(double));
	int32_t    *assign = gnb_xalloc(sh->hooks, K, sizeof(int32_t));

	for (int32_t w = 0; w < sh->V; w++)
		for (int32_t k = 0; k < K; k++)
			for (int32_t l = 0; l < K; l++)
				cost[k * K + l] += fabs(ref_theta[(int64_t) w * K + k] -
										theta[(int64_t) w * K + l]);
	/* an L1 distance of distributions is at most 2: 1e6 is never chosen */
	for (int32_t k = 0; k < K; k++)
		for (int32_t l = 0; l < K; l++)
			if (k != l && (sh->class_clamped[k] || sh->class_clamped[l]))
				cost[k * K + l] = 1e6;
	hungarian(sh->hooks, cost, K, assign);
	for (int32_t k = 0; k < K; k++)
		perm[assign[k]] = k;
	sh->hooks->release(cost, sh->hooks->arg);
	sh->hooks->release(assign, sh->hooks->arg);
}
