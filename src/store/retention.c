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
	Datum		version_ids;
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
	/*
	 * the documents' labels by version_id, given as a value: on Citus they
	 * are a distributed table, which a subquery of gibbs_nb.models (a table
	 * of the coordinator) would have to be planned beside
	 */
	gnb_execute(psprintf("SELECT pg_catalog.array_agg(version_id) FROM gibbs_nb.models WHERE %s",
						 filter),
				3, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_SELECT, 1);
	version_ids = gnb_result_value(1, &isnull);
	if (!isnull)
	{
		Oid			id_types[1] = {INT8ARRAYOID};
		Datum		ids[1] = {version_ids};

		gnb_execute("DELETE FROM gibbs_nb.document_labels "
					"WHERE version_id OPERATOR(pg_catalog.=) ANY ($1)",
					1, id_types, ids, NULL, GNB_AS_INTERNAL, SPI_OK_DELETE, 0);
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

/* What deploy_label adds each document's label to. */
typedef struct DeployLabels
{
	GnbDocLabels *dl;
	int64		allocated;		/* documents dl has room for */
	FmgrInfo	input;			/* the labels table's id type's input, looked up once */
	Oid			ioparam;
	const char *model_name;
	int32		version;
} DeployLabels;

static void
deploy_label(void *arg, const struct varlena *id, const double *probs, int n_probs)
{
	DeployLabels *d = arg;
	GnbDocLabels *dl = d->dl;
	int32		K = dl->n_classes;
	char	   *str;

	if (n_probs != K)
		elog(ERROR, "gibbs_nb.document_labels row of model \"%s\" version %d is malformed",
			 d->model_name, d->version);
	if (dl->n == d->allocated)
	{
		d->allocated *= 2;
		dl->ids = repalloc_huge(dl->ids, sizeof(Datum) * d->allocated);
		dl->probs = repalloc_huge(dl->probs, sizeof(double) * d->allocated * K);
	}
	str = text_to_cstring((const text *) id);
	dl->ids[dl->n] = InputFunctionCall(&d->input, str, d->ioparam, -1);
	pfree(str);
	memcpy(dl->probs + dl->n * K, probs, sizeof(double) * K);
	dl->n++;
}

/*
 * A version's labels as it was published: its classes, its documents' ids
 * (converted from text by the id type's input function, as the current
 * user) and probabilities (gibbs_nb.document_labels, read as the current
 * user), its labels table and that table's id type.  False if the version
 * keeps none (published before 0.2.0, or imported).  SPI connected.
 */
bool
gnb_store_version_labels(const char *owner, const char *model_name, int32 version,
						 GnbDocLabels *dl, char ***classes, Oid *labels_relid, Oid *id_type)
{
	Oid			types[3] = {TEXTOID, TEXTOID, INT4OID};
	Datum		values[3] = {CStringGetTextDatum(owner), CStringGetTextDatum(model_name),
	Int32GetDatum(version)};
	bool		isnull;
	ArrayType  *cls;
	Datum	   *class_texts;
	int			K;
	int64		version_id;
	DeployLabels d;
	Oid			input;
	int			level;

	gnb_execute("SELECT p.classes, p.version_id, "
				"gibbs_nb.model_relation(m.labels_relid, m.labels_table, m.catalog, m.owner) "
				"FROM gibbs_nb.packed p JOIN gibbs_nb.models m USING (model_name, owner, version) "
				"WHERE p.owner OPERATOR(pg_catalog.=) $1 AND p.model_name OPERATOR(pg_catalog.=) $2 "
				"AND p.version OPERATOR(pg_catalog.=) $3",
				3, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_SELECT, 1);
	if (SPI_processed == 0)
		return false;
	cls = DatumGetArrayTypePCopy(gnb_result_value(1, &isnull));
	version_id = DatumGetInt64(gnb_result_value(2, &isnull));
	*labels_relid = DatumGetObjectId(gnb_result_value(3, &isnull));
	/* the labels table's id column: what its rows must be made of */
	*id_type = get_atttype(*labels_relid, 1);
	if (!OidIsValid(*id_type))
		return false;

	deconstruct_array(cls, TEXTOID, -1, false, TYPALIGN_INT, &class_texts, NULL, &K);
	*classes = palloc(sizeof(char *) * K);
	for (int k = 0; k < K; k++)
		(*classes)[k] = TextDatumGetCString(class_texts[k]);

	dl->n = 0;
	dl->n_classes = K;
	d.dl = dl;
	d.allocated = 1024;
	dl->ids = palloc(sizeof(Datum) * d.allocated);
	dl->probs = palloc(sizeof(double) * d.allocated * K);
	getTypeInputInfo(*id_type, &input, &d.ioparam);
	/* once: a domain's input keeps its CHECK's state across calls (fn_extra) */
	fmgr_info(input, &d.input);
	d.model_name = model_name;
	d.version = version;
	level = gnb_pin_id_text_format();
	(void) gnb_store_each_document_label(version_id, false, deploy_label, &d);
	AtEOXact_GUC(true, level);
	return dl->n > 0;
}
