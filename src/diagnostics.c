/*
 * diagnostics.c
 *	  The warnings of a training (docs/model.md, "Diagnostics"): composed by
 *	  the worker from the sampler's diagnostics into the model row's
 *	  warnings, and raised as NOTICEs by the caller of gibbs_nb_train and
 *	  gibbs_nb_retrain once the job has succeeded.
 */
#include "postgres.h"

#include "gibbs_nb.h"

#include "executor/spi.h"
#include "utils/array.h"
#include "utils/builtins.h"

/*
 * The warnings of result as text, one element per GNB_WARN_* bit set, each
 * saying what was measured and what helps.  An empty array if none.
 */
ArrayType *
gnb_warnings_array(const gnb_result *result)
{
	char	   *texts[3];
	int			n = 0;

	/* the measured values are in the model row (split_r_hat, ess) */
	if (result->warnings & GNB_WARN_R_HAT)
		texts[n++] = psprintf("split R-hat of the log joint is above %.2f: %s",
							  GNB_R_HAT_LIMIT, gnb_warning_text(GNB_WARN_R_HAT));
	if (result->warnings & GNB_WARN_ESS)
		texts[n++] = psprintf("effective sample size of the log joint is below %.0f: %s",
							  GNB_ESS_LIMIT, gnb_warning_text(GNB_WARN_ESS));
	if (result->warnings & GNB_WARN_STUCK)
	{
		int			stuck = 0;

		for (int c = 0; c < result->chains; c++)
			if (result->changed_after_burn_in[c] == 0)
				stuck++;
		texts[n++] = psprintf("%d of %d chains changed no unlabelled label after burn-in: %s",
							  stuck, result->chains, gnb_warning_text(GNB_WARN_STUCK));
	}
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
