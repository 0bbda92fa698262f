/*
 * transfer.c
 *	  What export reads and import writes, and the labels a warm start
 *	  (retrain) begins from.
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

/* ---------- export and import ---------- */

/* A text column of the last result's first row as a C string ("" if NULL). */
static char *
result_cstring(int col)
{
	bool		isnull;
	Datum		d = gnb_result_value(col, &isnull);

	return isnull ? pstrdup("") : TextDatumGetCString(d);
}

/*
 * The parameters and figures of a version (its gibbs_nb.models row, read as
 * the caller) into img, in the current memory context.  SPI connected.
 */
void
gnb_store_export_params(int64 version_id, GnbModelImage *img)
{
	Oid			types[1] = {INT8OID};
	Datum		args[1] = {Int64GetDatum(version_id)};
	MemoryContext cxt = CurrentMemoryContext;
	MemoryContext old;
	bool		isnull;

	gnb_execute("SELECT sampler, sweeps, burn_in, lag, chains, gamma_pi, gamma_theta, "
				"unlabeled_weight, seed, n_documents, n_labeled, n_skipped, n_tokens, "
				"log_likelihood, r_hat, n_classes, model_name, version, source, tokens_column, "
				"label_column, id_column, tokenizer, init, unlabeled_weight_chosen "
				"FROM gibbs_nb.models "
				"WHERE version_id OPERATOR(pg_catalog.=) $1",
				1, types, args, NULL, GNB_AS_CALLER, SPI_OK_SELECT, 1);
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("model version " INT64_FORMAT " does not exist", version_id)));
	old = MemoryContextSwitchTo(cxt);
	img->sampler = result_cstring(1);
	img->sweeps = DatumGetInt32(gnb_result_value(2, &isnull));
	img->burn_in = DatumGetInt32(gnb_result_value(3, &isnull));
	img->lag = DatumGetInt32(gnb_result_value(4, &isnull));
	img->chains = DatumGetInt32(gnb_result_value(5, &isnull));
	img->gamma_pi = DatumGetFloat8(gnb_result_value(6, &isnull));
	img->gamma_theta = DatumGetFloat8(gnb_result_value(7, &isnull));
	img->unlabeled_weight = DatumGetFloat8(gnb_result_value(8, &isnull));
	img->seed = DatumGetInt64(gnb_result_value(9, &isnull));
	img->n_documents = DatumGetInt32(gnb_result_value(10, &isnull));
	img->n_labeled = DatumGetInt32(gnb_result_value(11, &isnull));
	img->n_skipped = DatumGetInt32(gnb_result_value(12, &isnull));
	img->n_tokens = DatumGetInt64(gnb_result_value(13, &isnull));
	img->log_likelihood = DatumGetFloat8(gnb_result_value(14, &isnull));
	if (isnull)
		img->log_likelihood = get_float8_nan();
	img->r_hat = DatumGetFloat8(gnb_result_value(15, &isnull));
	if (isnull)
		img->r_hat = get_float8_nan();
	img->n_classes_arg = DatumGetInt32(gnb_result_value(16, &isnull));
	if (isnull)
		img->n_classes_arg = 0;
	img->model_name = result_cstring(17);
	img->version = DatumGetInt32(gnb_result_value(18, &isnull));
	img->source = result_cstring(19);
	img->tokens_column = result_cstring(20);
	img->label_column = result_cstring(21);
	img->id_column = result_cstring(22);
	img->tokenizer = result_cstring(23);
	img->init = result_cstring(24);
	img->unlabeled_weight_chosen = DatumGetBool(gnb_result_value(25, &isnull));
	MemoryContextSwitchTo(old);
}

/*
 * A new version of the current role's model `model_name`, made of an
 * exported model: its models, pi and packed rows, written as the
 * extension's owner in the caller's transaction, then retention applied.  It
 * has no source (it cannot be retrained) and no labels (nor labels table).
 * The image's words and log thetas are freed as soon as their arrays are
 * made (NULL then): the rows are written with them held once, not twice.
 * Returns the version.  SPI connected.
 */
int32
gnb_store_import(const char *model_name, GnbModelImage *img)
{
	char	   *owner = gnb_current_role_name();
	int32		K = img->n_classes;
	int32		V = img->n_words;
	int32		version;
	int64		version_id;
	int32		keep;
	ArrayType  *classes = gnb_text_array_strided(img->class_str, sizeof(char *), img->class_len, K);
	ArrayType  *tokens = gnb_text_array_strided(img->word_str, sizeof(char *), img->word_len, V);
	ArrayType  *log_theta = gnb_float8_array(img->log_theta, (int) ((int64) V * K));
	double	   *pi = palloc(sizeof(double) * K);

	pfree(img->word_str);
	pfree(img->word_len);
	pfree(img->log_theta);
	img->word_str = NULL;
	img->word_len = NULL;
	img->log_theta = NULL;

	gnb_register_owner(owner, gnb_check_owner(owner));
	gnb_store_number_version(owner, model_name, &version, &version_id, &keep);

	/* the model row: what the export carried; no job, source or labels table */
	{
		Oid			types[31] = {
			TEXTOID, INT4OID, TEXTOID, TEXTARRAYOID, INT4OID, INT4OID, INT4OID, INT8OID,
			INT4OID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, INT4OID, INT4OID, INT4OID,
			INT4OID, INT4OID, TEXTOID, FLOAT8OID, FLOAT8OID, FLOAT8OID, INT8OID, FLOAT8OID,
			FLOAT8OID, INT8OID, INT4OID, TEXTOID, TEXTOID, TEXTOID, BOOLOID
		};
		Datum		v[31];
		char		nulls[31];

		memset(nulls, ' ', sizeof(nulls));
		v[0] = CStringGetTextDatum(model_name);
		v[1] = Int32GetDatum(version);
		v[2] = CStringGetTextDatum(owner);
		v[3] = PointerGetDatum(classes);
		v[4] = Int32GetDatum(img->n_documents);
		v[5] = Int32GetDatum(img->n_labeled);
		v[6] = Int32GetDatum(img->n_skipped);
		v[7] = Int64GetDatum(img->n_tokens);
		v[8] = Int32GetDatum(V);
		v[9] = CStringGetTextDatum(img->source);
		v[10] = CStringGetTextDatum(img->tokens_column);
		v[11] = CStringGetTextDatum(img->label_column);
		if (img->label_column[0] == '\0')
			nulls[11] = 'n';
		v[12] = CStringGetTextDatum(img->id_column);
		v[13] = Int32GetDatum(img->n_classes_arg);
		if (img->n_classes_arg == 0)
			nulls[13] = 'n';
		v[14] = Int32GetDatum(img->sweeps);
		v[15] = Int32GetDatum(img->burn_in);
		v[16] = Int32GetDatum(img->lag);
		v[17] = Int32GetDatum(img->chains);
		v[18] = CStringGetTextDatum(img->sampler);
		v[19] = Float8GetDatum(img->gamma_pi);
		v[20] = Float8GetDatum(img->gamma_theta);
		v[21] = Float8GetDatum(img->unlabeled_weight);
		v[22] = Int64GetDatum(img->seed);
		v[23] = Float8GetDatum(img->r_hat);
		if (isnan(img->r_hat))
			nulls[23] = 'n';
		v[24] = Float8GetDatum(img->log_likelihood);
		if (isnan(img->log_likelihood))
			nulls[24] = 'n';
		v[25] = Int64GetDatum(version_id);
		v[26] = Int32GetDatum(keep);
		v[27] = CStringGetTextDatum(img->tokenizer);
		if (img->tokenizer[0] == '\0')
			nulls[27] = 'n';
		/* linked to no relation here: the source named is the exporter's */
		v[28] = CStringGetTextDatum(gnb_catalog_identity());
		v[29] = CStringGetTextDatum(img->init);
		v[30] = BoolGetDatum(img->unlabeled_weight_chosen);
		gnb_execute("INSERT INTO gibbs_nb.models (model_name, version, owner, classes, "
					"n_documents, n_labeled, n_skipped, n_tokens, vocabulary_size, "
					"source, tokens_column, label_column, id_column, n_classes, "
					"sweeps, burn_in, lag, chains, sampler, gamma_pi, gamma_theta, "
					"unlabeled_weight, seed, r_hat, log_likelihood, labels_table, "
					"labels_relid, trained_by, version_id, keep_versions, tokenizer, "
					"catalog, init, unlabeled_weight_chosen, warnings) VALUES "
					"($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, "
					"$15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, '', "
					"0::pg_catalog.oid, $3, $26, $27, $28, $29, $30, $31, "
					"'{\"imported: the training diagnostics (warnings, ess, split_r_hat, "
					"whether a gamma was sampled, held-out metrics) stayed where the model "
					"was trained\"}')",
					31, types, v, nulls, GNB_AS_INTERNAL, SPI_OK_INSERT, 0);
	}

	/* pi-hat rows, as training writes them (theta-hat is in the packed row) */
	for (int32 k = 0; k < K; k++)
		pi[k] = exp(img->log_pi[k]);
	{
		Oid			types[5] = {TEXTOID, INT4OID, TEXTARRAYOID, FLOAT8ARRAYOID, TEXTOID};
		Datum		v[5] = {CStringGetTextDatum(model_name), Int32GetDatum(version),
		PointerGetDatum(classes), PointerGetDatum(gnb_float8_array(pi, K)),
		CStringGetTextDatum(owner)};

		gnb_execute("INSERT INTO gibbs_nb.pi (model_name, version, class, probability, owner) "
					"SELECT $1, $2, u.c, u.p, $5 FROM ROWS FROM (pg_catalog.unnest($3), pg_catalog.unnest($4)) AS u(c, p)",
					5, types, v, NULL, GNB_AS_INTERNAL, SPI_OK_INSERT, 0);
	}
	/* the packed row prediction loads: the exported log values, bit for bit */
	{
		Oid			types[9] = {TEXTOID, INT4OID, TEXTOID, TEXTARRAYOID, FLOAT8ARRAYOID,
		TEXTARRAYOID, FLOAT8ARRAYOID, INT8OID, INT8ARRAYOID};
		Datum		v[9];
		char		nulls[9];

		memset(nulls, ' ', sizeof(nulls));
		v[0] = CStringGetTextDatum(model_name);
		v[1] = Int32GetDatum(version);
		v[2] = CStringGetTextDatum(owner);
		v[3] = PointerGetDatum(classes);
		v[4] = PointerGetDatum(gnb_float8_array(img->log_pi, K));
		v[5] = PointerGetDatum(tokens);
		v[6] = PointerGetDatum(log_theta);
		v[7] = Int64GetDatum(version_id);
		v[8] = (Datum) 0;
		nulls[8] = 'n';
		if (img->word_counts)
		{
			Datum	   *d = palloc_extended(sizeof(Datum) * ((Size) V + 1), MCXT_ALLOC_HUGE);

			for (int32 w = 0; w < V; w++)
				d[w] = Int64GetDatum(img->word_counts[w]);
			v[8] = PointerGetDatum(construct_array(d, V, INT8OID, sizeof(int64),
												   FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
			nulls[8] = ' ';
		}
		/*
		 * not folded into the plan: that copied the arrays once more; a
		 * SELECT, for Citus's binary COPY (versions.c's write_packed)
		 */
		gnb_execute_unfolded("INSERT INTO gibbs_nb.packed (model_name, version, owner, classes, log_pi, "
						 "tokens, log_theta, version_id, word_counts) "
						 "SELECT * FROM (VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)) AS v",
						 9, types, v, nulls, GNB_AS_INTERNAL, SPI_OK_INSERT);
	}
	(void) gnb_apply_retention(owner, model_name, version, keep);
	return version;
}

/*
 * An id of the previous version, for the warm start's binary search: its
 * text (at `at` in the ids' buffer, then where that is), in byte order, and
 * the class (of that version's) it was most probably
 */
typedef struct WarmId
{
	union
	{
		int64		at;
		const char *id;
	}			text;
	int32		len;
	int32		label;
} WarmId;

static int
cmp_warm_id(const void *a, const void *b)
{
	const WarmId *x = a;
	const WarmId *y = b;
	int			c = memcmp(x->text.id, y->text.id, Min(x->len, y->len));

	return c != 0 ? c : (x->len > y->len) - (x->len < y->len);
}

/*
 * What gnb_store_warm_start(version_id, ...) holds at most, in bytes: the
 * previous version's ids and a search entry an id (their probabilities are
 * not kept), in buffers that double as they fill (up to twice what they
 * hold), and a fetch of the rows they are read from
 * (gnb_store_each_document_label: a row's tuple, its other columns and its
 * pointer some 160 bytes besides its id and probabilities); 0 if the
 * version keeps no labels.  Read as the caller.  SPI connected.
 */
double
gnb_store_warm_start_memory(int64 version_id)
{
	Oid			types[1] = {INT8OID};
	Datum		args[1] = {Int64GetDatum(version_id)};
	bool		isnull;
	double		n_ids,
				rows_bytes,
				ids_bytes;

	gnb_execute("SELECT pg_catalog.count(*)::pg_catalog.float8, "
				"pg_catalog.sum(pg_catalog.octet_length(id) OPERATOR(pg_catalog.+) "
				"pg_catalog.pg_column_size(probabilities))::pg_catalog.float8, "
				"pg_catalog.sum(pg_catalog.octet_length(id))::pg_catalog.float8 "
				"FROM gibbs_nb.document_labels WHERE version_id OPERATOR(pg_catalog.=) $1",
				1, types, args, NULL, GNB_AS_CALLER, SPI_OK_SELECT, 1);
	n_ids = DatumGetFloat8(gnb_result_value(1, &isnull));
	rows_bytes = DatumGetFloat8(gnb_result_value(2, &isnull));
	ids_bytes = DatumGetFloat8(gnb_result_value(3, &isnull));
	if (isnull || n_ids == 0.0)
		return 0.0;
	return 2.0 * (ids_bytes + sizeof(WarmId) * n_ids) +
		Min(n_ids, GNB_LABELS_FETCH) * (rows_bytes / n_ids + 160.0) + 1024.0;
}

/* The previous version's ids (GnbWarmList, store.h), sorted by their text. */
struct GnbWarmList
{
	WarmId	   *ids;
	int64		n;
	int64		allocated;
	char	   *text;			/* the ids' bytes, one after another */
	int64		text_used;
	int64		text_allocated;
	char	  **classes;		/* the previous version's, n_classes of them */
	int			n_classes;
	int64		version_id;
};

/* gnb_store_each_document_label's fn: a previous document into the list */
static void
warm_id(void *arg, const struct varlena *id, const double *probs, int n_probs)
{
	GnbWarmList *w = arg;
	int32		len = VARSIZE_ANY_EXHDR(id);

	if (n_probs != w->n_classes)
		elog(ERROR, "gibbs_nb.document_labels row of version " INT64_FORMAT " is malformed",
			 w->version_id);
	if (w->n == w->allocated)
	{
		w->allocated *= 2;
		w->ids = repalloc_huge(w->ids, sizeof(WarmId) * w->allocated);
	}
	while (w->text_used + len > w->text_allocated)
	{
		w->text_allocated *= 2;
		w->text = repalloc_huge(w->text, w->text_allocated);
	}
	memcpy(w->text + w->text_used, VARDATA_ANY(id), len);
	w->ids[w->n].text.at = w->text_used;
	w->ids[w->n].len = len;
	w->ids[w->n].label = gnb_argmax(probs, n_probs);
	w->text_used += len;
	w->n++;
}

/*
 * A warm start's list (gibbs_nb_retrain(..., warm => true)): every
 * document of a version, its id's text (as publishing wrote it, under the
 * pinned formats, gnb_pin_id_text_format) and its most probable class
 * there, for gnb_warm_list_class; NULL if the version keeps no labels.  Its
 * memory is gnb_store_warm_start_memory's, in the current memory context.
 * Read as the caller.  SPI connected.
 */
GnbWarmList *
gnb_store_warm_list(int64 version_id)
{
	Oid			types[1] = {INT8OID};
	Datum		args[1] = {Int64GetDatum(version_id)};
	bool		isnull;
	ArrayType  *classes;
	Datum	   *class_texts;
	GnbWarmList *w;
	MemoryContext cxt = CurrentMemoryContext;

	gnb_execute("SELECT classes FROM gibbs_nb.packed WHERE version_id OPERATOR(pg_catalog.=) $1",
				1, types, args, NULL, GNB_AS_CALLER, SPI_OK_SELECT, 1);
	/* (SPI leaves its own context current, gone at SPI_finish) */
	MemoryContextSwitchTo(cxt);
	if (SPI_processed != 1)
		return NULL;
	w = palloc0(sizeof(GnbWarmList));
	classes = DatumGetArrayTypePCopy(gnb_result_value(1, &isnull));
	deconstruct_array(classes, TEXTOID, -1, false, TYPALIGN_INT, &class_texts, NULL,
					  &w->n_classes);
	w->classes = palloc(sizeof(char *) * w->n_classes);
	for (int k = 0; k < w->n_classes; k++)
		w->classes[k] = TextDatumGetCString(class_texts[k]);
	w->allocated = 1024;
	w->ids = palloc(sizeof(WarmId) * w->allocated);
	w->text_allocated = 16384;
	w->text = palloc(w->text_allocated);
	w->version_id = version_id;
	(void) gnb_store_each_document_label(version_id, false, warm_id, w);
	if (w->n == 0)
		return NULL;			/* a version that keeps no labels: a cold start */
	for (int64 i = 0; i < w->n; i++)
		w->ids[i].text.id = w->text + w->ids[i].text.at;
	qsort(w->ids, w->n, sizeof(WarmId), cmp_warm_id);
	return w;
}

/*
 * The previous version's classes, by name, as this corpus's (classes, K of
 * them): -1 for a class the corpus has not.
 */
int32 *
gnb_warm_class_map(const GnbWarmList *w, char **classes, int32 K)
{
	int32	   *class_map = palloc(sizeof(int32) * w->n_classes);

	for (int k = 0; k < w->n_classes; k++)
	{
		class_map[k] = -1;
		for (int32 c = 0; c < K; c++)
			if (strcmp(classes[c], w->classes[k]) == 0)
				class_map[k] = c;
	}
	return class_map;
}

/*
 * The class (of the previous version's classes) a document whose id's text
 * is `text` (under the pinned formats) most probably was; -1 if the
 * version did not have it.
 */
int32
gnb_warm_list_class(const GnbWarmList *w, const char *text)
{
	WarmId		key;
	WarmId	   *hit;

	key.text.id = text;
	key.len = (int32) strlen(text);
	hit = bsearch(&key, w->ids, w->n, sizeof(WarmId), cmp_warm_id);
	return hit ? hit->label : -1;
}

/*
 * A warm start from a version: for each unlabelled document of the corpus,
 * init_label gets the class its id had in that version (its most probable,
 * by class name), or -1 if the version did not have the document or the
 * class.  Returns how many documents start warm.  Read as the caller.  SPI
 * connected.
 */
int64
gnb_store_warm_start(int64 version_id, const GnbCorpus *corpus, Oid id_type, int32 *init_label)
{
	GnbWarmList *w;
	int32	   *class_map;
	Oid			output;
	bool		varlena;
	int64		matched = 0;
	int			level;

	for (int32 j = 0; j < corpus->n_docs; j++)
		init_label[j] = -1;
	w = gnb_store_warm_list(version_id);
	if (w == NULL)
		return 0;
	class_map = gnb_warm_class_map(w, corpus->classes, corpus->n_classes);
	level = gnb_pin_id_text_format();
	getTypeOutputInfo(id_type, &output, &varlena);
	for (int32 j = 0; j < corpus->n_docs; j++)
	{
		char	   *text;
		int32		was;

		CHECK_FOR_INTERRUPTS();
		text = OidOutputFunctionCall(output, corpus->ids[j]);
		was = gnb_warm_list_class(w, text);
		/* kept, the corpus's ids' text would add up to the version's again */
		pfree(text);
		if (was >= 0 && class_map[was] >= 0)
		{
			init_label[j] = class_map[was];
			matched++;
		}
	}
	AtEOXact_GUC(true, level);
	return matched;
}
