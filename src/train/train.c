/*
 * train.c
 *	  gibbs_nb_train: check everything the caller passed, then run the job.
 *
 * Every check that can fail on the caller's input runs here, in the caller's
 * backend, before a worker starts: a bad call gets a clear error with a
 * SQLSTATE and leaves nothing behind.  The worker re-checks what could have
 * changed in between (the data) and reports through the same error path.
 */
#include "gibbs_nb.h"

#include "train/train.h"
#include "worker/worker.h"
#include "store/store.h"
#include "security/security.h"
#include "compat.h"

#include <math.h>

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/sequence.h"
#include "common/pg_prng.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "utils/regproc.h"
#include "utils/typcache.h"
#include "storage/lmgr.h"

/* Upper bounds that keep memory and the trace table sane. */
#define GNB_MAX_SWEEPS 10000000
#define GNB_MAX_CHAINS 64

/* Argument positions of gibbs_nb_train, as declared in SQL. */
enum
{
	ARG_MODEL_NAME, ARG_SOURCE, ARG_TOKENS_COLUMN, ARG_LABEL_COLUMN, ARG_ID_COLUMN,
	ARG_N_CLASSES, ARG_SWEEPS, ARG_BURN_IN, ARG_LAG, ARG_CHAINS, ARG_SAMPLER,
	ARG_GAMMA_PI, ARG_GAMMA_THETA, ARG_UNLABELED_WEIGHT, ARG_SEED, ARG_LABELS_TABLE,
	ARG_WAIT, ARG_HOLDOUT, ARG_TOKENIZER, ARG_INIT, ARG_SWEEP_WORKERS
};
#define N_TRAIN_ARGS (ARG_SWEEP_WORKERS + 1)

static const char *const arg_names[] = {
	"model_name", "source", "tokens_column", "label_column", "id_column",
	"n_classes", "sweeps", "burn_in", "lag", "chains", "sampler",
	"gamma_pi", "gamma_theta", "unlabeled_weight", "seed", "labels_table", "wait", "holdout",
	"tokenizer", "init", "sweep_workers"
};

static void
require_not_null(FunctionCallInfo fcinfo, int arg)
{
	if (PG_ARGISNULL(arg))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be NULL", arg_names[arg])));
}

#define invalid_argument(...) \
	ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg(__VA_ARGS__)))

/* A fixed gamma: positive, at most what the samplers take (GNB_GAMMA_LIMIT) */
static double
fixed_gamma(FunctionCallInfo fcinfo, int arg)
{
	double		v;

	require_not_null(fcinfo, arg);
	v = PG_GETARG_FLOAT8(arg);
	if (!(v > 0.0 && v <= GNB_GAMMA_LIMIT))
		invalid_argument("%s must be positive and at most %.15g, not %.15g", arg_names[arg],
						 GNB_GAMMA_LIMIT, v);
	return v;
}

/*
 * Run a query as the caller (search_path pinned); return the first column of
 * its first row as text.
 */
static char *
first_value(const char *sql, bool *found)
{
	char	   *value = NULL;

	gnb_execute(sql, 0, NULL, NULL, NULL, GNB_AS_CALLER, SPI_OK_SELECT, 1);
	*found = SPI_processed > 0;
	if (*found)
	{
		value = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
		if (value)
			value = MemoryContextStrdup(TopTransactionContext, value);
	}
	return value;
}

/* Is there a valid, non-partial unique index on exactly this column? */
static bool
has_unique_index_on(Oid relid, AttrNumber attnum)
{
	bool		found;
	char	   *sql = psprintf("SELECT 1 FROM pg_catalog.pg_index "
							   "WHERE indrelid OPERATOR(pg_catalog.=) %u AND indisunique AND indisvalid "
							   "AND indnkeyatts OPERATOR(pg_catalog.=) 1 "
							   "AND indkey[0] OPERATOR(pg_catalog.=) %d "
							   "AND indpred IS NULL AND indexprs IS NULL",
							   relid, attnum);

	(void) first_value(sql, &found);
	return found;
}

/*
 * Checks on the data itself, as the caller: ids present and unique, and the
 * labels consistent with n_classes.  One scan for the labels; the id checks
 * use a unique index when there is one.  The source is locked (by OID) and
 * `source_sql` its name made from the catalogs under that lock.
 */
static void
check_source_data(GnbJobParams *p, const char *source_sql)
{
	const GnbSourceDesc *src = &p->source;
	const char *id = quote_identifier(src->id_column);
	TypeCacheEntry *idtype = lookup_type_cache(src->id_type,
											   TYPECACHE_HASH_PROC | TYPECACHE_CMP_PROC);
	bool		found;
	char	   *value;

	/*
	 * the blocked sampler names an unlabelled document's draws by its id, an
	 * integer as it is, another by its type's 64-bit hash (corpus.c)
	 */
	if (p->sampler.sampler == GNB_SAMPLER_BLOCKED && src->id_type != INT8OID &&
		src->id_type != INT4OID && src->id_type != INT2OID &&
		!OidIsValid(lookup_type_cache(src->id_type, TYPECACHE_HASH_EXTENDED_PROC)->hash_extended_proc))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("sampler \"blocked\" needs an id column whose type has a 64-bit hash function"),
				 errdetail("Id column \"%s\" is of type %s, which has no extended hash support function.",
						   src->id_column, format_type_be(src->id_type)),
				 errhint("Use an integer id column, or another sampler.")));
	SPI_connect();
	(void) first_value(psprintf("SELECT 1 FROM %s WHERE %s IS NULL LIMIT 1",
								source_sql, id), &found);
	if (found)
		ereport(ERROR,
				(errcode(ERRCODE_NOT_NULL_VIOLATION),
				 errmsg("id column \"%s\" of %s has NULL values", src->id_column, source_sql)));
	if (!has_unique_index_on(src->relid, src->id_attnum) &&
		(OidIsValid(idtype->hash_proc) || OidIsValid(idtype->cmp_proc)))
	{
		value = first_value(psprintf("SELECT %s::pg_catalog.text FROM %s GROUP BY %s "
									 "HAVING pg_catalog.count(*) OPERATOR(pg_catalog.>) 1 LIMIT 1",
									 id, source_sql, id), &found);
		if (found)
			ereport(ERROR,
					(errcode(ERRCODE_UNIQUE_VIOLATION),
					 errmsg("id column \"%s\" of %s is not unique", src->id_column, source_sql),
					 errdetail("Id %s occurs more than once.", value ? value : "?")));
	}
	if (src->label_attnum != 0)
	{
		const char *label = quote_identifier(src->label_column);
		int			n_values;
		int			longest;

		/* the number of labels and the longest (the worker checks again) */
		value = first_value(psprintf("SELECT pg_catalog.format('%%s %%s', pg_catalog.count(*), "
									 "COALESCE(pg_catalog.max(pg_catalog.octet_length(v.l)), 0)) "
									 "FROM (SELECT DISTINCT %s::pg_catalog.text AS l "
									 "FROM %s WHERE %s IS NOT NULL LIMIT %d) v",
									 label, source_sql, label, GNB_MAX_CLASSES + 1), &found);
		if (sscanf(value, "%d %d", &n_values, &longest) != 2)
			elog(ERROR, "unexpected label summary \"%s\"", value);
		gnb_check_label_values(n_values, p->n_classes, source_sql);
		gnb_check_label_length(longest);
	}
	SPI_finish();
}

/*
 * check_source_data under a row lock on the source's schema, which keeps its
 * name while the checks read the source by it (gnb_lock_namespace_name), in
 * a subtransaction rolled back when they are done, which ends the lock.
 * Held until the caller's transaction ended, the lock let any role that can
 * read one relation of a schema (pg_catalog.pg_class will do) hold every
 * GRANT, ALTER and DROP of that schema for as long as it kept a transaction
 * open.  The checks only read: the rollback undoes nothing they are for.
 */
static void
check_source_data_locked(GnbJobParams *p)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		Oid			nspid = get_rel_namespace(p->source.relid);

		gnb_lock_namespace_name(nspid, false);
		check_source_data(p, quote_qualified_identifier(get_namespace_name(nspid),
														get_rel_name(p->source.relid)));
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		ReThrowError(edata);
	}
	PG_END_TRY();
	RollbackAndReleaseCurrentSubTransaction();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
}

/*
 * The labels table: a name, qualified or not (then in the source's schema),
 * default <model_name>_labels.  A table of that name must be the one training
 * created for this model; if there is none the caller must be able to create
 * it.
 */
static void
resolve_labels_table(FunctionCallInfo fcinfo, GnbJobParams *p)
{
	Oid			source_nsp = get_rel_namespace(p->source.relid);
	char	   *schema = get_namespace_name(source_nsp);
	char	   *table;
	Oid			nspid;
	Oid			relid;

	if (PG_ARGISNULL(ARG_LABELS_TABLE))
		table = psprintf("%s_labels", p->model_name);
	else
	{
		List	   *names = gnb_qualified_name_list(text_to_cstring(PG_GETARG_TEXT_PP(ARG_LABELS_TABLE)));

		if (list_length(names) == 2)
		{
			schema = strVal(linitial(names));
			table = strVal(lsecond(names));
		}
		else if (list_length(names) == 1)
			table = strVal(linitial(names));
		else
			invalid_argument("labels_table must be a table name, optionally schema-qualified");
	}
	if (strlen(table) >= NAMEDATALEN || strlen(schema) >= NAMEDATALEN)
		ereport(ERROR,
				(errcode(ERRCODE_NAME_TOO_LONG),
				 errmsg("labels table name \"%s\" is too long", table),
				 errhint("Pass a shorter labels_table.")));
	nspid = get_namespace_oid(schema, false);
	strlcpy(p->labels_schema, schema, NAMEDATALEN);
	strlcpy(p->labels_table, table, NAMEDATALEN);

	relid = get_relname_relid(table, nspid);
	if (OidIsValid(relid))
	{
		bool		registered;
		bool		left = false;
		int64		running = 0;

		SPI_connect();
		registered = gnb_labels_table_registered(p->model_owner, p->model_name, relid);
		/* the running job's own (publish.c, gnb_reserve_labels_table) */
		if (!registered)
			running = gnb_running_job(p->model_owner, p->model_name);
		/* a lost job's, which the job's worker drops before it makes its own */
		if (!registered && running == 0)
			left = gnb_store_left_by_lost_job(p->model_owner, p->model_name, relid);
		SPI_finish();
		if (running != 0)
			gnb_refuse_running_model(p->model_name, running);
		if (left)
		{
			/* made again as the model's owner, who needs CREATE there */
			if (gnb_namespace_aclcheck(nspid, gnb_owner_role_required(p->model_owner),
									   ACL_CREATE) != ACLCHECK_OK)
				aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_SCHEMA, schema);
			return;
		}
		if (!registered)
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_TABLE),
					 errmsg("table %s already exists and was not created for model \"%s\"",
							quote_qualified_identifier(schema, table), p->model_name),
					 errhint("Drop or rename the table, or pass another labels_table.")));
		/* written as the model's owner at publish: refused now, not then */
		(void) gnb_labels_table_owner(relid, p->model_owner, p->model_name, ERROR);
	}
	else
	{
		/* it is made as the model's owner (publish.c), who needs CREATE there */
		if (gnb_namespace_aclcheck(nspid, gnb_owner_role_required(p->model_owner),
								   ACL_CREATE) != ACLCHECK_OK)
			aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_SCHEMA, schema);

		/*
		 * A table's name is also its row type's: a type of that name (an
		 * enum, a domain, anyone's with CREATE there) would fail the
		 * CREATE TABLE at publish, after every sweep was run.  Said now.
		 */
		if (OidIsValid(GetSysCacheOid2(TYPENAMENSP, Anum_pg_type_oid,
									   CStringGetDatum(table), ObjectIdGetDatum(nspid))))
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_OBJECT),
					 errmsg("type %s already exists: no labels table of that name can be created",
							quote_qualified_identifier(schema, table)),
					 errhint("Pass another labels_table.")));
	}
}

/*
 * gibbs_nb.max_jobs_per_login, for this session's login; a superuser's
 * login is not bounded by it (0), as connection limits do not bind one.
 */
static int
login_bound(void)
{
	return superuser_arg(GetSessionUserId()) ? 0 : gnb_max_jobs_per_login;
}

/*
 * The sampler's arguments of gibbs_nb_train: sweeps, burn_in, lag, chains,
 * the sampler, the gammas, the start, unlabeled_weight and the seed, checked
 * (22023), and the caller's limits the worker keeps to.
 */
static void
resolve_sampler_arguments(FunctionCallInfo fcinfo, GnbJobParams *p)
{
	gnb_params *sp = &p->sampler;
	char	   *sampler;

	sp->sweeps = PG_GETARG_INT32(ARG_SWEEPS);
	if (sp->sweeps <= 0 || sp->sweeps > GNB_MAX_SWEEPS)
		invalid_argument("sweeps must be between 1 and %d, not %d", GNB_MAX_SWEEPS, sp->sweeps);
	sp->burn_in = PG_ARGISNULL(ARG_BURN_IN) ? sp->sweeps / 2 : PG_GETARG_INT32(ARG_BURN_IN);
	if (sp->burn_in < 0 || sp->burn_in >= sp->sweeps)
		invalid_argument("burn_in must be at least 0 and less than sweeps (%d), not %d",
						 sp->sweeps, sp->burn_in);
	sp->lag = PG_GETARG_INT32(ARG_LAG);
	if (sp->lag < 1)
		invalid_argument("lag must be at least 1, not %d", sp->lag);
	/* the estimates average the kept sweeps: at least one must be kept */
	if (sp->lag > sp->sweeps - sp->burn_in)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lag (%d) is larger than sweeps - burn_in (%d): no sweep would be kept",
						sp->lag, sp->sweeps - sp->burn_in),
				 errhint("Lower lag or burn_in, or raise sweeps.")));
	sp->chains = PG_GETARG_INT32(ARG_CHAINS);
	if (sp->chains < 1 || sp->chains > GNB_MAX_CHAINS)
		invalid_argument("chains must be between 1 and %d, not %d", GNB_MAX_CHAINS, sp->chains);
	sampler = text_to_cstring(PG_GETARG_TEXT_PP(ARG_SAMPLER));
	if (gnb_sampler_from_name(sampler) < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown sampler \"%s\"", sampler),
				 errhint("The samplers are 'paper', 'collapsed' and 'blocked'.")));
	sp->sampler = (gnb_sampler_kind) gnb_sampler_from_name(sampler);
	/*
	 * A NULL gamma is sampled every sweep (docs/model.md), starting from 1;
	 * the model row then records its posterior mean.
	 */
	sp->sample_gamma_pi = PG_ARGISNULL(ARG_GAMMA_PI);
	sp->gamma_pi = sp->sample_gamma_pi ? 1.0 : fixed_gamma(fcinfo, ARG_GAMMA_PI);
	sp->sample_gamma_theta = PG_ARGISNULL(ARG_GAMMA_THETA);
	sp->gamma_theta = sp->sample_gamma_theta ? 1.0 : fixed_gamma(fcinfo, ARG_GAMMA_THETA);
	/*
	 * How unlabelled labels start (gnb_init_kind): from the labels, or
	 * uniformly at random as before 0.2.0
	 */
	{
		char	   *init = text_to_cstring(PG_GETARG_TEXT_PP(ARG_INIT));

		if (strcmp(init, "labels") == 0)
			sp->init = GNB_INIT_LABELS;
		else if (strcmp(init, "random") == 0)
			sp->init = GNB_INIT_RANDOM;
		else
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown init \"%s\"", init),
					 errhint("The starts are 'labels' and 'random'.")));
	}
	/*
	 * A NULL unlabeled_weight (the default) is chosen by the label check
	 * (docs/model.md): the sampler runs at 1, and the version is the
	 * labels-only model unless the unlabelled documents clearly helped.
	 */
	p->unlabeled_weight_chosen = PG_ARGISNULL(ARG_UNLABELED_WEIGHT);
	sp->unlabeled_weight = p->unlabeled_weight_chosen ? 1.0 :
		PG_GETARG_FLOAT8(ARG_UNLABELED_WEIGHT);
	if (!(sp->unlabeled_weight >= 0.0 && sp->unlabeled_weight <= 1.0))
		invalid_argument("unlabeled_weight must be between 0 and 1, not %g", sp->unlabeled_weight);
	/*
	 * The worker takes the trace from the progress hook and writes it as it
	 * goes: the sampler keeps no chains x sweeps arrays.  The memory budget
	 * is checked by the worker, from the corpus it read.
	 */
	sp->no_trace = 1;
	p->max_job_memory = (int64) gnb_max_job_memory_kb * 1024;
	p->max_chain_workers = gnb_max_chain_workers;
	/*
	 * sweep_workers: the blocked sampler's; NULL takes gibbs_nb.sweep_workers,
	 * which other samplers ignore, and is refused when said to one of them.
	 */
	if (PG_ARGISNULL(ARG_SWEEP_WORKERS))
		p->sweep_workers = sp->sampler == GNB_SAMPLER_BLOCKED ? gnb_sweep_workers : 1;
	else
	{
		p->sweep_workers = PG_GETARG_INT32(ARG_SWEEP_WORKERS);
		if (p->sweep_workers < 1 || p->sweep_workers > GNB_MAX_CHAINS)
			invalid_argument("sweep_workers must be between 1 and %d, not %d", GNB_MAX_CHAINS,
							 p->sweep_workers);
		if (p->sweep_workers > 1 && sp->sampler != GNB_SAMPLER_BLOCKED)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("sweep_workers applies to the blocked sampler, not \"%s\"",
							gnb_sampler_name(sp->sampler)),
					 errhint("Use sampler => 'blocked', or chains => n to use more cores.")));
	}
	/* a developer's setting (worker/nodes.c): the blocked sampler's alone */
	p->blocked_nodes = sp->sampler == GNB_SAMPLER_BLOCKED ? gnb_blocked_nodes : 0;
	p->max_jobs = gnb_max_jobs;
	p->max_jobs_per_role = gnb_max_jobs_per_role;
	p->max_jobs_per_login = login_bound();
	p->lock_timeout_ms = gnb_lock_wait_bound_ms();
	if (PG_ARGISNULL(ARG_SEED))
		sp->seed = pg_prng_uint64(&pg_global_prng_state) >> 1;	/* fits a bigint */
	else
		sp->seed = (uint64) PG_GETARG_INT64(ARG_SEED);
}

/*
 * Fill the job's parameters from the call, checking each.  model_owner is
 * the role that owns the model the job trains (NULL: the current role's).
 */
static void
resolve_arguments(FunctionCallInfo fcinfo, GnbJobParams *p, const char *model_owner)
{
	char	   *model_name;
	bool		has_label = !PG_ARGISNULL(ARG_LABEL_COLUMN);
	Oid			outer;
	char	   *source_sql;

	memset(p, 0, sizeof(*p));
	for (int arg = 0; arg < N_TRAIN_ARGS; arg++)
		if (arg != ARG_LABEL_COLUMN && arg != ARG_N_CLASSES && arg != ARG_BURN_IN &&
			arg != ARG_SEED && arg != ARG_LABELS_TABLE && arg != ARG_GAMMA_PI &&
			arg != ARG_GAMMA_THETA && arg != ARG_TOKENIZER && arg != ARG_UNLABELED_WEIGHT &&
			arg != ARG_SWEEP_WORKERS)
			require_not_null(fcinfo, arg);

	/* the model */
	model_name = text_to_cstring(PG_GETARG_TEXT_PP(ARG_MODEL_NAME));
	if (model_name[0] == '\0')
		invalid_argument("model_name must not be empty");
	if (strlen(model_name) > GNB_MODEL_NAME_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_NAME_TOO_LONG),
				 errmsg("model name \"%s\" is longer than %d bytes", model_name, GNB_MODEL_NAME_MAX)));
	strlcpy(p->model_name, model_name, NAMEDATALEN);
	strlcpy(p->model_owner, model_owner ? model_owner : gnb_current_role_name(), NAMEDATALEN);
	/* registered by the job's worker (as this role); refused now if it cannot be */
	p->model_owner_role = gnb_check_owner(p->model_owner);

	resolve_sampler_arguments(fcinfo, p);
	if (!PG_ARGISNULL(ARG_N_CLASSES))
	{
		p->n_classes = PG_GETARG_INT32(ARG_N_CLASSES);
		if (p->n_classes < 2 || p->n_classes > GNB_MAX_CLASSES)
			invalid_argument("n_classes must be between 2 and %d, not %d",
							 GNB_MAX_CLASSES, p->n_classes);
	}
	else if (!has_label)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("n_classes is required when there is no label column")));
	p->holdout = PG_GETARG_FLOAT8(ARG_HOLDOUT);
	if (!(p->holdout >= 0.0 && p->holdout < 1.0))
		invalid_argument("holdout must be at least 0 and less than 1, not %g", p->holdout);
	if (p->holdout > 0.0 && !has_label)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("holdout needs a label_column: it holds out a share of the labelled rows")));

	/*
	 * How the tokens were made, when the caller says so (the catalogs tell
	 * only a generated column's expression): recorded with the version, shown
	 * by gibbs_nb_models, carried by export, kept by retrain.
	 */
	if (!PG_ARGISNULL(ARG_TOKENIZER))
	{
		text	   *t = PG_GETARG_TEXT_PP(ARG_TOKENIZER);

		if (VARSIZE_ANY_EXHDR(t) == 0)
			invalid_argument("tokenizer must not be empty (NULL: not said)");
		if (VARSIZE_ANY_EXHDR(t) > GNB_TOKENIZER_MAX)
			invalid_argument("tokenizer must be at most %d bytes, not %zu", GNB_TOKENIZER_MAX,
							 (size_t) VARSIZE_ANY_EXHDR(t));
		text_to_cstring_buffer(t, p->tokenizer, sizeof(p->tokenizer));
	}

	/*
	 * The source and its columns, by OID.  The lock keeps the relation as it
	 * is checked while the data is checked; it is released before the job
	 * starts, so that a long training does not block DDL on the source.  The
	 * worker locks and checks it again before it reads.
	 */
	LockRelationOid(PG_GETARG_OID(ARG_SOURCE), AccessShareLock);
	gnb_describe_source(PG_GETARG_OID(ARG_SOURCE),
						text_to_cstring(PG_GETARG_TEXT_PP(ARG_TOKENS_COLUMN)),
						has_label ? text_to_cstring(PG_GETARG_TEXT_PP(ARG_LABEL_COLUMN)) : NULL,
						text_to_cstring(PG_GETARG_TEXT_PP(ARG_ID_COLUMN)),
						&p->source);
	/* its name as shown (checked by OID; the checks below name it again) */
	source_sql = quote_qualified_identifier(get_namespace_name(get_rel_namespace(p->source.relid)),
											get_rel_name(p->source.relid));
	strlcpy(p->source_display, source_sql, sizeof(p->source_display));

	/* who runs it: the worker takes on exactly this identity */
	p->database_id = MyDatabaseId;
	p->authenticated_user_id = GetAuthenticatedUserId();
	p->session_user_id = GetSessionUserId();
	p->session_user_is_superuser = superuser_arg(p->session_user_id);
	outer = GetCurrentRoleId();
	p->outer_user_id = outer;
	p->outer_user_is_superuser = OidIsValid(outer) && superuser_arg(outer);
	GetUserIdAndSecContext(&p->current_user_id, &p->sec_context);

	resolve_labels_table(fcinfo, p);
	check_source_data_locked(p);
	UnlockRelationOid(p->source.relid, AccessShareLock);
}

/*
 * One job per model, looked at before the launch: the job rows put right
 * (lost jobs, old rows), and a running job of the model refused.  No lock
 * is held meanwhile, and each statement waits at most gibbs_nb.lock_timeout:
 * another role's lock queued on gibbs_nb.jobs holds this training only, for
 * that long.  The worker looks again as it registers the job, under the
 * model's registration lock (two calls at the same instant).
 */
static void
check_model_not_running(const GnbJobParams *p)
{
	int64		running;

	SPI_connect();
	gnb_reconcile_jobs();
	gnb_prune_jobs();
	running = gnb_running_job(p->model_owner, p->model_name);
	SPI_finish();
	if (running != 0)
		gnb_refuse_running_model(p->model_name, running);
}

/*
 * The training path of gibbs_nb_train and gibbs_nb_retrain: fcinfo holds
 * gibbs_nb_train's arguments; model_owner is the owner of the model to train
 * (NULL: the current role).  Fills fcinfo's result set with one row.
 */
void
gnb_train_call(FunctionCallInfo fcinfo, const char *model_owner, int64 warm_version_id)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	GnbJobParams params;
	GnbJobOutcome outcome;
	bool		wait;
	Datum		values[7];
	bool		nulls[7] = {false, false, false, false, false, false, false};

	InitMaterializedSRF(fcinfo, 0);
	resolve_arguments(fcinfo, &params, model_owner);
	params.warm_version_id = warm_version_id;
	wait = PG_GETARG_BOOL(ARG_WAIT);
	params.job_id = gnb_store_next_job_id();

	check_model_not_running(&params);

	/*
	 * The counts (from the lock table) and the launch under the launch
	 * lock, which gnb_run_job lets go of as soon as the worker has taken
	 * its job's locks: the next caller's count includes it.
	 */
	memset(&outcome, 0, sizeof(outcome));
	gnb_launch_lock_acquire();
	PG_TRY();
	{
		gnb_check_job_limits(params.max_jobs, params.max_jobs_per_role, params.max_jobs_per_login,
							 GetUserId(), GetSessionUserId());
		gnb_run_job(&params, wait, &outcome);
	}
	PG_FINALLY();
	{
		gnb_launch_lock_release();
	}
	PG_END_TRY();

	values[0] = Int64GetDatum(params.job_id);
	values[1] = CStringGetTextDatum(params.model_name);
	if (outcome.phase == GNB_PHASE_SUCCEEDED)
	{
		gnb_notice_warnings(params.model_owner, params.model_name, outcome.version);
		values[2] = Int32GetDatum(outcome.version);
		values[3] = CStringGetTextDatum("succeeded");
		values[4] = Int32GetDatum(outcome.sweeps_done);
		values[5] = Float8GetDatum(outcome.seconds);
		values[6] = Float8GetDatum(outcome.log_likelihood);
	}
	else
	{
		values[3] = CStringGetTextDatum("running");
		values[4] = Int32GetDatum(0);
		nulls[2] = nulls[5] = nulls[6] = true;
	}
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

PG_FUNCTION_INFO_V1(gibbs_nb_train);

/*
 * gibbs_nb_train(model_name, source, tokens_column, label_column, id_column,
 *				  n_classes, sweeps, burn_in, lag, chains, sampler, gamma_pi,
 *				  gamma_theta, unlabeled_weight, seed, labels_table, wait, holdout,
 *				  tokenizer, init, sweep_workers)
 *
 * Trains a new version of the current role's model of that name in a
 * background worker that runs as the caller; see docs/reference.md for
 * every argument.  Returns one row: the job, and with wait => true its outcome.
 */
Datum
gibbs_nb_train(PG_FUNCTION_ARGS)
{
	/*
	 * A library newer than the extension's SQL (installed, but ALTER
	 * EXTENSION not yet run) would read arguments the old declaration does
	 * not pass.
	 */
	if (PG_NARGS() != N_TRAIN_ARGS)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("gibbs_nb_train of this library takes %d arguments, not %d",
						N_TRAIN_ARGS, PG_NARGS()),
				 errhint("Run ALTER EXTENSION gibbs_nb UPDATE.")));
	gnb_train_call(fcinfo, NULL, 0);
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(gibbs_nb_retrain);

/*
 * gibbs_nb_retrain(model_name text, wait boolean DEFAULT true,
 *					warm boolean DEFAULT false, sweep_workers int DEFAULT NULL)
 *		returns setof gibbs_nb.train_result
 *
 * Trains a new version of a model with every parameter of its latest version
 * (the seed included), reading its source afresh.  The source is the
 * relation the model was trained on, by OID: if it is gone the retrain fails
 * (42P01), whatever now has its name.  A restored version's source is found
 * by its name, and only if the model's owner owns it
 * (gibbs_nb.model_relation).  The new version belongs to the model's owner,
 * also when a member of that role retrains it; the job runs as the caller,
 * as every job does.
 */
Datum
gibbs_nb_retrain(PG_FUNCTION_ARGS)
{
	LOCAL_FCINFO(call, N_TRAIN_ARGS);
	char	   *model_name;
	const char *owner;
	HeapTuple	row;
	TupleDesc	desc;
	bool		isnull;
	Oid			source;
	int64		warm_version_id = 0;
	MemoryContext caller_cxt = CurrentMemoryContext;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || (PG_NARGS() > 2 && PG_ARGISNULL(2)))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be NULL", PG_ARGISNULL(0) ? "model_name" :
						PG_ARGISNULL(1) ? "wait" : "warm")));
	model_name = text_to_cstring(PG_GETARG_TEXT_PP(0));

	SPI_connect();
	owner = gnb_resolve_model_owner(model_name, false);
	/* a warm start begins where the serving version's labels are */
	if (PG_NARGS() > 2 && PG_GETARG_BOOL(2))
		warm_version_id = gnb_store_current_version_id(model_name, NULL, NULL);
	row = gnb_store_latest_version(owner, model_name, &desc);
	if (row == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("model \"%s\" does not exist", model_name)));
	/*
	 * SPI_finish frees what was allocated since SPI_connect: the owner's
	 * name and the row's descriptor are copied out (the row already is).
	 */
	owner = MemoryContextStrdup(caller_cxt, owner);
	{
		MemoryContext old = MemoryContextSwitchTo(caller_cxt);

		desc = CreateTupleDescCopy(desc);
		MemoryContextSwitchTo(old);
	}
	source = DatumGetObjectId(SPI_getbinval(row, desc, 2, &isnull));
	if (isnull || !SearchSysCacheExists1(RELOID, ObjectIdGetDatum(source)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("the source of model \"%s\" no longer exists", model_name),
				 isnull ?
				 errdetail("The model was trained on %s; its owner has no relation of that name here (a restored model finds its source by name).",
						   SPI_getvalue(row, desc, 17)) :
				 errdetail("The model was trained on %s (OID %u), which has been dropped.",
						   SPI_getvalue(row, desc, 17), source),
				 errhint("Train the model again with gibbs_nb_train on the new source.")));
	SPI_finish();

	/*
	 * gibbs_nb_train's arguments: the query's first 16 columns are its first
	 * 16 arguments, in order (source_relid for source); its 18th is holdout,
	 * its 19th the tokenizer the caller stated, its 20th init.
	 */
	InitFunctionCallInfoData(*call, fcinfo->flinfo, N_TRAIN_ARGS, InvalidOid, NULL,
							 fcinfo->resultinfo);
	for (int arg = 0; arg < ARG_WAIT; arg++)
		call->args[arg].value = heap_getattr(row, arg + 1, desc, &call->args[arg].isnull);
	call->args[ARG_WAIT].value = PG_GETARG_DATUM(1);
	call->args[ARG_WAIT].isnull = false;
	call->args[ARG_HOLDOUT].value = heap_getattr(row, 18, desc, &call->args[ARG_HOLDOUT].isnull);
	call->args[ARG_TOKENIZER].value = heap_getattr(row, 19, desc,
												   &call->args[ARG_TOKENIZER].isnull);
	call->args[ARG_INIT].value = heap_getattr(row, 20, desc, &call->args[ARG_INIT].isnull);
	/* not the version's: it chooses processes, not the model */
	call->args[ARG_SWEEP_WORKERS].value = PG_NARGS() > 3 ? PG_GETARG_DATUM(3) : (Datum) 0;
	call->args[ARG_SWEEP_WORKERS].isnull = PG_NARGS() <= 3 || PG_ARGISNULL(3);
	/* a version trained before gammas were bounded (or imported from one) */
	for (int arg = ARG_GAMMA_PI; arg <= ARG_GAMMA_THETA; arg++)
		if (!call->args[arg].isnull &&
			!(DatumGetFloat8(call->args[arg].value) <= GNB_GAMMA_LIMIT))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("model \"%s\" was trained with %s %.15g, more than gibbs_nb_train takes (at most %.15g)",
							model_name, arg_names[arg], DatumGetFloat8(call->args[arg].value),
							GNB_GAMMA_LIMIT),
					 errhint("Train it again with gibbs_nb_train and a smaller %s.", arg_names[arg])));
	gnb_train_call(call, owner, warm_version_id);
	return (Datum) 0;
}
