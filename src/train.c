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

#include <math.h>

#include "access/htup_details.h"
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
#include "utils/regproc.h"
#include "utils/typcache.h"

/* Upper bounds that keep memory and the trace table sane. */
#define GNB_MAX_SWEEPS 10000000
#define GNB_MAX_CHAINS 64

/* Argument positions of gibbs_nb_train, as declared in SQL. */
enum
{
	ARG_MODEL_NAME, ARG_SOURCE, ARG_TOKENS_COLUMN, ARG_LABEL_COLUMN, ARG_ID_COLUMN,
	ARG_N_CLASSES, ARG_SWEEPS, ARG_BURN_IN, ARG_LAG, ARG_CHAINS, ARG_SAMPLER,
	ARG_GAMMA_PI, ARG_GAMMA_THETA, ARG_UNLABELED_WEIGHT, ARG_SEED, ARG_LABELS_TABLE,
	ARG_WAIT
};

static const char *const arg_names[] = {
	"model_name", "source", "tokens_column", "label_column", "id_column",
	"n_classes", "sweeps", "burn_in", "lag", "chains", "sampler",
	"gamma_pi", "gamma_theta", "unlabeled_weight", "seed", "labels_table", "wait"
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

static double
positive_finite(FunctionCallInfo fcinfo, int arg)
{
	double		v;

	require_not_null(fcinfo, arg);
	v = PG_GETARG_FLOAT8(arg);
	if (!(v > 0.0) || isinf(v))
		invalid_argument("%s must be positive and finite, not %g", arg_names[arg], v);
	return v;
}

/* A column name argument: its attribute number in the source, or an error. */
static AttrNumber
source_column(Oid relid, const char *column, const char *role)
{
	AttrNumber	attnum = get_attnum(relid, column);

	if (attnum == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of %s does not exist", column, get_rel_name(relid)),
				 errhint("%s names the %s column.", role, role)));
	if (attnum < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_COLUMN_REFERENCE),
				 errmsg("system column \"%s\" cannot be used as %s", column, role)));
	/* column grants count only where the table itself is not readable */
	if (pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) != ACLCHECK_OK &&
		pg_attribute_aclcheck(relid, attnum, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
		aclcheck_error(ACLCHECK_NO_PRIV, get_relkind_objtype(get_rel_relkind(relid)),
					   get_rel_name(relid));
	return attnum;
}

/* Run a query as the caller; return the first column of its first row as text. */
static char *
first_value(const char *sql, bool *found)
{
	char	   *value = NULL;

	if (SPI_execute(sql, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not run: %s", sql);
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
 * use a unique index when there is one.
 */
static void
check_source_data(GnbJobParams *p, AttrNumber id_attnum, bool has_label)
{
	const char *id = quote_identifier(p->id_column);
	TypeCacheEntry *idtype = lookup_type_cache(p->id_type,
											   TYPECACHE_HASH_PROC | TYPECACHE_CMP_PROC);
	bool		found;
	char	   *value;

	SPI_connect();
	(void) first_value(psprintf("SELECT 1 FROM %s WHERE %s IS NULL LIMIT 1",
								p->source_name, id), &found);
	if (found)
		ereport(ERROR,
				(errcode(ERRCODE_NOT_NULL_VIOLATION),
				 errmsg("id column \"%s\" of %s has NULL values", p->id_column, p->source_name)));
	if (!has_unique_index_on(p->source_relid, id_attnum) &&
		(OidIsValid(idtype->hash_proc) || OidIsValid(idtype->cmp_proc)))
	{
		value = first_value(psprintf("SELECT %s::pg_catalog.text FROM %s GROUP BY %s "
									 "HAVING pg_catalog.count(*) OPERATOR(pg_catalog.>) 1 LIMIT 1",
									 id, p->source_name, id), &found);
		if (found)
			ereport(ERROR,
					(errcode(ERRCODE_UNIQUE_VIOLATION),
					 errmsg("id column \"%s\" of %s is not unique", p->id_column, p->source_name),
					 errdetail("Id %s occurs more than once.", value ? value : "?")));
	}
	if (has_label)
	{
		const char *label = quote_identifier(p->label_column);
		int			n_values;

		value = first_value(psprintf("SELECT pg_catalog.count(*) FROM (SELECT DISTINCT %s::pg_catalog.text "
									 "FROM %s WHERE %s IS NOT NULL LIMIT %d) v",
									 label, p->source_name, label, GNB_MAX_CLASSES + 1), &found);
		n_values = pg_strtoint32(value);
		if (n_values > GNB_MAX_CLASSES)
			invalid_argument("the label column has more than %d distinct values", GNB_MAX_CLASSES);
		if (n_values == 0 && p->n_classes == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s has no labelled rows and n_classes was not given", p->source_name),
					 errhint("Pass n_classes to cluster the documents without labels.")));
		if (n_values == 1 && p->n_classes == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("the label column has only one distinct value"),
					 errhint("A model needs at least 2 classes.")));
		if (n_values > 0 && p->n_classes != 0 && n_values != p->n_classes)
			invalid_argument("n_classes is %d but the label column has %d distinct values",
							 p->n_classes, n_values);
	}
	SPI_finish();
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
	Oid			source_nsp = get_rel_namespace(p->source_relid);
	char	   *schema = get_namespace_name(source_nsp);
	char	   *table;
	Oid			nspid;
	Oid			relid;

	if (PG_ARGISNULL(ARG_LABELS_TABLE))
		table = psprintf("%s_labels", p->model_name);
	else
	{
		List	   *names = stringToQualifiedNameList(text_to_cstring(PG_GETARG_TEXT_PP(ARG_LABELS_TABLE)));

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
		Oid			registered;

		SPI_connect();
		registered = gnb_registered_labels_table(p->model_name, relid);
		SPI_finish();
		if (!OidIsValid(registered))
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_TABLE),
					 errmsg("table %s already exists and was not created for model \"%s\"",
							quote_qualified_identifier(schema, table), p->model_name),
					 errhint("Drop or rename the table, or pass another labels_table.")));
	}
	else if (pg_namespace_aclcheck(nspid, GetUserId(), ACL_CREATE) != ACLCHECK_OK)
		aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_SCHEMA, schema);
}

/* Fill the job's parameters from the call, checking each. */
static void
resolve_arguments(FunctionCallInfo fcinfo, GnbJobParams *p)
{
	char	   *model_name;
	char	   *sampler;
	char		relkind;
	Oid			tokens_type;
	AttrNumber	id_attnum;
	bool		has_label = !PG_ARGISNULL(ARG_LABEL_COLUMN);
	gnb_params *sp = &p->sampler;
	Oid			outer;

	memset(p, 0, sizeof(*p));
	for (int arg = 0; arg <= ARG_WAIT; arg++)
		if (arg != ARG_LABEL_COLUMN && arg != ARG_N_CLASSES && arg != ARG_BURN_IN &&
			arg != ARG_SEED && arg != ARG_LABELS_TABLE)
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

	/* the sampler's numbers */
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
	sp->chains = PG_GETARG_INT32(ARG_CHAINS);
	if (sp->chains < 1 || sp->chains > GNB_MAX_CHAINS)
		invalid_argument("chains must be between 1 and %d, not %d", GNB_MAX_CHAINS, sp->chains);
	sampler = text_to_cstring(PG_GETARG_TEXT_PP(ARG_SAMPLER));
	if (strcmp(sampler, "paper") == 0)
		sp->sampler = GNB_SAMPLER_PAPER;
	else if (strcmp(sampler, "collapsed") == 0)
		sp->sampler = GNB_SAMPLER_COLLAPSED;
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown sampler \"%s\"", sampler),
				 errhint("The samplers are 'paper' and 'collapsed'.")));
	sp->gamma_pi = positive_finite(fcinfo, ARG_GAMMA_PI);
	sp->gamma_theta = positive_finite(fcinfo, ARG_GAMMA_THETA);
	sp->unlabeled_weight = PG_GETARG_FLOAT8(ARG_UNLABELED_WEIGHT);
	if (!(sp->unlabeled_weight >= 0.0 && sp->unlabeled_weight <= 1.0))
		invalid_argument("unlabeled_weight must be between 0 and 1, not %g", sp->unlabeled_weight);
	if (PG_ARGISNULL(ARG_SEED))
		sp->seed = pg_prng_uint64(&pg_global_prng_state) >> 1;	/* fits a bigint */
	else
		sp->seed = (uint64) PG_GETARG_INT64(ARG_SEED);
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

	/* the source and its columns */
	p->source_relid = PG_GETARG_OID(ARG_SOURCE);
	relkind = get_rel_relkind(p->source_relid);
	if (relkind == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", p->source_relid)));
	if (relkind != RELKIND_RELATION && relkind != RELKIND_VIEW && relkind != RELKIND_MATVIEW &&
		relkind != RELKIND_PARTITIONED_TABLE && relkind != RELKIND_FOREIGN_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a table or view", get_rel_name(p->source_relid))));
	strlcpy(p->source_name,
			quote_qualified_identifier(get_namespace_name(get_rel_namespace(p->source_relid)),
									   get_rel_name(p->source_relid)),
			sizeof(p->source_name));

	strlcpy(p->tokens_column, text_to_cstring(PG_GETARG_TEXT_PP(ARG_TOKENS_COLUMN)), NAMEDATALEN);
	tokens_type = getBaseType(get_atttype(p->source_relid,
										  source_column(p->source_relid, p->tokens_column,
														"tokens_column")));
	if (tokens_type != TEXTARRAYOID && tokens_type != TSVECTOROID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("tokens column \"%s\" is of type %s, not text[] or tsvector",
						p->tokens_column, format_type_be(tokens_type)),
				 errhint("Cast it in a view, e.g. tokens::text[], or use to_tsvector().")));
	p->tokens_are_tsvector = tokens_type == TSVECTOROID;

	strlcpy(p->id_column, text_to_cstring(PG_GETARG_TEXT_PP(ARG_ID_COLUMN)), NAMEDATALEN);
	id_attnum = source_column(p->source_relid, p->id_column, "id_column");
	get_atttypetypmodcoll(p->source_relid, id_attnum, &p->id_type, &p->id_typmod,
						  &(Oid){InvalidOid});
	if (!OidIsValid(lookup_type_cache(p->id_type, TYPECACHE_EQ_OPR)->eq_opr))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("id column \"%s\" is of type %s, which has no equality operator",
						p->id_column, format_type_be(p->id_type))));
	if (!OidIsValid(get_array_type(p->id_type)))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("id column \"%s\" is of type %s, which has no array type",
						p->id_column, format_type_be(p->id_type))));

	if (has_label)
	{
		strlcpy(p->label_column, text_to_cstring(PG_GETARG_TEXT_PP(ARG_LABEL_COLUMN)), NAMEDATALEN);
		(void) source_column(p->source_relid, p->label_column, "label_column");
	}

	/* who runs it: the worker takes on exactly this identity */
	p->database_id = MyDatabaseId;
	p->authenticated_user_id = GetAuthenticatedUserId();
	p->session_user_id = GetSessionUserId();
	p->session_user_is_superuser = superuser_arg(p->session_user_id);
	outer = GetCurrentRoleId();
	p->outer_user_id = outer;
	p->outer_user_is_superuser = OidIsValid(outer) && superuser_arg(outer);
	GetUserIdAndSecContext(&p->current_user_id, &p->sec_context);

	/* the model name is ours to use, and nobody is training it now */
	gnb_check_model_access(p->model_name, p->current_user_id, true);
	{
		int64		running;
		int64		n_running;

		SPI_connect();
		gnb_reconcile_jobs();
		running = gnb_running_job(p->model_name, &n_running);
		SPI_finish();
		if (running != 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_IN_USE),
					 errmsg("model \"%s\" is being trained by job " INT64_FORMAT,
							p->model_name, running),
					 errhint("Wait for that job to end (gibbs_nb_wait), or cancel it (gibbs_nb_cancel).")));
		if (gnb_max_jobs > 0 && n_running >= gnb_max_jobs)
			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("%lld gibbs_nb jobs are running, the most gibbs_nb.max_jobs allows",
							(long long) n_running),
					 errhint("Wait for a job to end, or raise gibbs_nb.max_jobs.")));
	}

	resolve_labels_table(fcinfo, p);
	check_source_data(p, id_attnum, has_label);
}

PG_FUNCTION_INFO_V1(gibbs_nb_train);

/*
 * gibbs_nb_train(model_name, source, tokens_column, label_column, id_column,
 *				  n_classes, sweeps, burn_in, lag, chains, sampler, gamma_pi,
 *				  gamma_theta, unlabeled_weight, seed, labels_table, wait)
 *
 * Trains a new version of a model in a background worker that runs as the
 * caller; see README.md for every argument.  Returns one row: the job, and
 * with wait => true its outcome.
 */
Datum
gibbs_nb_train(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	GnbJobParams params;
	GnbJobOutcome outcome;
	bool		wait;
	Datum		values[7];
	bool		nulls[7] = {false, false, false, false, false, false, false};

	InitMaterializedSRF(fcinfo, 0);
	resolve_arguments(fcinfo, &params);
	wait = PG_GETARG_BOOL(ARG_WAIT);
	params.job_id = nextval_internal(get_relname_relid("job_id_seq",
													   get_namespace_oid(GNB_SCHEMA, false)),
									 false);

	memset(&outcome, 0, sizeof(outcome));
	gnb_run_job(&params, wait, &outcome);

	values[0] = Int64GetDatum(params.job_id);
	values[1] = CStringGetTextDatum(params.model_name);
	if (outcome.phase == GNB_PHASE_SUCCEEDED)
	{
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
	return (Datum) 0;
}
