/*
 * versions.c
 *	  Writing a model version: its number, its gibbs_nb.models row, pi,
 *	  trace, the packed row prediction reads, its tokenizer and held-out
 *	  metrics.
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
#include "utils/portal.h"
#include "utils/regproc.h"
#include "utils/array.h"
#include "utils/float.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

/* pi-hat rows: K of them. */
static void
write_pi(const GnbJobParams *params, const GnbCorpus *corpus, const gnb_result *result,
		 int32 version)
{
	Oid			types[5] = {TEXTOID, INT4OID, TEXTARRAYOID, FLOAT8ARRAYOID, TEXTOID};
	Datum		values[5];

	values[0] = CStringGetTextDatum(params->model_name);
	values[1] = Int32GetDatum(version);
	values[2] = PointerGetDatum(gnb_text_array(corpus->classes, corpus->n_classes));
	values[3] = PointerGetDatum(gnb_float8_array(result->pi, corpus->n_classes));
	values[4] = CStringGetTextDatum(params->model_owner);
	gnb_execute("INSERT INTO gibbs_nb.pi (model_name, version, class, probability, owner) "
				"SELECT $1, $2, u.c, u.p, $5 FROM ROWS FROM (pg_catalog.unnest($3), pg_catalog.unnest($4)) AS u(c, p)",
				5, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_INSERT, 0);
}

/*
 * Ids cross versions as text (gibbs_nb.document_labels.id): written by a job
 * under its role's settings, read back by a deploy or a warm start under the
 * session's.  The text of a date, a float or an interval depends on
 * DateStyle, IntervalStyle, extra_float_digits and lc_monetary: a date id
 * written as 03/04/2024 under 'SQL, DMY' was read as 4 March under
 * 'ISO, MDY', and its labels went to another row.  Pinned while ids are
 * written or read; the caller ends the level with AtEOXact_GUC(true, level).
 */
int
gnb_pin_id_text_format(void)
{
	int			level = NewGUCNestLevel();

	(void) set_config_option("datestyle", "ISO, YMD", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("intervalstyle", "postgres", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("extra_float_digits", "3", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("lc_monetary", "C", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	return level;
}

/*
 * Documents' labels of a version (version_id): a gibbs_nb.document_labels
 * row a document, its id as text (a version's labels outlive its job and
 * the source's type) and its K probabilities, written a batch at a time:
 * the ids' text is never all held at once.  SPI connected.
 */
void
gnb_store_document_labels_batch(const GnbJobParams *params, const GnbDocLabels *labels,
								int64 version_id)
{
	int32		K = labels->n_classes;
	Oid			types[5] = {INT8OID, TEXTOID, TEXTARRAYOID, FLOAT8ARRAYOID, INT8OID};
	MemoryContext batch_cxt = AllocSetContextCreate(CurrentMemoryContext,
													"gibbs_nb document labels batch",
													ALLOCSET_DEFAULT_SIZES);
	Oid			output;
	bool		varlena;
	int			level;

	level = gnb_pin_id_text_format();
	getTypeOutputInfo(params->source.id_type, &output, &varlena);
	for (int64 start = 0, n; start < labels->n; start += n)
	{
		MemoryContext old = MemoryContextSwitchTo(batch_cxt);
		int32		room = (int32) Min(GNB_LABELS_BATCH, labels->n - start);
		char	  **ids = palloc(sizeof(char *) * room);
		Size		bytes = 0;
		Datum		values[5];

		/* a batch's ids' text and probabilities in at most GNB_LABELS_BATCH_BYTES */
		for (n = 0; n < room; n++)
		{
			char	   *id = OidOutputFunctionCall(output, labels->ids[start + n]);
			Size		size = strlen(id) + sizeof(double) * K;

			if (n > 0 && bytes + size > GNB_LABELS_BATCH_BYTES)
				break;			/* (made again for the next batch) */
			ids[n] = id;
			bytes += size;
		}
		values[0] = Int64GetDatum(version_id);
		values[1] = CStringGetTextDatum(params->model_owner);
		values[2] = PointerGetDatum(gnb_text_array(ids, n));
		values[3] = PointerGetDatum(gnb_float8_array(labels->probs + start * K, n * K));
		values[4] = Int64GetDatum(K);
		MemoryContextSwitchTo(old);
		/* not folded into the plan: that copied the arrays once more */
		gnb_execute_unfolded("INSERT INTO gibbs_nb.document_labels (version_id, owner, id, probabilities) "
							 "SELECT $1, $2, u.id, " GNB_BATCH_ROW_SQL("$4", "u.o", "$5") " "
							 "FROM ROWS FROM (pg_catalog.unnest($3)) WITH ORDINALITY AS u(id, o)",
							 5, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_INSERT);
		MemoryContextReset(batch_cxt);
		CHECK_FOR_INTERRUPTS();
	}
	AtEOXact_GUC(true, level);
	MemoryContextDelete(batch_cxt);
}

/*
 * The rows of a query (sql, with nargs parameters), read by a cursor
 * fetch at a time as role reader (or, if InvalidOid, as the current user,
 * search_path pinned), each fetch's passed to fn with arg:
 * never all held at once.  fn may run statements through SPI but not read
 * from the cursor (its position is checked after each fetch; what names the
 * rows in that error); the rows are freed after it.  Returns how many.  SPI
 * connected.
 */
int64
gnb_store_each_fetch(const char *sql, int nargs, Oid *types, Datum *values, Oid reader,
					 const char *what, int32 fetch, GnbRowsFn fn, void *arg)
{
	GnbPrivilegeState priv;
	Portal		portal;
	int64		n = 0;

	if (OidIsValid(reader))
		gnb_become_role(reader, &priv);
	else
		gnb_pin_search_path(&priv);
	portal = SPI_cursor_open_with_args(NULL, sql, nargs, types, values, NULL, false,
									   CURSOR_OPT_NO_SCROLL);
	gnb_restore_user(&priv);
	PinPortal(portal);
	for (;;)
	{
		SPITupleTable *rows;
		uint64		got;

		if (OidIsValid(reader))
			gnb_become_role(reader, &priv);
		else
			gnb_pin_search_path(&priv);
		SPI_cursor_fetch(portal, true, fetch);
		gnb_restore_user(&priv);
		rows = SPI_tuptable;
		got = SPI_processed;
		if (portal->portalPos != (uint64) n + got)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("another statement read from gibbs_nb's cursor over %s", what)));
		if (got == 0)
			break;
		fn(arg, rows, got);
		n += (int64) got;
		SPI_freetuptable(rows);
	}
	UnpinPortal(portal);
	SPI_cursor_close(portal);
	return n;
}

/* What store_labels_fetch needs (store_document_labels_query). */
typedef struct LabelsFetch
{
	const GnbJobParams *params;
	const char *what;
	int64		version_id;
	int32		n_classes;
	GnbEachIdFn each_id;
	void	   *each_arg;
	MemoryContext batch_cxt;
	MemoryContext row_cxt;
} LabelsFetch;

/* A GnbRowsFn: a fetch of (id, probabilities) rows checked and written. */
static void
store_labels_fetch(void *arg, SPITupleTable *rows, uint64 got)
{
	LabelsFetch *f = arg;
	const char *what = f->what;
	int32		n_classes = f->n_classes;
	GnbDocLabels batch;

	gnb_check_result_column(rows->tupdesc, 1, f->params->source.id_type, "labels' id");
	gnb_check_result_column(rows->tupdesc, 2, FLOAT8ARRAYOID, "labels' probabilities");
	batch.n = (int64) got;
	batch.n_classes = n_classes;
	batch.ids = MemoryContextAlloc(f->batch_cxt, sizeof(Datum) * got);
	batch.probs = MemoryContextAlloc(f->batch_cxt, sizeof(double) * got * n_classes);
	for (uint64 i = 0; i < got; i++)
	{
		bool		id_null;
		bool		probs_null;
		Datum		probs_value;
		ArrayType  *probs;
		MemoryContext old;

		batch.ids[i] = SPI_getbinval(rows->vals[i], rows->tupdesc, 1, &id_null);
		probs_value = SPI_getbinval(rows->vals[i], rows->tupdesc, 2, &probs_null);
		if (id_null || probs_null)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("a row of %s has no %s", what, id_null ? "id" : "probabilities")));
		/* (detoasted in row_cxt, gone after the row) */
		old = MemoryContextSwitchTo(f->row_cxt);
		probs = DatumGetArrayTypeP(probs_value);
		if (f->each_id)
			f->each_id(f->each_arg, batch.ids[i]);
		MemoryContextSwitchTo(old);
		if (ARR_NDIM(probs) != 1 || ARR_HASNULL(probs) || ARR_ELEMTYPE(probs) != FLOAT8OID ||
			ARR_DIMS(probs)[0] != n_classes)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("a row of %s is not of %d probabilities", what, n_classes)));
		memcpy(batch.probs + i * n_classes, ARR_DATA_PTR(probs), sizeof(double) * n_classes);
		for (int32 k = 0; k < n_classes; k++)
			if (!isfinite(batch.probs[i * n_classes + k]))
				ereport(ERROR,
						(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
						 errmsg("a row of %s has a probability that is not finite", what)));
		MemoryContextReset(f->row_cxt);
	}
	gnb_store_document_labels_batch(f->params, &batch, f->version_id);
	MemoryContextReset(f->batch_cxt);
}

/*
 * A version's documents' labels (gibbs_nb.document_labels, version_id) from
 * the rows (id, probabilities) of a query (sql, with nargs parameters),
 * read as gnb_store_each_fetch reads them (as reader, or the current user),
 * each fetch written by gnb_store_document_labels_batch.  Each row must be
 * an id of the source's type and n_classes finite probabilities: else what
 * (the rows' origin, for the errors) was changed under the job.  each_id
 * (unless NULL) is called with each row's id (what it allocates is freed
 * after the row).  Returns how many rows.  SPI connected.
 */
static int64
store_document_labels_query(const GnbJobParams *params, const char *sql, int nargs, Oid *types,
							Datum *values, Oid reader, const char *what, int64 version_id,
							int32 n_classes, GnbEachIdFn each_id, void *each_arg)
{
	LabelsFetch f;
	int64		n;

	f.params = params;
	f.what = what;
	f.version_id = version_id;
	f.n_classes = n_classes;
	f.each_id = each_id;
	f.each_arg = each_arg;
	f.batch_cxt = AllocSetContextCreate(CurrentMemoryContext, "gibbs_nb labels read back",
										ALLOCSET_DEFAULT_SIZES);
	/* (beside batch_cxt, not in it: resetting a context deletes its children) */
	f.row_cxt = AllocSetContextCreate(CurrentMemoryContext, "gibbs_nb label read back",
									  ALLOCSET_DEFAULT_SIZES);
	n = gnb_store_each_fetch(sql, nargs, types, values, reader, what, GNB_LABELS_FETCH,
							 store_labels_fetch, &f);
	MemoryContextDelete(f.row_cxt);
	MemoryContextDelete(f.batch_cxt);
	return n;
}

/*
 * A version's documents' labels (gibbs_nb.document_labels) from the rows it
 * wrote into its labels table, relid (locked, and named `qualified` under
 * that lock), where the job's nodes wrote those of the documents they held
 * (gnb_nodes_write_labels): read back as the table's owner, the model's (on
 * Citus no other role may read placements its transaction wrote), as
 * store_document_labels_query reads them (each_id, each_arg); there must be
 * expected of them (the rows the version wrote there): else the table was
 * changed under the job.  SPI connected.
 */
void
gnb_store_document_labels_from(const GnbJobParams *params, Oid relid, const char *qualified,
							   int32 version, int64 version_id, int32 n_classes, int64 expected,
							   GnbEachIdFn each_id, void *each_arg)
{
	Oid			types[1] = {INT4OID};
	Datum		values[1] = {Int32GetDatum(version)};
	Oid			owner = gnb_labels_table_owner(relid, params->model_owner, params->model_name,
											   ERROR);
	int64		n;

	n = store_document_labels_query(params,
									psprintf("SELECT id, probabilities FROM %s "
											 "WHERE version OPERATOR(pg_catalog.=) $1", qualified),
									1, types, values, owner,
									psprintf("labels table %s", qualified), version_id, n_classes,
									each_id, each_arg);
	if (n != expected)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("labels table %s holds " INT64_FORMAT " rows of version %d, not " INT64_FORMAT,
						qualified, n, version, expected),
				 errdetail("It was changed while the version was published.")));
}

/*
 * A version's documents' labels (gibbs_nb.document_labels) from a query of
 * the current user's (the job's caller's) that gives (id, probabilities)
 * rows: the labels the job's nodes give their documents
 * (gnb_nodes_store_labels), as store_document_labels_query reads them
 * (each_id, each_arg).  Returns how many rows.  SPI connected.
 */
int64
gnb_store_document_labels_of(const GnbJobParams *params, const char *sql, int nargs, Oid *types,
							 Datum *values, const char *what, int64 version_id, int32 n_classes,
							 GnbEachIdFn each_id, void *each_arg)
{
	return store_document_labels_query(params, sql, nargs, types, values, InvalidOid, what,
									   version_id, n_classes, each_id, each_arg);
}

/*
 * Call fn(arg, id, probabilities, n_probabilities) for each of a version's
 * gibbs_nb.document_labels rows, in no particular order: read as the
 * current user (row security applies: a model's owner sees its rows), or
 * with internal as the extension's owner (who wrote them: on Citus no
 * other role may read them in the transaction that wrote them), by a
 * cursor, GNB_LABELS_FETCH rows at a time, so that a version's rows are
 * never all held at once; fn runs in the caller's memory context, and a
 * row's values are gone after it returns.  A row whose probabilities are
 * not a one-dimensional array of numbers is an error.  Returns how many
 * rows.  SPI connected.
 *
 * fn may run a user's code (deploy's ids are made by the labels table's id
 * type's input, a domain's CHECK perhaps), which must neither close the
 * cursor under the loop (it is pinned: CLOSE fails) nor read rows of it
 * (the cursor's position is checked after each fetch).  fn may run
 * statements through SPI.
 */
int64
gnb_store_each_document_label(int64 version_id, bool internal, GnbDocumentLabelFn fn, void *arg)
{
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(version_id)};
	GnbPrivilegeState priv;
	Portal		portal;
	MemoryContext row_cxt = AllocSetContextCreate(CurrentMemoryContext,
												  "gibbs_nb document label",
												  ALLOCSET_DEFAULT_SIZES);
	int64		n = 0;
	/* fn's: SPI's calls leave its own current */
	MemoryContext caller = CurrentMemoryContext;

	if (internal)
		gnb_become_internal(&priv);
	else
		gnb_pin_search_path(&priv);
	portal = SPI_cursor_open_with_args(NULL,
									   "SELECT id, probabilities FROM gibbs_nb.document_labels "
									   "WHERE version_id OPERATOR(pg_catalog.=) $1",
									   1, types, values, NULL, false, CURSOR_OPT_NO_SCROLL);
	gnb_restore_user(&priv);
	PinPortal(portal);
	for (;;)
	{
		/* the fetch's rows kept here: fn's statements replace SPI_tuptable */
		SPITupleTable *rows;
		uint64		got;

		if (internal)
			gnb_become_internal(&priv);
		else
			gnb_pin_search_path(&priv);
		SPI_cursor_fetch(portal, true, GNB_LABELS_FETCH);
		gnb_restore_user(&priv);
		rows = SPI_tuptable;
		got = SPI_processed;
		if (portal->portalPos != (uint64) n + got)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("a version's documents' labels were read by another statement while gibbs_nb read them"),
					 errdetail("The version's id is " INT64_FORMAT ".", version_id)));
		if (got == 0)
			break;
		for (uint64 i = 0; i < got; i++)
		{
			HeapTuple	tuple = rows->vals[i];
			bool		isnull;
			text	   *id;
			ArrayType  *probs;

			/* (detoasted, or an array copied out of a short header, in row_cxt) */
			MemoryContextSwitchTo(row_cxt);
			id = DatumGetTextPP(SPI_getbinval(tuple, rows->tupdesc, 1, &isnull));
			probs = DatumGetArrayTypeP(SPI_getbinval(tuple, rows->tupdesc, 2, &isnull));
			MemoryContextSwitchTo(caller);
			if (ARR_NDIM(probs) != 1 || ARR_HASNULL(probs) || ARR_ELEMTYPE(probs) != FLOAT8OID)
				elog(ERROR, "gibbs_nb.document_labels row of version " INT64_FORMAT " is malformed",
					 version_id);
			fn(arg, id, (const double *) ARR_DATA_PTR(probs), ARR_DIMS(probs)[0]);
			MemoryContextReset(row_cxt);
		}
		n += (int64) got;
		SPI_freetuptable(rows);
		CHECK_FOR_INTERRUPTS();
	}
	UnpinPortal(portal);
	SPI_cursor_close(portal);
	MemoryContextDelete(row_cxt);
	return n;
}

/*
 * The packed row prediction loads: vocabulary and log theta-hat as arrays.
 * Each large array is made in place (gnb_fixed_array, gnb_text_array); the
 * words' counts were made when the sampler let the documents go
 * (gnb_corpus_word_counts).  theta-hat itself goes once its logs are made:
 * the row is formed (a copy of every value) and toasted with it gone.
 */
static void
write_packed(const GnbJobParams *params, const GnbCorpus *corpus,
			 gnb_result *result, int32 version, int64 version_id)
{
	int32		V = corpus->n_words;
	int32		K = corpus->n_classes;
	double	   *log_pi = palloc(sizeof(double) * K);
	Oid			types[9] = {TEXTOID, INT4OID, TEXTOID, TEXTARRAYOID, FLOAT8ARRAYOID,
	TEXTARRAYOID, FLOAT8ARRAYOID, INT8OID, INT8ARRAYOID};
	Datum		values[9];
	ArrayType  *log_theta;
	double	   *lt;

	if (corpus->word_counts == NULL)
		elog(ERROR, "gibbs_nb: the words' counts were not made before publishing");

	log_theta = gnb_fixed_array(FLOAT8OID, sizeof(float8), (int64) V * K, (void **) &lt);
	for (int32 w = 0; w < V; w++)
		for (int32 k = 0; k < K; k++)
			lt[(int64) w * K + k] = log(result->theta[(int64) k * V + w]);
	pfree(result->theta);
	result->theta = NULL;
	for (int32 k = 0; k < K; k++)
		log_pi[k] = log(result->pi[k]);
	values[0] = CStringGetTextDatum(params->model_name);
	values[1] = Int32GetDatum(version);
	values[2] = CStringGetTextDatum(params->model_owner);
	values[3] = PointerGetDatum(gnb_text_array(corpus->classes, K));
	values[4] = PointerGetDatum(gnb_float8_array(log_pi, K));
	values[5] = PointerGetDatum(corpus->tokens);
	values[6] = PointerGetDatum(log_theta);
	values[7] = Int64GetDatum(version_id);
	/* each word's occurrences in the training documents, labelled or not */
	values[8] = PointerGetDatum(corpus->word_counts);
	/*
	 * INSERT ... SELECT, not VALUES: where gibbs_nb.packed is a Citus
	 * reference table, Citus writes the row of an INSERT ... SELECT to
	 * every worker by binary COPY, where a VALUES row goes as SQL text with
	 * the arrays as literals, megabytes each worker parses (1.3 s of a
	 * job's publishing on the spam corpus, docs/performance.md)
	 */
	gnb_execute_unfolded("INSERT INTO gibbs_nb.packed (model_name, version, owner, classes, log_pi, "
					 "tokens, log_theta, version_id, word_counts) "
					 "SELECT * FROM (VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)) AS v",
					 9, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_INSERT);
	pfree(log_theta);
}

#define MODEL_COLUMNS 44

static void
write_model_row(const GnbJobParams *params, const GnbCorpus *corpus,
				const gnb_result *result, ArrayType *warnings, int32 version, int64 version_id,
				Oid labels_relid, int32 keep_versions, double seconds)
{
	const gnb_params *sp = &params->sampler;
	const GnbSourceDesc *src = &params->source;
	Oid			types[MODEL_COLUMNS] = {
		TEXTOID, INT4OID, TEXTOID, INT8OID, TEXTARRAYOID,
		INT4OID, INT4OID, INT4OID, INT8OID, INT4OID,
		TEXTOID, TEXTOID, TEXTOID, TEXTOID, INT4OID,
		INT4OID, INT4OID, INT4OID, INT4OID, TEXTOID,
		FLOAT8OID, FLOAT8OID, FLOAT8OID, INT8OID, TEXTOID,
		OIDOID, FLOAT8OID, FLOAT8OID, FLOAT8OID, TEXTOID,
		OIDOID, INT8OID, INT4OID, BOOLOID, BOOLOID,
		FLOAT8OID, FLOAT8OID, TEXTARRAYOID, TEXTOID, TEXTOID,
		FLOAT8OID, FLOAT8OID, FLOAT8OID, BOOLOID
	};
	Datum		v[MODEL_COLUMNS];
	char		nulls[MODEL_COLUMNS];

	memset(nulls, ' ', sizeof(nulls));
	v[0] = CStringGetTextDatum(params->model_name);
	v[1] = Int32GetDatum(version);
	v[2] = CStringGetTextDatum(params->model_owner);
	v[3] = Int64GetDatum(params->job_id);
	v[4] = PointerGetDatum(gnb_text_array(corpus->classes, corpus->n_classes));
	v[5] = Int32GetDatum(corpus->n_docs + corpus->n_held + corpus->n_labeled);
	v[6] = Int32GetDatum(corpus->n_labeled);
	v[7] = Int32GetDatum(corpus->n_skipped);
	v[8] = Int64GetDatum(corpus->n_tokens);
	v[9] = Int32GetDatum(corpus->n_words);
	v[10] = CStringGetTextDatum(params->source_display);
	v[11] = CStringGetTextDatum(src->tokens_column);
	v[12] = CStringGetTextDatum(src->label_column);
	if (src->label_attnum == 0)
		nulls[12] = 'n';
	v[13] = CStringGetTextDatum(src->id_column);
	v[14] = Int32GetDatum(params->n_classes);
	if (params->n_classes == 0)
		nulls[14] = 'n';
	v[15] = Int32GetDatum(sp->sweeps);
	v[16] = Int32GetDatum(sp->burn_in);
	v[17] = Int32GetDatum(sp->lag);
	v[18] = Int32GetDatum(sp->chains);
	v[19] = CStringGetTextDatum(gnb_sampler_name(sp->sampler));
	/* a sampled gamma: its posterior mean */
	v[20] = Float8GetDatum(sp->sample_gamma_pi ? result->gamma_pi : sp->gamma_pi);
	v[21] = Float8GetDatum(sp->sample_gamma_theta ? result->gamma_theta : sp->gamma_theta);
	v[22] = Float8GetDatum(sp->unlabeled_weight);
	v[23] = Int64GetDatum((int64) sp->seed);
	v[24] = CStringGetTextDatum(quote_qualified_identifier(params->labels_schema,
														   params->labels_table));
	v[25] = ObjectIdGetDatum(labels_relid);
	v[26] = Float8GetDatum(result->final_log_joint);
	v[27] = Float8GetDatum(result->r_hat);
	if (isnan(result->r_hat))
		nulls[27] = 'n';
	v[28] = Float8GetDatum(seconds);
	v[29] = CStringGetTextDatum(gnb_current_role_name());
	v[30] = ObjectIdGetDatum(src->relid);
	v[31] = Int64GetDatum(version_id);
	v[32] = Int32GetDatum(keep_versions);
	v[33] = BoolGetDatum(sp->sample_gamma_pi != 0);
	v[34] = BoolGetDatum(sp->sample_gamma_theta != 0);
	v[35] = Float8GetDatum(result->ess_total);
	if (isnan(result->ess_total))
		nulls[35] = 'n';
	v[36] = Float8GetDatum(result->split_r_hat);
	if (isnan(result->split_r_hat))
		nulls[36] = 'n';
	v[37] = PointerGetDatum(warnings);
	v[38] = CStringGetTextDatum(gnb_catalog_identity());
	v[39] = CStringGetTextDatum(sp->init == GNB_INIT_RANDOM ? "random" : "labels");
	v[40] = Float8GetDatum(result->labels_agreement);
	if (isnan(result->labels_agreement))
		nulls[40] = 'n';
	v[41] = Float8GetDatum(result->labels_only_agreement);
	if (isnan(result->labels_only_agreement))
		nulls[41] = 'n';
	v[42] = Float8GetDatum(result->chain_agreement);
	if (isnan(result->chain_agreement))
		nulls[42] = 'n';
	v[43] = BoolGetDatum(params->unlabeled_weight_chosen);
	gnb_execute("INSERT INTO gibbs_nb.models (model_name, version, owner, job_id, classes, "
				"n_documents, n_labeled, n_skipped, n_tokens, vocabulary_size, "
				"source, tokens_column, label_column, id_column, n_classes, "
				"sweeps, burn_in, lag, chains, sampler, "
				"gamma_pi, gamma_theta, unlabeled_weight, seed, labels_table, "
				"labels_relid, log_likelihood, r_hat, seconds, trained_by, "
				"source_relid, version_id, keep_versions, gamma_pi_sampled, "
				"gamma_theta_sampled, ess, split_r_hat, warnings, catalog, init, "
				"labels_agreement, labels_only_agreement, chain_agreement, "
				"unlabeled_weight_chosen) VALUES "
				"($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, "
				"$16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, "
				"$27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $39, "
				"$40, $41, $42, $43, $44)",
				MODEL_COLUMNS, types, v, nulls, GNB_AS_INTERNAL, SPI_OK_INSERT, 0);
}

/*
 * Lock the model (owner, model_name) against other publishers until the
 * transaction ends, and number its next version: a version number never
 * issued for it before, a version_id no version ever had, and the retention
 * it inherits (5 for a new model).
 * SPI connected.
 */
void
gnb_store_number_version(const char *owner, const char *model_name, int32 *version,
						 int64 *version_id, int32 *keep_versions)
{
	bool		isnull;

	/*
	 * The upsert of the model's versions_issued row is the model's publish
	 * lock: a second publisher of the model waits on that row until this
	 * transaction ends.  Not a lock whose tag is made from the model: no
	 * SQL call can take or hold this one (a user advisory lock on the
	 * names' hashes let any role stop another's publish), and pg_locks,
	 * which every role reads, shows no hash of an owner or model name.  The
	 * number is the next after the last ever issued, even if it was dropped.
	 */
	gnb_model_statement("INSERT INTO gibbs_nb.versions_issued AS v (owner, model_name, last_version) "
					"VALUES ($1, $2, 1) ON CONFLICT (model_name, owner) "
					"DO UPDATE SET last_version = v.last_version OPERATOR(pg_catalog.+) 1 "
					"RETURNING v.last_version",
					owner, model_name, GNB_AS_INTERNAL, SPI_OK_INSERT_RETURNING, 0);
	*version = DatumGetInt32(gnb_result_value(1, &isnull));
	gnb_model_statement("SELECT pg_catalog.nextval('gibbs_nb.version_id_seq'::pg_catalog.regclass), "
					"COALESCE((pg_catalog.array_agg(keep_versions ORDER BY version DESC))[1], 5) "
					"FROM gibbs_nb.models WHERE owner OPERATOR(pg_catalog.=) $1 "
					"AND model_name OPERATOR(pg_catalog.=) $2",
					owner, model_name, GNB_AS_INTERNAL, SPI_OK_SELECT, 0);
	*version_id = DatumGetInt64(gnb_result_value(1, &isnull));
	*keep_versions = DatumGetInt32(gnb_result_value(2, &isnull));
}

/*
 * Take the model's publish lock (the row lock gnb_store_number_version's
 * upsert takes) until the transaction ends: deploying, dropping and
 * setting the retention of a model serialize with each other and with
 * publishing.  Without it, a set_retention that waited for a deploy deleted
 * the version just deployed, its pin read from a snapshot older than the
 * deploy.  A model with no versions_issued row has no versions to race for.
 * SPI connected.
 */
void
gnb_store_lock_model(const char *owner, const char *model_name)
{
	gnb_model_statement("SELECT 1 FROM gibbs_nb.versions_issued "
					"WHERE owner OPERATOR(pg_catalog.=) $1 AND model_name OPERATOR(pg_catalog.=) $2 "
					"FOR UPDATE",
					owner, model_name, GNB_AS_INTERNAL, SPI_OK_SELECT, 0);
}

/*
 * How the version's tokens were made: what the caller stated (tokenizer =>),
 * else as far as the source says: the tokens column's type, and for a
 * generated column its expression (say to_tsvector('english'::regconfig,
 * body)), read from the catalogs under the worker's lock on the source.
 * Shown by gibbs_nb_models.
 */
static void
write_tokenizer(const GnbJobParams *params, int64 version_id)
{
	Oid			types[5] = {OIDOID, INT2OID, OIDOID, INT8OID, TEXTOID};
	Datum		values[5] = {ObjectIdGetDatum(params->source.relid),
		Int16GetDatum(params->source.tokens_attnum),
		ObjectIdGetDatum(params->source.tokens_base), Int64GetDatum(version_id),
		CStringGetTextDatum(params->tokenizer)};
	char		nulls[5] = {' ', ' ', ' ', ' ', params->tokenizer[0] ? ' ' : 'n'};

	gnb_execute("UPDATE gibbs_nb.models SET tokenizer_stated = $5, tokenizer = COALESCE($5, ("
				"SELECT pg_catalog.format_type($3, NULL) OPERATOR(pg_catalog.||) "
				"COALESCE(' = ' OPERATOR(pg_catalog.||) pg_catalog.pg_get_expr(d.adbin, d.adrelid), '') "
				"FROM pg_catalog.pg_attribute a LEFT JOIN pg_catalog.pg_attrdef d "
				"ON d.adrelid OPERATOR(pg_catalog.=) a.attrelid AND d.adnum OPERATOR(pg_catalog.=) a.attnum "
				"AND a.attgenerated OPERATOR(pg_catalog.=) 's' "
				"WHERE a.attrelid OPERATOR(pg_catalog.=) $1 AND a.attnum OPERATOR(pg_catalog.=) $2)) "
				"WHERE version_id OPERATOR(pg_catalog.=) $4",
				5, types, values, nulls, GNB_AS_INTERNAL, SPI_OK_UPDATE, 0);
}

/*
 * Write a version's rows: pi, packed, its documents' labels and the model
 * row (the trace was written as the job sampled, gnb_store_trace_rows), as
 * the extension's owner, in the caller's transaction.  theta-hat is written once, in the
 * packed row: gibbs_nb.theta is a view of it; result->theta is released
 * as soon as that row's log theta-hat is made (NULL after).  warnings is
 * the model row's (worker/warnings.c composes them).  SPI connected.
 */
void
gnb_store_version(const GnbJobParams *params, const GnbCorpus *corpus, gnb_result *result,
				  ArrayType *warnings, const GnbDocLabels *labels, int32 version,
				  int64 version_id, Oid labels_relid, int32 keep_versions, double seconds)
{
	write_pi(params, corpus, result, version);
	write_packed(params, corpus, result, version, version_id);
	gnb_store_document_labels_batch(params, labels, version_id);
	write_model_row(params, corpus, result, warnings, version, version_id, labels_relid,
					keep_versions, seconds);
	write_tokenizer(params, version_id);
}

/*
 * A version's held-out share and the metrics of its held-out documents (a
 * JSON object), as the extension's owner.  SPI connected.
 */
void
gnb_store_holdout(const char *owner, const char *model_name, int32 version, double holdout,
				  const char *metrics_json)
{
	Oid			types[5] = {TEXTOID, TEXTOID, INT4OID, FLOAT8OID, TEXTOID};
	Datum		values[5] = {CStringGetTextDatum(owner), CStringGetTextDatum(model_name),
		Int32GetDatum(version), Float8GetDatum(holdout), CStringGetTextDatum(metrics_json)};

	gnb_execute("UPDATE gibbs_nb.models SET holdout = $4, holdout_metrics = $5::pg_catalog.jsonb "
				"WHERE owner OPERATOR(pg_catalog.=) $1 AND model_name OPERATOR(pg_catalog.=) $2 "
				"AND version OPERATOR(pg_catalog.=) $3",
				5, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_UPDATE, 0);
	if (SPI_processed != 1)
		elog(ERROR, "could not record the held-out metrics of model \"%s\" version %d",
			 model_name, version);
}
