/*
 * publish.c
 *	  Write a finished job's model version, all in the caller's transaction.
 *
 * The worker calls gnb_publish inside one short transaction: the new version's
 * rows in gibbs_nb.models, theta, pi and trace, and the new contents of the
 * labels table, become visible together when it commits, or not at all.
 * Rows go in as arrays unnested by one INSERT per batch, not a statement per
 * row: theta alone is V x K rows.
 */
#include "gibbs_nb.h"

#include <math.h>

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/typcache.h"
#include "storage/lmgr.h"

/* Rows per INSERT statement. */
#define PUBLISH_BATCH 50000

static ArrayType *
float8_array(const double *values, int n)
{
	Datum	   *d = palloc(sizeof(Datum) * (n > 0 ? n : 1));

	for (int i = 0; i < n; i++)
		d[i] = Float8GetDatum(values[i]);
	return construct_array(d, n, FLOAT8OID, sizeof(float8), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE);
}

static ArrayType *
text_array(char **values, int n)
{
	Datum	   *d = palloc(sizeof(Datum) * (n > 0 ? n : 1));

	for (int i = 0; i < n; i++)
		d[i] = CStringGetTextDatum(values[i]);
	return construct_array(d, n, TEXTOID, -1, false, TYPALIGN_INT);
}

static ArrayType *
int4_array(const int32 *values, int n)
{
	Datum	   *d = palloc(sizeof(Datum) * (n > 0 ? n : 1));

	for (int i = 0; i < n; i++)
		d[i] = Int32GetDatum(values[i]);
	return construct_array(d, n, INT4OID, sizeof(int32), true, TYPALIGN_INT);
}


/*
 * The labels table of this model: reuse the one training created for it,
 * create it if there is none, refuse a table of that name that is not ours.
 * Runs as the caller.  Returns its OID, locked against concurrent DDL until
 * the transaction ends, and in *sql_name its name, made from the catalogs
 * under that lock: the table written is the table checked.
 */
static Oid
prepare_labels_table(const GnbJobParams *params, char **sql_name)
{
	Oid			nspid = get_namespace_oid(params->labels_schema, false);
	Oid			relid = get_relname_relid(params->labels_table, nspid);
	char	   *qualified = quote_qualified_identifier(params->labels_schema,
													   params->labels_table);
	TypeCacheEntry *idtype;

	if (OidIsValid(relid))
	{
		LockRelationOid(relid, ShareRowExclusiveLock);
		if (get_relname_relid(params->labels_table, nspid) != relid ||
			!gnb_labels_table_registered(params->model_owner, params->model_name, relid))
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_TABLE),
					 errmsg("table %s already exists and was not created for model \"%s\"",
							qualified, params->model_name),
					 errhint("Drop or rename the table, or pass another labels_table.")));
	}
	else
	{
		idtype = lookup_type_cache(params->source.id_type, TYPECACHE_BTREE_OPFAMILY);
		gnb_execute(psprintf("CREATE TABLE %s (id %s%s, label pg_catalog.text, "
							 "probability pg_catalog.float8, probabilities pg_catalog.float8[], "
							 "version pg_catalog.int4 NOT NULL)",
							 qualified,
							 format_type_extended(params->source.id_type, params->source.id_typmod,
												  FORMAT_TYPE_TYPEMOD_GIVEN | FORMAT_TYPE_FORCE_QUALIFY),
							 OidIsValid(idtype->btree_opf) ? " PRIMARY KEY" : " NOT NULL"),
					0, NULL, NULL, NULL, GNB_AS_CALLER, SPI_OK_UTILITY, 0);
		gnb_execute(psprintf("COMMENT ON TABLE %s IS %s", qualified,
							 quote_literal_cstr(psprintf("labels from gibbs_nb model %s",
														 params->model_name))),
					0, NULL, NULL, NULL, GNB_AS_CALLER, SPI_OK_UTILITY, 0);
		/* created in this transaction: nobody else can have it yet */
		relid = get_relname_relid(params->labels_table, nspid);
		LockRelationOid(relid, ShareRowExclusiveLock);
	}
	*sql_name = quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
										   get_rel_name(relid));
	return relid;
}

/* Replace the labels table's rows with this version's.  Runs as the caller. */
static void
write_labels(const GnbJobParams *params, const GnbCorpus *corpus,
			 const gnb_result *result, const char *qualified, int32 version)
{
	int32		K = corpus->n_classes;
	Oid			id_array_type = get_array_type(params->source.id_type);
	int16		typlen;
	bool		typbyval;
	char		typalign;
	Oid			types[6] = {id_array_type, TEXTARRAYOID, FLOAT8ARRAYOID, FLOAT8ARRAYOID,
	INT4OID, INT8OID};
	MemoryContext batch_cxt = AllocSetContextCreate(CurrentMemoryContext,
													"gibbs_nb labels batch",
													ALLOCSET_DEFAULT_SIZES);
	int64		total = (int64) corpus->n_labeled + corpus->n_docs;
	char	   *insert;

	get_typlenbyvalalign(params->source.id_type, &typlen, &typbyval, &typalign);
	gnb_execute(psprintf("DELETE FROM %s", qualified), 0, NULL, NULL, NULL,
				GNB_AS_CALLER, SPI_OK_DELETE, 0);
	insert = psprintf("INSERT INTO %s (id, label, probability, probabilities, version) "
					  "SELECT u.id, u.label, u.p, "
					  "$4[((u.o OPERATOR(pg_catalog.-) 1) OPERATOR(pg_catalog.*) $6 "
					  "OPERATOR(pg_catalog.+) 1)::pg_catalog.int4 : "
					  "(u.o OPERATOR(pg_catalog.*) $6)::pg_catalog.int4], $5 "
					  "FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2), pg_catalog.unnest($3)) "
					  "WITH ORDINALITY AS u(id, label, p, o)",
					  qualified);
	/* rows 0 .. n_labeled - 1 are the labelled documents, then the others */
	for (int64 start = 0; start < total; start += PUBLISH_BATCH)
	{
		int32		n = (int32) Min(PUBLISH_BATCH, total - start);
		MemoryContext old = MemoryContextSwitchTo(batch_cxt);
		Datum	   *ids = palloc(sizeof(Datum) * n);
		char	  **labels = palloc(sizeof(char *) * n);
		double	   *best = palloc(sizeof(double) * n);
		double	   *probs = palloc0(sizeof(double) * n * K);
		Datum		values[6];

		for (int32 i = 0; i < n; i++)
		{
			int64		row = start + i;
			int32		arg = 0;

			if (row < corpus->n_labeled)
			{
				arg = corpus->labeled_class[row];
				ids[i] = corpus->labeled_ids[row];
				probs[(int64) i * K + arg] = 1.0;
			}
			else
			{
				int64		j = row - corpus->n_labeled;
				const double *p = result->label_prob + j * K;

				for (int32 k = 1; k < K; k++)
					if (p[k] > p[arg])
						arg = k;
				ids[i] = corpus->ids[j];
				memcpy(probs + (int64) i * K, p, sizeof(double) * K);
			}
			labels[i] = corpus->classes[arg];
			best[i] = probs[(int64) i * K + arg];
		}
		values[0] = PointerGetDatum(construct_array(ids, n, params->source.id_type,
													typlen, typbyval, typalign));
		values[1] = PointerGetDatum(text_array(labels, n));
		values[2] = PointerGetDatum(float8_array(best, n));
		values[3] = PointerGetDatum(float8_array(probs, n * K));
		values[4] = Int32GetDatum(version);
		values[5] = Int64GetDatum(K);
		MemoryContextSwitchTo(old);
		gnb_execute(insert, 6, types, values, NULL, GNB_AS_CALLER, SPI_OK_INSERT, 0);
		MemoryContextReset(batch_cxt);
		CHECK_FOR_INTERRUPTS();
	}
	MemoryContextDelete(batch_cxt);
}

/* theta-hat rows, batched over words, one statement per class and batch. */
static void
write_theta(const GnbJobParams *params, const GnbCorpus *corpus,
			const gnb_result *result, int32 version)
{
	int32		V = corpus->n_words;
	Oid			types[6] = {TEXTOID, INT4OID, TEXTOID, TEXTARRAYOID, FLOAT8ARRAYOID, TEXTOID};
	MemoryContext batch_cxt = AllocSetContextCreate(CurrentMemoryContext,
													"gibbs_nb theta batch",
													ALLOCSET_DEFAULT_SIZES);
	Datum		values[6];

	values[0] = CStringGetTextDatum(params->model_name);
	values[1] = Int32GetDatum(version);
	values[5] = CStringGetTextDatum(params->model_owner);
	for (int32 start = 0; start < V; start += PUBLISH_BATCH)
	{
		int32		n = Min(PUBLISH_BATCH, V - start);
		MemoryContext old = MemoryContextSwitchTo(batch_cxt);

		values[3] = PointerGetDatum(text_array(corpus->tokens + start, n));
		MemoryContextSwitchTo(old);
		for (int32 k = 0; k < corpus->n_classes; k++)
		{
			old = MemoryContextSwitchTo(batch_cxt);
			values[2] = CStringGetTextDatum(corpus->classes[k]);
			values[4] = PointerGetDatum(float8_array(result->theta + (int64) k * V + start, n));
			MemoryContextSwitchTo(old);
			gnb_execute("INSERT INTO gibbs_nb.theta (model_name, version, class, token, probability, owner) "
						"SELECT $1, $2, $3, u.t, u.p, $6 FROM ROWS FROM (pg_catalog.unnest($4), pg_catalog.unnest($5)) AS u(t, p)",
						6, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_INSERT, 0);
		}
		MemoryContextReset(batch_cxt);
		CHECK_FOR_INTERRUPTS();
	}
	MemoryContextDelete(batch_cxt);
}

static void
write_pi_and_trace(const GnbJobParams *params, const GnbCorpus *corpus,
				   const gnb_result *result, int32 version)
{
	int32		rows = result->chains * result->sweeps;
	int32	   *chain = palloc(sizeof(int32) * rows);
	int32	   *sweep = palloc(sizeof(int32) * rows);
	Oid			pi_types[5] = {TEXTOID, INT4OID, TEXTARRAYOID, FLOAT8ARRAYOID, TEXTOID};
	Datum		pi_values[5];
	Oid			trace_types[6] = {INT8OID, INT4ARRAYOID, INT4ARRAYOID, FLOAT8ARRAYOID,
	FLOAT8ARRAYOID, TEXTOID};
	Datum		trace_values[6];

	pi_values[0] = CStringGetTextDatum(params->model_name);
	pi_values[1] = Int32GetDatum(version);
	pi_values[2] = PointerGetDatum(text_array(corpus->classes, corpus->n_classes));
	pi_values[3] = PointerGetDatum(float8_array(result->pi, corpus->n_classes));
	pi_values[4] = CStringGetTextDatum(params->model_owner);
	gnb_execute("INSERT INTO gibbs_nb.pi (model_name, version, class, probability, owner) "
				"SELECT $1, $2, u.c, u.p, $5 FROM ROWS FROM (pg_catalog.unnest($3), pg_catalog.unnest($4)) AS u(c, p)",
				5, pi_types, pi_values, NULL, GNB_AS_INTERNAL, SPI_OK_INSERT, 0);

	for (int32 c = 0; c < result->chains; c++)
		for (int32 t = 0; t < result->sweeps; t++)
		{
			chain[c * result->sweeps + t] = c + 1;
			sweep[c * result->sweeps + t] = t + 1;
		}
	trace_values[0] = Int64GetDatum(params->job_id);
	trace_values[1] = PointerGetDatum(int4_array(chain, rows));
	trace_values[2] = PointerGetDatum(int4_array(sweep, rows));
	trace_values[3] = PointerGetDatum(float8_array(result->log_joint, rows));
	trace_values[4] = PointerGetDatum(float8_array(result->changed, rows));
	trace_values[5] = CStringGetTextDatum(params->model_owner);
	gnb_execute("INSERT INTO gibbs_nb.trace (job_id, chain, sweep, log_likelihood, changed, owner) "
					 "SELECT $1, u.c, u.s, u.l, u.x, $6 "
					 "FROM ROWS FROM (pg_catalog.unnest($2), pg_catalog.unnest($3), pg_catalog.unnest($4), "
					 "pg_catalog.unnest($5)) AS u(c, s, l, x)",
					 6, trace_types, trace_values, NULL, GNB_AS_INTERNAL, SPI_OK_INSERT, 0);
}

/* The packed row prediction loads: vocabulary and log theta-hat as arrays. */
static void
write_packed(const GnbJobParams *params, const GnbCorpus *corpus,
			 const gnb_result *result, int32 version, int64 version_id)
{
	int32		V = corpus->n_words;
	int32		K = corpus->n_classes;
	double	   *log_theta = palloc_extended(sizeof(double) * ((Size) V * K + 1), MCXT_ALLOC_HUGE);
	double	   *log_pi = palloc(sizeof(double) * K);
	Oid			types[8] = {TEXTOID, INT4OID, TEXTOID, TEXTARRAYOID, FLOAT8ARRAYOID,
	TEXTARRAYOID, FLOAT8ARRAYOID, INT8OID};
	Datum		values[8];

	for (int32 w = 0; w < V; w++)
		for (int32 k = 0; k < K; k++)
			log_theta[(int64) w * K + k] = log(result->theta[(int64) k * V + w]);
	for (int32 k = 0; k < K; k++)
		log_pi[k] = log(result->pi[k]);
	values[0] = CStringGetTextDatum(params->model_name);
	values[1] = Int32GetDatum(version);
	values[2] = CStringGetTextDatum(params->model_owner);
	values[3] = PointerGetDatum(text_array(corpus->classes, K));
	values[4] = PointerGetDatum(float8_array(log_pi, K));
	values[5] = PointerGetDatum(text_array(corpus->tokens, V));
	values[6] = PointerGetDatum(float8_array(log_theta, V * K));
	values[7] = Int64GetDatum(version_id);
	gnb_execute("INSERT INTO gibbs_nb.packed (model_name, version, owner, classes, log_pi, "
				"tokens, log_theta, version_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
				8, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_INSERT, 0);
}

static const char *
sampler_name(gnb_sampler_kind kind)
{
	return kind == GNB_SAMPLER_COLLAPSED ? "collapsed" : "paper";
}

#define MODEL_COLUMNS 33

static void
write_model_row(const GnbJobParams *params, const GnbCorpus *corpus,
				const gnb_result *result, int32 version, int64 version_id,
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
		OIDOID, INT8OID, INT4OID
	};
	Datum		v[MODEL_COLUMNS];
	char		nulls[MODEL_COLUMNS];

	memset(nulls, ' ', sizeof(nulls));
	v[0] = CStringGetTextDatum(params->model_name);
	v[1] = Int32GetDatum(version);
	v[2] = CStringGetTextDatum(params->model_owner);
	v[3] = Int64GetDatum(params->job_id);
	v[4] = PointerGetDatum(text_array(corpus->classes, corpus->n_classes));
	v[5] = Int32GetDatum(corpus->n_docs + corpus->n_labeled);
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
	v[19] = CStringGetTextDatum(sampler_name(sp->sampler));
	v[20] = Float8GetDatum(sp->gamma_pi);
	v[21] = Float8GetDatum(sp->gamma_theta);
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
	gnb_execute("INSERT INTO gibbs_nb.models (model_name, version, owner, job_id, classes, "
				"n_documents, n_labeled, n_skipped, n_tokens, vocabulary_size, "
				"source, tokens_column, label_column, id_column, n_classes, "
				"sweeps, burn_in, lag, chains, sampler, "
				"gamma_pi, gamma_theta, unlabeled_weight, seed, labels_table, "
				"labels_relid, log_likelihood, r_hat, seconds, trained_by, "
				"source_relid, version_id, keep_versions) VALUES "
				"($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, "
				"$16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26::pg_catalog.regclass, "
				"$27, $28, $29, $30, $31::pg_catalog.regclass, $32, $33)",
				MODEL_COLUMNS, types, v, nulls, GNB_AS_INTERNAL, SPI_OK_INSERT, 0);
}

/* Are n doubles all finite? */
static bool
all_finite(const double *v, int64 n)
{
	for (int64 i = 0; i < n; i++)
		if (!isfinite(v[i]))
			return false;
	return true;
}

/*
 * Publish a finished job as a new version of its model; returns the version.
 * Must run inside a transaction with a snapshot; the caller commits.
 * seconds_so_far is the job's time up to here; the publish time is added.
 */
int32
gnb_publish(const GnbJobParams *params, const GnbCorpus *corpus,
			const gnb_result *result, double seconds_so_far)
{
	TimestampTz start = GetCurrentTimestamp();
	Oid			types[2] = {TEXTOID, TEXTOID};
	Datum		values[2] = {CStringGetTextDatum(params->model_owner),
	CStringGetTextDatum(params->model_name)};
	Oid			owner_role = get_role_oid(params->model_owner, true);
	char	   *labels_sql;
	Oid			labels_relid;
	int32		version;
	int64		version_id;
	int32		keep_versions;
	bool		isnull;
	long		secs;
	int			usecs;

	/* a version whose estimates are not numbers would label with garbage */
	if (!all_finite(result->theta, (int64) corpus->n_words * corpus->n_classes) ||
		!all_finite(result->pi, corpus->n_classes) ||
		!all_finite(result->label_prob, (int64) corpus->n_docs * corpus->n_classes))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("gibbs_nb job " INT64_FORMAT " produced estimates that are not finite; nothing was published",
						params->job_id)));

	/*
	 * The job may write this owner's model only if the role it runs as has
	 * the owner's privileges now (membership may have been revoked while it
	 * sampled).
	 */
	if (!OidIsValid(owner_role) || !has_privs_of_role(GetUserId(), owner_role))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("role \"%s\" no longer has the privileges of role \"%s\", the owner of model \"%s\"",
						gnb_current_role_name(), params->model_owner, params->model_name)));

	SPI_connect();

	/* one publisher per model at a time; versions are numbered in order */
	gnb_execute("SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext($1), "
				"pg_catalog.hashtext($2))",
				2, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_SELECT, 0);
	gnb_execute("SELECT COALESCE(pg_catalog.max(version), 0) OPERATOR(pg_catalog.+) 1, "
				"pg_catalog.nextval('gibbs_nb.version_id_seq'::pg_catalog.regclass), "
				"COALESCE((pg_catalog.array_agg(keep_versions ORDER BY version DESC))[1], 5) "
				"FROM gibbs_nb.models WHERE owner OPERATOR(pg_catalog.=) $1 "
				"AND model_name OPERATOR(pg_catalog.=) $2",
				2, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_SELECT, 0);
	version = DatumGetInt32(gnb_result_value(1, &isnull));
	version_id = DatumGetInt64(gnb_result_value(2, &isnull));
	keep_versions = DatumGetInt32(gnb_result_value(3, &isnull));

	/* the labels table is the caller's: create and fill it as the caller */
	labels_relid = prepare_labels_table(params, &labels_sql);
	write_labels(params, corpus, result, labels_sql, version);

	write_theta(params, corpus, result, version);
	write_pi_and_trace(params, corpus, result, version);
	write_packed(params, corpus, result, version, version_id);
	TimestampDifference(start, GetCurrentTimestamp(), &secs, &usecs);
	write_model_row(params, corpus, result, version, version_id, labels_relid, keep_versions,
					seconds_so_far + secs + usecs / 1e6);
	/* the model keeps its newest keep_versions versions, this one included */
	(void) gnb_apply_retention(params->model_owner, params->model_name, version, keep_versions);

	SPI_finish();
	return version;
}
