/*
 * retention.c
 *	  Dropping versions (gibbs_nb_drop, keep_versions), the deployed
 *	  version, and what a deploy reads of a version.
 */
#include "gibbs_nb.h"

#include "store/store.h"
#include "security/security.h"

#include <math.h>
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "commands/extension.h"
#include "common/hashfn.h"
#include "commands/sequence.h"
#include "catalog/namespace.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_class.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/lock.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/regproc.h"
#include "utils/array.h"
#include "utils/float.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

/* ---------- dropping versions, retention ---------- */

/*
 * Delete the versions of model (owner, model_name) that `filter` selects from
 * every gibbs_nb table; filter may use $1 (owner), $2 (model_name) and $3
 * (arg, an int4).  Returns how many versions; with labels_tables, appends the
 * OIDs of their labels tables.  Runs as the extension's owner: the caller
 * must have checked that the current role may drop them.  SPI connected.
 */
int
gnb_delete_versions(const char *owner, const char *model_name, const char *filter,
					int32 arg, List **labels_tables)
{
	Oid			types[3] = {TEXTOID, TEXTOID, INT4OID};
	Datum		values[3] = {CStringGetTextDatum(owner), CStringGetTextDatum(model_name),
	Int32GetDatum(arg)};
	static const char *const estimates[] = {"pi", "packed"};
	bool		isnull;
	int			dropped;

	if (labels_tables)
	{
		gnb_execute(psprintf("SELECT DISTINCT " MODEL_RELATION("labels_relid", "labels_table")
							 " FROM gibbs_nb.models WHERE %s", filter),
					3, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_SELECT, 0);
		for (uint64 i = 0; i < SPI_processed; i++)
			*labels_tables = lappend_oid(*labels_tables,
										 DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i],
																		SPI_tuptable->tupdesc,
																		1, &isnull)));
	}
	gnb_execute(psprintf("DELETE FROM gibbs_nb.trace WHERE job_id OPERATOR(pg_catalog.=) ANY "
						 "(SELECT job_id FROM gibbs_nb.models WHERE %s)", filter),
				3, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_DELETE, 0);
	gnb_execute(psprintf("DELETE FROM gibbs_nb.models WHERE %s", filter),
				3, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_DELETE, 0);
	dropped = (int) SPI_processed;
	for (int i = 0; i < lengthof(estimates); i++)
		gnb_execute(psprintf("DELETE FROM gibbs_nb.%s WHERE %s", estimates[i], filter),
					3, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_DELETE, 0);
	return dropped;
}

/* The versions beyond a model's newest keep_versions, but never the deployed one. */
#define OLDER_THAN_KEPT \
	"owner OPERATOR(pg_catalog.=) $1 AND model_name OPERATOR(pg_catalog.=) $2 " \
	"AND version OPERATOR(pg_catalog.<=) $3 " \
	"AND version OPERATOR(pg_catalog.<>) ALL (SELECT p.version FROM gibbs_nb.packed p " \
	"WHERE p.owner OPERATOR(pg_catalog.=) $1 AND p.model_name OPERATOR(pg_catalog.=) $2 AND p.pinned)"

/*
 * Drop the versions of a model older than its newest keep_versions (at
 * publish, and when the setting changes).  Returns how many.  SPI connected.
 */
int
gnb_apply_retention(const char *owner, const char *model_name, int32 newest, int32 keep)
{
	if (newest - keep < 1)
		return 0;
	return gnb_delete_versions(owner, model_name, OLDER_THAN_KEPT, newest - keep, NULL);
}

/* A model's version that sql (of $1 owner, $2 name) selects, or 0.  SPI connected. */
static int32
model_version(const char *sql, const char *owner, const char *model_name)
{
	bool		isnull;
	Datum		d;

	gnb_model_statement(sql, owner, model_name, GNB_AS_INTERNAL, SPI_OK_SELECT, 1);
	d = gnb_result_value(1, &isnull);
	return isnull ? 0 : DatumGetInt32(d);
}

/* The newest version of a model, or 0 if it has none.  SPI connected. */
int32
gnb_store_newest_version(const char *owner, const char *model_name)
{
	return model_version("SELECT pg_catalog.max(version) FROM gibbs_nb.models "
						 "WHERE owner OPERATOR(pg_catalog.=) $1 AND model_name OPERATOR(pg_catalog.=) $2",
						 owner, model_name);
}

/* A model's retention, on every version (a new one inherits it).  SPI connected. */
void
gnb_store_set_keep_versions(const char *owner, const char *model_name, int32 keep)
{
	Oid			types[3] = {TEXTOID, TEXTOID, INT4OID};
	Datum		values[3] = {CStringGetTextDatum(owner), CStringGetTextDatum(model_name),
	Int32GetDatum(keep)};

	gnb_execute("UPDATE gibbs_nb.models SET keep_versions = $3 "
				"WHERE owner OPERATOR(pg_catalog.=) $1 AND model_name OPERATOR(pg_catalog.=) $2",
				3, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_UPDATE, 0);
}

/*
 * What gibbs_nb_retrain needs of a model's latest version, read as the
 * caller: its first 16 columns are gibbs_nb_train's first 16 arguments, in
 * order (source_relid as an oid for source); the 17th is the source's name
 * when trained, then holdout, tokenizer and init, as gibbs_nb_train's
 * arguments of those names.  NULL if the caller sees no version.  A copy:
 * valid after SPI_finish.  SPI connected.
 */
HeapTuple
gnb_store_latest_version(const char *owner, const char *model_name, TupleDesc *desc)
{
	gnb_model_statement("SELECT model_name, " MODEL_RELATION("source_relid", "source") ", "
					"tokens_column, label_column, "
					"id_column, n_classes, sweeps, burn_in, lag, chains, sampler, "
					"CASE WHEN gamma_pi_sampled THEN NULL ELSE gamma_pi END, "
					"CASE WHEN gamma_theta_sampled THEN NULL ELSE gamma_theta END, "
					"CASE WHEN unlabeled_weight_chosen THEN NULL ELSE unlabeled_weight END, "
					"seed, labels_table, source, holdout, tokenizer_stated, init "
					"FROM gibbs_nb.models WHERE owner OPERATOR(pg_catalog.=) $1 "
					"AND model_name OPERATOR(pg_catalog.=) $2 ORDER BY version DESC LIMIT 1",
					owner, model_name, GNB_AS_CALLER, SPI_OK_SELECT, 1);
	if (SPI_processed != 1)
		return NULL;
	*desc = CreateTupleDescCopy(SPI_tuptable->tupdesc);
	return SPI_copytuple(SPI_tuptable->vals[0]);
}

/*
 * The warnings of a version, read as the caller: a copy (valid after
 * SPI_finish), NULL if the caller sees no such version.  SPI connected.
 */
ArrayType *
gnb_store_version_warnings(const char *owner, const char *model_name, int32 version)
{
	Oid			types[3] = {TEXTOID, TEXTOID, INT4OID};
	Datum		values[3] = {CStringGetTextDatum(owner), CStringGetTextDatum(model_name),
	Int32GetDatum(version)};
	bool		isnull;
	Datum		d;
	ArrayType  *warnings;
	ArrayType  *copy;

	gnb_execute("SELECT warnings FROM gibbs_nb.models WHERE owner OPERATOR(pg_catalog.=) $1 "
				"AND model_name OPERATOR(pg_catalog.=) $2 AND version OPERATOR(pg_catalog.=) $3",
				3, types, values, NULL, GNB_AS_CALLER, SPI_OK_SELECT, 1);
	if (SPI_processed != 1)
		return NULL;
	d = gnb_result_value(1, &isnull);
	if (isnull)
		return NULL;
	/* detoasted in SPI's memory, then copied out of it (SPI_palloc) */
	warnings = DatumGetArrayTypeP(d);
	copy = SPI_palloc(VARSIZE(warnings));
	memcpy(copy, warnings, VARSIZE(warnings));
	return copy;
}

/* ---------- the deployed version ---------- */

/* Is a version of the model deployed (pinned)?  SPI connected. */
bool
gnb_store_pinned(const char *owner, const char *model_name)
{
	gnb_model_statement("SELECT 1 FROM gibbs_nb.packed WHERE owner OPERATOR(pg_catalog.=) $1 "
					"AND model_name OPERATOR(pg_catalog.=) $2 AND pinned",
					owner, model_name, GNB_AS_INTERNAL, SPI_OK_SELECT, 1);
	return SPI_processed > 0;
}

/* The version that serves: the deployed one, else the newest; 0 if none.  SPI connected. */
int32
gnb_store_serving_version(const char *owner, const char *model_name)
{
	return model_version("SELECT version FROM gibbs_nb.packed WHERE owner OPERATOR(pg_catalog.=) $1 "
						 "AND model_name OPERATOR(pg_catalog.=) $2 ORDER BY pinned DESC, version DESC LIMIT 1",
						 owner, model_name);
}

/*
 * Deploy `version` of the model (0: none, the latest serves): returns the
 * version that serves now, or 0 if the model has no such version.  SPI
 * connected.
 */
int32
gnb_store_pin(const char *owner, const char *model_name, int32 version)
{
	Oid			types[3] = {TEXTOID, TEXTOID, INT4OID};
	Datum		values[3] = {CStringGetTextDatum(owner), CStringGetTextDatum(model_name),
	Int32GetDatum(version)};

	if (version != 0)
	{
		gnb_execute("SELECT 1 FROM gibbs_nb.packed WHERE owner OPERATOR(pg_catalog.=) $1 "
					"AND model_name OPERATOR(pg_catalog.=) $2 AND version OPERATOR(pg_catalog.=) $3",
					3, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_SELECT, 1);
		if (SPI_processed == 0)
			return 0;
	}
	gnb_execute("UPDATE gibbs_nb.packed SET pinned = (version OPERATOR(pg_catalog.=) $3) "
				"WHERE owner OPERATOR(pg_catalog.=) $1 AND model_name OPERATOR(pg_catalog.=) $2 "
				"AND pinned OPERATOR(pg_catalog.<>) (version OPERATOR(pg_catalog.=) $3)",
				3, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_UPDATE, 0);
	return version != 0 ? version : gnb_store_newest_version(owner, model_name);
}

/*
 * A version's labels as it was published: its classes, its documents' ids
 * (converted from text by the id type's input function) and probabilities,
 * its labels table and that table's id type.  False if the version keeps
 * none (published before 0.2.0).  SPI connected.
 */
bool
gnb_store_version_labels(const char *owner, const char *model_name, int32 version,
						 GnbDocLabels *dl, char ***classes, Oid *labels_relid, Oid *id_type)
{
	Oid			types[3] = {TEXTOID, TEXTOID, INT4OID};
	Datum		values[3] = {CStringGetTextDatum(owner), CStringGetTextDatum(model_name),
	Int32GetDatum(version)};
	bool		isnull;
	ArrayType  *ids;
	ArrayType  *probs;
	ArrayType  *cls;
	Datum	   *id_texts;
	Datum	   *class_texts;
	int			n;
	int			K;
	Oid			input;
	int			level;
	Oid			ioparam;

	gnb_execute("SELECT p.label_ids, p.label_probabilities, p.classes, "
				"gibbs_nb.model_relation(m.labels_relid, m.labels_table, m.catalog, m.owner) "
				"FROM gibbs_nb.packed p JOIN gibbs_nb.models m USING (model_name, owner, version) "
				"WHERE p.owner OPERATOR(pg_catalog.=) $1 AND p.model_name OPERATOR(pg_catalog.=) $2 "
				"AND p.version OPERATOR(pg_catalog.=) $3",
				3, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_SELECT, 1);
	if (SPI_processed == 0)
		return false;
	(void) gnb_result_value(1, &isnull);
	if (isnull)
		return false;
	ids = DatumGetArrayTypePCopy(gnb_result_value(1, &isnull));
	probs = DatumGetArrayTypePCopy(gnb_result_value(2, &isnull));
	cls = DatumGetArrayTypePCopy(gnb_result_value(3, &isnull));
	*labels_relid = DatumGetObjectId(gnb_result_value(4, &isnull));
	/* the labels table's id column: what its rows must be made of */
	*id_type = get_atttype(*labels_relid, 1);
	if (!OidIsValid(*id_type))
		return false;

	deconstruct_array(ids, TEXTOID, -1, false, TYPALIGN_INT, &id_texts, NULL, &n);
	deconstruct_array(cls, TEXTOID, -1, false, TYPALIGN_INT, &class_texts, NULL, &K);
	if (ARR_HASNULL(probs) || ArrayGetNItems(ARR_NDIM(probs), ARR_DIMS(probs)) != (int64) n * K)
		elog(ERROR, "gibbs_nb.packed row of model \"%s\" version %d is malformed",
			 model_name, version);
	*classes = palloc(sizeof(char *) * K);
	for (int k = 0; k < K; k++)
		(*classes)[k] = TextDatumGetCString(class_texts[k]);
	getTypeInputInfo(*id_type, &input, &ioparam);
	dl->n = n;
	dl->n_classes = K;
	dl->ids = palloc_extended(sizeof(Datum) * ((Size) n + 1), MCXT_ALLOC_HUGE);
	level = gnb_pin_id_text_format();
	for (int i = 0; i < n; i++)
		dl->ids[i] = OidInputFunctionCall(input, TextDatumGetCString(id_texts[i]), ioparam, -1);
	AtEOXact_GUC(true, level);
	dl->probs = (double *) ARR_DATA_PTR(probs);
	return true;
}
