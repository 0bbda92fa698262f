/*
 * predict.c
 *	  Label new documents with a trained model: gibbs_nb_predict,
 *	  gibbs_nb_predict_proba, gibbs_nb_classes, gibbs_nb_label_trigger, and
 *	  the per-backend model cache behind them.
 *
 * P(L = k | W) is proportional to pi-hat_k * prod_w theta-hat_kw ^ W_w over the
 * words of the model's vocabulary (docs/model.md, "Labelling a new document"),
 * computed in logs; unknown words are ignored, so a document with no known
 * word gets the class prior.
 *
 * The cache.  Loaded versions are kept by their version_id, an identity no
 * other version ever has (not after a drop, not under another owner), each
 * as a vocabulary index (vocab_index.c) in a memory context of its own,
 * loaded from one gibbs_nb.packed row.  Which version a name means is asked
 * as the calling role, under the active snapshot, with row security: once
 * per call site for as long as the statement, the snapshot and the role stay
 * the same (see CheckStamp), and again whenever one of them changes.  So a
 * role never gets a model it may not see from what another role loaded, a
 * new version is used from the next statement (snapshot) on, and a dropped
 * model is "does not exist" from then on.  Models are evicted least recently
 * used first when the cache grows past gibbs_nb.model_cache_size.
 */
#include "gibbs_nb.h"

#include "predict/predict.h"
#include "store/store.h"
#include "security/security.h"
#include "predict/vocab_index.h"
#include "compat.h"

#include <math.h>

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "lib/ilist.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

/* gibbs_nb.model_cache_size, in kB */
int			gnb_model_cache_kb = 256 * 1024;

struct GnbModel
{
	int64		version_id;		/* hash key: a version's identity, never reused */
	TransactionId row_xmin;		/* the packed row's, when read (see get_model) */
	char		owner[NAMEDATALEN];
	char		name[NAMEDATALEN];
	int32		version;
	int32		n_classes;
	Datum	   *class_texts;	/* K text Datums, for gibbs_nb_predict */
	ArrayType  *classes;		/* for gibbs_nb_classes */
	double	   *log_pi;			/* K */
	GnbVocabIndex *index;		/* token -> log theta-hat */
	MemoryContext cxt;
	Size		bytes;
	dlist_node	lru;			/* most recently used at the head */
};

static HTAB *model_cache = NULL;
static dlist_head model_lru = DLIST_STATIC_INIT(model_lru);
static Size cache_bytes = 0;
/* bumped whenever an entry is evicted: invalidates fn_extra pointers */
static uint64 cache_generation = 0;

/*
 * The gibbs_nb.packed the cached versions were read from.  A version_id is
 * unique for as long as the extension exists; dropping and creating it
 * again starts version_id anew, and a new packed table then empties the
 * cache, so that the cache is keyed by (packed table, version_id).
 */
static Oid	cache_packed_relid = InvalidOid;

/*
 * When a name was last resolved to a version: the statement, the snapshot
 * (as much of it as decides what is visible) and the role.  The answer holds
 * for as long as all of these are the same; a role switched within a
 * statement (a SECURITY DEFINER function, SET ROLE between statements of one
 * message) or a new snapshot asks again.
 */
typedef struct CheckStamp
{
	bool		valid;
	LocalTransactionId lxid;
	TimestampTz statement;
	Oid			userid;
	TransactionId xmin;
	TransactionId xmax;
	uint32		xcnt;
	int32		subxcnt;
	CommandId	curcid;
} CheckStamp;

/* What a call site remembers between rows (flinfo->fn_extra). */
typedef struct CallCache
{
	char		name[NAMEDATALEN];
	CheckStamp	stamp;
	GnbModel   *model;
	uint64		generation;
} CallCache;

static void
take_stamp(CheckStamp *st)
{
	memset(st, 0, sizeof(*st));
	if (!ActiveSnapshotSet())
		return;					/* never equal to anything: always check */
	{
		Snapshot	snap = GetActiveSnapshot();

		st->valid = true;
		st->lxid = GNB_MY_LXID();
		st->statement = GetCurrentStatementStartTimestamp();
		st->userid = GetUserId();
		st->xmin = snap->xmin;
		st->xmax = snap->xmax;
		st->xcnt = snap->xcnt;
		st->subxcnt = snap->subxcnt;
		st->curcid = snap->curcid;
	}
}

static bool
same_stamp(const CheckStamp *a, const CheckStamp *b)
{
	return a->valid && b->valid && a->lxid == b->lxid && a->statement == b->statement &&
		a->userid == b->userid && a->xmin == b->xmin && a->xmax == b->xmax &&
		a->xcnt == b->xcnt && a->subxcnt == b->subxcnt && a->curcid == b->curcid;
}

static void
evict(GnbModel *m)
{
	bool		found;

	cache_bytes -= m->bytes;
	dlist_delete(&m->lru);
	MemoryContextDelete(m->cxt);
	(void) hash_search(model_cache, &m->version_id, HASH_REMOVE, &found);
	cache_generation++;
}

/* Keep the cache under its bound, never evicting `keep`. */
static void
enforce_cache_bound(GnbModel *keep)
{
	while ((double) cache_bytes > (double) gnb_model_cache_kb * 1024.0)
	{
		GnbModel   *victim = dlist_container(GnbModel, lru, dlist_tail_node(&model_lru));

		if (victim == keep)
			break;
		evict(victim);
	}
}

/* Older versions of the same model are of no more use: free them. */
static void
evict_other_versions(const GnbModel *current)
{
	dlist_mutable_iter iter;

	dlist_foreach_modify(iter, &model_lru)
	{
		GnbModel   *m = dlist_container(GnbModel, lru, iter.cur);

		if (m != current && strcmp(m->name, current->name) == 0 &&
			strcmp(m->owner, current->owner) == 0)
			evict(m);
	}
}

static Datum
column_value(HeapTuple tuple, TupleDesc desc, int col)
{
	bool		isnull;
	Datum		d = SPI_getbinval(tuple, desc, col, &isnull);

	if (isnull)
		elog(ERROR, "gibbs_nb.packed has a NULL in column %d", col);
	return d;
}

static Datum
column_copy(HeapTuple tuple, TupleDesc desc, int col)
{
	return PointerGetDatum(PG_DETOAST_DATUM_COPY(column_value(tuple, desc, col)));
}

/*
 * Fill a model from its arrays (classes, log pi-hat, the vocabulary and log
 * theta-hat word-major), allocating in the current memory context.  The one
 * way a model is made: from a gibbs_nb.packed row for the cache, or from a
 * job's estimates for its held-out documents (gnb_model_from_arrays).
 */
static void
fill_model(GnbModel *m, ArrayType *classes, ArrayType *log_pi, ArrayType *tokens,
		   ArrayType *log_theta)
{
	int			nclasses;
	Datum	   *class_datums;

	m->index = NULL;
	m->classes = classes;
	deconstruct_array(m->classes, TEXTOID, -1, false, TYPALIGN_INT,
					  &class_datums, NULL, &nclasses);
	m->n_classes = nclasses;
	m->class_texts = class_datums;
	m->log_pi = (double *) ARR_DATA_PTR(log_pi);
	if (ArrayGetNItems(ARR_NDIM(log_pi), ARR_DIMS(log_pi)) != nclasses ||
		ArrayGetNItems(ARR_NDIM(log_theta), ARR_DIMS(log_theta)) !=
		(int64) ArrayGetNItems(ARR_NDIM(tokens), ARR_DIMS(tokens)) * nclasses ||
		ARR_HASNULL(log_pi) || ARR_HASNULL(log_theta) || ARR_HASNULL(tokens))
		elog(ERROR, "gibbs_nb.packed row of model \"%s\" version %d is malformed",
			 m->name, m->version);
	m->index = gnb_vocab_index_build(tokens, (double *) ARR_DATA_PTR(log_theta), nclasses);
}

/*
 * Load a version into a new cache entry (gnb_store_packed_row reads it as
 * the caller: row security applies here too).  SPI connected.
 */
static GnbModel *
load_model(int64 version_id)
{
	MemoryContext cxt;
	MemoryContext old;
	GnbModel   *m;
	bool		found;
	ArrayType  *log_theta;
	ArrayType  *tokens;
	Datum		large[2];
	struct varlena *values[2];
	void	   *chunk;
	HeapTuple	tuple;
	TupleDesc	desc;
	char	   *name;
	bool		isnull;

	tuple = gnb_store_packed_row(version_id, &desc);
	name = SPI_getvalue(tuple, desc, 6);

	cxt = AllocSetContextCreate(CacheMemoryContext, "gibbs_nb model", ALLOCSET_DEFAULT_SIZES);
	MemoryContextCopyAndSetIdentifier(cxt, name);
	old = MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		m = hash_search(model_cache, &version_id, HASH_ENTER, &found);
		Assert(!found);
		m->cxt = cxt;
		m->index = NULL;
		strlcpy(m->owner, SPI_getvalue(tuple, desc, 5), NAMEDATALEN);
		strlcpy(m->name, name, NAMEDATALEN);
		m->version = DatumGetInt32(SPI_getbinval(tuple, desc, 7, &isnull));
		m->row_xmin = DatumGetTransactionId(SPI_getbinval(tuple, desc, 8, &isnull));
		/* the large arrays read once, into memory freed once the index has them */
		large[0] = column_value(tuple, desc, 3);
		large[1] = column_value(tuple, desc, 4);
		chunk = gnb_detoast_together(2, large, values);
		tokens = (ArrayType *) values[0];
		log_theta = (ArrayType *) values[1];
		fill_model(m, DatumGetArrayTypeP(column_copy(tuple, desc, 1)),
				   DatumGetArrayTypeP(column_copy(tuple, desc, 2)), tokens, log_theta);
		/* the index holds copies: the arrays themselves are not needed */
		pfree(chunk);
	}
	PG_CATCH();
	{
		(void) hash_search(model_cache, &version_id, HASH_REMOVE, NULL);
		MemoryContextSwitchTo(old);
		MemoryContextDelete(cxt);
		PG_RE_THROW();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(old);

	m->bytes = MemoryContextMemAllocated(cxt, true);
	cache_bytes += m->bytes;
	dlist_push_head(&model_lru, &m->lru);
	return m;
}

/*
 * A model that is in no cache, made in the current memory context from a
 * version's arrays as gibbs_nb.packed holds them (classes text[], log_pi
 * float8[K], tokens text[V], log_theta float8[V x K] word-major): a job
 * scores its held-out documents with the version it is about to publish,
 * exactly as gibbs_nb_predict_proba will.  The arrays must outlive it.
 */
GnbModel *
gnb_model_from_arrays(ArrayType *classes, ArrayType *log_pi, ArrayType *tokens,
					  ArrayType *log_theta)
{
	GnbModel   *m = palloc0(sizeof(GnbModel));

	fill_model(m, classes, log_pi, tokens, log_theta);
	return m;
}

/*
 * The model to use: the version the name means for the calling role, under
 * the current snapshot, loading it as needed.  A model that does not exist,
 * or that the calling role may not see, is an error.
 */
static GnbModel *
get_model(FunctionCallInfo fcinfo, text *name_text)
{
	CallCache  *cc = fcinfo->flinfo->fn_extra;
	char		name[NAMEDATALEN];
	int			len = VARSIZE_ANY_EXHDR(name_text);
	CheckStamp	now;
	GnbModel   *m;
	int64		version_id;
	TransactionId row_xmin;
	const char *owner;
	Oid			packed_relid;
	GnbLockWait wait;

	if (len >= NAMEDATALEN)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("model \"%s\" does not exist", text_to_cstring(name_text))));
	memcpy(name, VARDATA_ANY(name_text), len);
	name[len] = '\0';

	/* the common case: same call site, model, statement, snapshot and role */
	take_stamp(&now);
	if (cc && cc->generation == cache_generation && strcmp(cc->name, name) == 0 &&
		same_stamp(&cc->stamp, &now))
	{
		dlist_move_head(&model_lru, &cc->model->lru);
		return cc->model;
	}

	if (model_cache == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(int64);
		ctl.entrysize = sizeof(GnbModel);
		ctl.hcxt = CacheMemoryContext;
		model_cache = hash_create("gibbs_nb model cache", 16, &ctl,
								  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	packed_relid = get_relname_relid("packed", get_namespace_oid(GNB_SCHEMA, false));
	if (packed_relid != cache_packed_relid)
	{
		while (!dlist_is_empty(&model_lru))
			evict(dlist_container(GnbModel, lru, dlist_head_node(&model_lru)));
		cache_packed_relid = packed_relid;
	}
	/* a role's queued lock on gibbs_nb.packed or owners stalls no one's predictions for long */
	gnb_lock_wait_begin(&wait);
	SPI_connect();
	version_id = gnb_store_current_version_id(name, &row_xmin, &owner);
	m = hash_search(model_cache, &version_id, HASH_FIND, NULL);
	/*
	 * The cached entry must be of this very row: a version_id is unique
	 * while its sequence only goes forward, but a superuser's data-only
	 * restore of an older backup sets it back, and the next version of any
	 * role's model takes an id a cached, since dropped, version had.  Any
	 * change of the row (a deploy's pin, a restore) gives it another xmin:
	 * read again, once.  (Frozen rows all show one xmin: the owner and name
	 * are compared too.)
	 */
	if (m != NULL && (m->row_xmin != row_xmin || strcmp(m->owner, owner) != 0 ||
					  strcmp(m->name, name) != 0))
	{
		evict(m);
		m = NULL;
	}
	if (m == NULL)
	{
		m = load_model(version_id);
		evict_other_versions(m);
	}
	SPI_finish();
	gnb_lock_wait_end(&wait);
	dlist_move_head(&model_lru, &m->lru);
	enforce_cache_bound(m);

	if (cc == NULL)
		cc = fcinfo->flinfo->fn_extra =
			MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(CallCache));
	cc->model = m;
	cc->generation = cache_generation;
	cc->stamp = now;
	strlcpy(cc->name, name, NAMEDATALEN);
	return m;
}

/*
 * The version a name means for the calling role, as prediction uses it (for
 * gibbs_nb_explain and gibbs_nb_top_words, which must see exactly what
 * gibbs_nb_predict sees).  fcinfo's fn_extra is this file's.
 */
void
gnb_serving_model_view(FunctionCallInfo fcinfo, text *name, GnbServingModel *out)
{
	GnbModel   *m = get_model(fcinfo, name);

	out->owner = m->owner;
	out->name = m->name;
	out->version = m->version;
	out->version_id = m->version_id;
	out->n_classes = m->n_classes;
	out->class_texts = m->class_texts;
	out->log_pi = m->log_pi;
	out->index = m->index;
}

/* log pi-hat_k + sum_w W_w log theta-hat_kw, for every class. */
static void
score_document(const GnbModel *m, Datum tokens, bool is_tsvector, double *scores)
{
	for (int32 k = 0; k < m->n_classes; k++)
		scores[k] = m->log_pi[k];
	gnb_vocab_index_score(m->index, tokens, is_tsvector, scores);
}

static Datum
predict(FunctionCallInfo fcinfo, bool is_tsvector)
{
	GnbModel   *m = get_model(fcinfo, PG_GETARG_TEXT_PP(0));
	double		stack_scores[16];
	double	   *scores = m->n_classes <= 16 ? stack_scores : palloc(sizeof(double) * m->n_classes);

	score_document(m, PG_GETARG_DATUM(1), is_tsvector, scores);
	/* a copy: the cache entry may be evicted before the row is used */
	return PointerGetDatum(DatumGetTextPCopy(m->class_texts[gnb_argmax(scores, m->n_classes)]));
}

/*
 * The probability of each class of a document, in class order, and its most
 * probable class (ties to the earlier class), as gibbs_nb_predict_proba and
 * gibbs_nb_predict give them: the one place this arithmetic is written.
 */
int32
gnb_model_proba(const GnbModel *m, Datum tokens, bool is_tsvector, double *probs)
{
	int32		best;
	double		max,
				total = 0.0;

	score_document(m, tokens, is_tsvector, probs);
	best = gnb_argmax(probs, m->n_classes);
	max = probs[best];
	/* imports are bounded below (model_format.c): a safeguard, not a path */
	if (!isfinite(max))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("gibbs_nb: the document's class scores are not finite")));
	for (int32 k = 0; k < m->n_classes; k++)
		total += (probs[k] = exp(probs[k] - max));
	for (int32 k = 0; k < m->n_classes; k++)
		probs[k] = probs[k] / total;
	return best;
}

/* A model's version, its number of classes and a class's name. */
int32
gnb_model_version(const GnbModel *m)
{
	return m->version;
}

int64
gnb_model_version_id(const GnbModel *m)
{
	return m->version_id;
}

int32
gnb_model_n_classes(const GnbModel *m)
{
	return m->n_classes;
}

char	   *
gnb_model_class(const GnbModel *m, int32 k)
{
	return TextDatumGetCString(m->class_texts[k]);
}

/*
 * The serving version of a model for the calling role (gibbs_nb_predict's):
 * through the cache and the call site's fn_extra, which must be free for
 * it.  Valid until the next call that may load or evict a model (any
 * gibbs_nb_predict* call, in any query): ask again after running SQL.
 */
GnbModel *
gnb_serving_model(FunctionCallInfo fcinfo, text *name)
{
	return get_model(fcinfo, name);
}

static Datum
predict_proba(FunctionCallInfo fcinfo, bool is_tsvector)
{
	GnbModel   *m = get_model(fcinfo, PG_GETARG_TEXT_PP(0));
	double	   *probs = palloc(sizeof(double) * m->n_classes);
	Datum	   *values = palloc(sizeof(Datum) * m->n_classes);

	(void) gnb_model_proba(m, PG_GETARG_DATUM(1), is_tsvector, probs);
	for (int32 k = 0; k < m->n_classes; k++)
		values[k] = Float8GetDatum(probs[k]);
	PG_RETURN_ARRAYTYPE_P(construct_array(values, m->n_classes, FLOAT8OID, sizeof(float8),
										  FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

PG_FUNCTION_INFO_V1(gibbs_nb_predict_text_array);
PG_FUNCTION_INFO_V1(gibbs_nb_predict_tsvector);
PG_FUNCTION_INFO_V1(gibbs_nb_predict_proba_text_array);
PG_FUNCTION_INFO_V1(gibbs_nb_predict_proba_tsvector);
PG_FUNCTION_INFO_V1(gibbs_nb_classes);
PG_FUNCTION_INFO_V1(gibbs_nb_label_trigger);

/*
 * gibbs_nb_predict(model_name text, tokens text[]) returns text
 *
 * The most probable class of a document under the model's latest version.
 */
Datum
gibbs_nb_predict_text_array(PG_FUNCTION_ARGS)
{
	return predict(fcinfo, false);
}

/* gibbs_nb_predict(model_name text, tokens tsvector) returns text */
Datum
gibbs_nb_predict_tsvector(PG_FUNCTION_ARGS)
{
	return predict(fcinfo, true);
}

/*
 * gibbs_nb_predict_proba(model_name text, tokens text[]) returns float8[]
 *
 * The probability of each class, in the order of gibbs_nb_classes.
 */
Datum
gibbs_nb_predict_proba_text_array(PG_FUNCTION_ARGS)
{
	return predict_proba(fcinfo, false);
}

/* gibbs_nb_predict_proba(model_name text, tokens tsvector) returns float8[] */
Datum
gibbs_nb_predict_proba_tsvector(PG_FUNCTION_ARGS)
{
	return predict_proba(fcinfo, true);
}

/*
 * gibbs_nb_classes(model_name text) returns text[]
 *
 * The classes of the model's latest version, in the order every per-class
 * array uses.
 */
Datum
gibbs_nb_classes(PG_FUNCTION_ARGS)
{
	GnbModel   *m = get_model(fcinfo, PG_GETARG_TEXT_PP(0));

	PG_RETURN_ARRAYTYPE_P(DatumGetArrayTypePCopy(PointerGetDatum(m->classes)));
}

/*
 * gibbs_nb_label_trigger(): a BEFORE INSERT OR UPDATE ... FOR EACH ROW
 * trigger with arguments (model_name, tokens_column, label_column) that sets
 * the label column to the predicted class (NULL when the tokens are NULL),
 * with the model the name means for the table's owner.
 */
Datum
gibbs_nb_label_trigger(PG_FUNCTION_ARGS)
{
	TriggerData *td = (TriggerData *) fcinfo->context;
	Trigger    *trigger;
	TupleDesc	desc;
	HeapTuple	tuple;
	int			tokens_att;
	int			label_att;
	Oid			tokens_type;
	Oid			label_type;
	Datum		tokens;
	Datum		label = (Datum) 0;
	bool		tokens_null;
	bool		label_null = true;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("gibbs_nb_label_trigger must be called as a trigger")));
	if (!TRIGGER_FIRED_BEFORE(td->tg_event) || !TRIGGER_FIRED_FOR_ROW(td->tg_event) ||
		!(TRIGGER_FIRED_BY_INSERT(td->tg_event) || TRIGGER_FIRED_BY_UPDATE(td->tg_event)))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("gibbs_nb_label_trigger must be fired BEFORE INSERT OR UPDATE ... FOR EACH ROW")));
	trigger = td->tg_trigger;
	if (trigger->tgnargs != 3)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("gibbs_nb_label_trigger takes 3 arguments: model_name, tokens_column, label_column")));

	desc = RelationGetDescr(td->tg_relation);
	tuple = TRIGGER_FIRED_BY_UPDATE(td->tg_event) ? td->tg_newtuple : td->tg_trigtuple;
	tokens_att = SPI_fnumber(desc, trigger->tgargs[1]);
	label_att = SPI_fnumber(desc, trigger->tgargs[2]);
	if (tokens_att <= 0 || label_att <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of relation \"%s\" does not exist",
						tokens_att <= 0 ? trigger->tgargs[1] : trigger->tgargs[2],
						RelationGetRelationName(td->tg_relation))));
	tokens_type = getBaseType(SPI_gettypeid(desc, tokens_att));
	if (tokens_type != TEXTARRAYOID && tokens_type != TSVECTOROID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("tokens column \"%s\" is not of type text[] or tsvector",
						trigger->tgargs[1])));
	/*
	 * Computed after BEFORE triggers: generated tokens would be NULL or the
	 * old row's, and a generated label would overwrite the trigger's.
	 */
	if (TupleDescAttr(desc, tokens_att - 1)->attgenerated ||
		TupleDescAttr(desc, label_att - 1)->attgenerated)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s column \"%s\" is a generated column, which gibbs_nb_label_trigger cannot use",
						TupleDescAttr(desc, tokens_att - 1)->attgenerated ? "tokens" : "label",
						TupleDescAttr(desc, tokens_att - 1)->attgenerated ? trigger->tgargs[1] : trigger->tgargs[2]),
				 errdetail("A generated column is computed after BEFORE triggers run."),
				 errhint("Compute the tokens in the trigger's own BEFORE trigger, or label with gibbs_nb_predict in the query.")));
	label_type = SPI_gettypeid(desc, label_att);

	tokens = SPI_getbinval(tuple, desc, tokens_att, &tokens_null);
	if (!tokens_null)
	{
		LOCAL_FCINFO(call, 2);
		Oid			typinput;
		Oid			typioparam;
		Oid			save_user;
		int			save_sec_context;

		InitFunctionCallInfoData(*call, fcinfo->flinfo, 2, InvalidOid, NULL, NULL);
		call->args[0].value = CStringGetTextDatum(trigger->tgargs[0]);
		call->args[0].isnull = false;
		call->args[1].value = tokens;
		call->args[1].isnull = false;

		/*
		 * The trigger is the table's: the model is the one its name means
		 * for the table's owner, whoever fires the trigger.  As the
		 * inserting role, a role allowed to insert only some columns would
		 * choose the label with a model of its own of that name.  Only the
		 * extension's own statements run meanwhile; an error restores the
		 * user with the (sub)transaction.
		 */
		GetUserIdAndSecContext(&save_user, &save_sec_context);
		SetUserIdAndSecContext(td->tg_relation->rd_rel->relowner,
							   save_sec_context | SECURITY_LOCAL_USERID_CHANGE |
							   SECURITY_RESTRICTED_OPERATION);
		label = predict(call, tokens_type == TSVECTOROID);
		SetUserIdAndSecContext(save_user, save_sec_context);
		/* the label column may be of any type with a text input */
		getTypeInputInfo(label_type, &typinput, &typioparam);
		label = OidInputFunctionCall(typinput, TextDatumGetCString(label), typioparam,
									 TupleDescAttr(desc, label_att - 1)->atttypmod);
		label_null = false;
	}
	tuple = heap_modify_tuple_by_cols(tuple, desc, 1, &label_att, &label, &label_null);
	return PointerGetDatum(tuple);
}
