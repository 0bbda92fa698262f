/*
 * warnings.c
 *	  The warnings of a training (docs/model.md, "Diagnostics"): composed by
 *	  the worker from the sampler's diagnostics into the model row's
 *	  warnings, and raised as NOTICEs by the caller of gibbs_nb_train and
 *	  gibbs_nb_retrain once the job has succeeded.
 */
#include "postgres.h"

#include "gibbs_nb.h"

#include "worker/worker.h"
#include "store/store.h"

#include "executor/spi.h"
#include "utils/array.h"
#include "utils/builtins.h"

/*
 * The warnings of result as text, one element per GNB_WARN_* bit set, each
 * saying what was measured and what helps; classes names the classes.  An
 * empty array if none.
 */
ArrayType *
gnb_warnings_array(const gnb_result *result, char **classes)
{
	char	   *texts[5];
	int			n = 0;

	/* the measured values are in the model row (split_r_hat, ess, ...) */
	if (result->warnings & GNB_WARN_LABELS)
	{
		/* the cause, as far as the labels tell it */
		const char *cause = result->drift_from >= 0 ?
			psprintf("the classes drifted away from the labels: most labelled documents of "
					 "class \"%s\" score as \"%s\"; unlabeled_weight below 1 keeps the model "
					 "nearer its labels, another seed or more chains may find their mode",
					 classes[result->drift_from], classes[result->drift_to]) :
			"the unlabelled documents do not fit the labelled classes: unlabeled_weight "
			"below 1 (e.g. 0.1) keeps the model nearer its labels";

		texts[n++] = psprintf("the labelled documents, each left out, agree with the model "
							  "%.3f of the time and with a model of the labels alone %.3f: %s",
							  result->labels_agreement, result->labels_only_agreement, cause);
	}
	if (result->warnings & GNB_WARN_R_HAT)
		texts[n++] = psprintf("split R-hat of the log joint is above %.2f: %s",
							  GNB_R_HAT_LIMIT, gnb_warning_text(GNB_WARN_R_HAT));
	if (result->warnings & GNB_WARN_ESS)
		texts[n++] = psprintf("effective sample size of the log joint is below %.0f: %s",
							  GNB_ESS_LIMIT, gnb_warning_text(GNB_WARN_ESS));
	if (result->warnings & GNB_WARN_STUCK)
	{
		int64		locked = 0;
		int			chains = 0;

		for (int c = 0; c < result->chains; c++)
			if (result->locked[c] > 0)
			{
				locked += result->locked[c];
				chains++;
			}
		texts[n++] = psprintf("%lld unlabelled %s (in %d of %d chains) kept %s label through "
							  "every sweep after burn-in, which with theta integrated out had "
							  "less than a %g chance: %s",
							  (long long) locked, locked == 1 ? "document" : "documents",
							  chains, result->chains, locked == 1 ? "its" : "their",
							  GNB_LOCKED_CHANCE, gnb_warning_text(GNB_WARN_STUCK));
	}
	if (result->warnings & GNB_WARN_CHAINS)
		texts[n++] = psprintf("the chains' label probabilities agree only %.3f (below %.2f): %s",
							  result->chain_agreement, GNB_AGREEMENT_LIMIT,
							  gnb_warning_text(GNB_WARN_CHAINS));
	return gnb_text_array(texts, n);
}

/*
 * Raise each warning of the version (owner, model_name, version) as a
 * NOTICE, as the caller sees the model row.
 */
void
gnb_notice_warnings(const char *owner, const char *model_name, int32 version)
{
	ArrayType  *warnings;
	Datum	   *elems;
	bool	   *nulls;
	int			n;

	SPI_connect();
	warnings = gnb_store_version_warnings(owner, model_name, version);
	SPI_finish();
	if (warnings == NULL)
		return;
	deconstruct_array(warnings, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	for (int i = 0; i < n; i++)
		if (!nulls[i])
			ereport(NOTICE,
					(errmsg("model \"%s\" version %d: %s", model_name, version,
							TextDatumGetCString(elems[i]))));
}
