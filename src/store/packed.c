/*
 * packed.c
 *	  What prediction reads: the current version of a name, and a version's
 *	  gibbs_nb.packed row, with plans kept for the backend's life.
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

/* ---------- what prediction reads ---------- */

static SPIPlanPtr current_version_plan = NULL;
static SPIPlanPtr load_plan = NULL;
/* the relation the two plans read: gibbs_nb.packed or this node's Citus placement of it */
static Oid	packed_plans_relid = InvalidOid;

static SPIPlanPtr
keep_plan(const char *sql, int nargs, Oid *types)
{
	SPIPlanPtr	plan = SPI_prepare(sql, nargs, types);

	if (plan == NULL)
		elog(ERROR, "could not prepare \"%s\": %s", sql, SPI_result_code_string(SPI_result));
	SPI_keepplan(plan);
	return plan;
}

/*
 * This node's placement of the Citus reference table relid, or InvalidOid
 * when Citus is not installed in this database, relid is no reference table,
 * or this node holds no copy of it.  SPI must be connected.
 */
Oid
gnb_citus_local_placement(Oid relid)
{
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	bool		isnull;
	int64		shardid;
	char	   *name;
	Oid			placement;

	if (!OidIsValid(get_extension_oid("citus", true)))
		return InvalidOid;
	gnb_execute("SELECT s.shardid FROM pg_catalog.pg_dist_partition d "
				"JOIN pg_catalog.pg_dist_shard s ON s.logicalrelid OPERATOR(pg_catalog.=) d.logicalrelid "
				"JOIN pg_catalog.pg_dist_placement p ON p.shardid OPERATOR(pg_catalog.=) s.shardid "
				"JOIN pg_catalog.pg_dist_local_group g ON g.groupid OPERATOR(pg_catalog.=) p.groupid "
				"WHERE d.logicalrelid OPERATOR(pg_catalog.=) $1 "
				"AND d.partmethod OPERATOR(pg_catalog.=) 'n' "
				"ORDER BY s.shardid LIMIT 1",
				1, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_SELECT, 1);
	if (SPI_processed != 1)
		return InvalidOid;
	shardid = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
										  &isnull));
	if (isnull)
		return InvalidOid;
	name = psprintf("%s_" INT64_FORMAT, get_rel_name(relid), shardid);
	placement = get_relname_relid(name, get_rel_namespace(relid));
	pfree(name);
	return placement;
}

/*
 * Prediction's two plans, reading the relation that holds this node's copy of
 * the models: gibbs_nb.packed, or on Citus its placement here (see citus.c),
 * as the caller, so that row security (the same policy on both) applies.
 * Prepared again when that relation changes (the table was distributed).
 * SPI connected.
 */
static void
prepare_packed_plans(void)
{
	Oid			nspid = get_namespace_oid("gibbs_nb", false);
	Oid			packed = get_relname_relid("packed", nspid);
	Oid			relid;
	char	   *rel;

	if (!OidIsValid(packed))
		elog(ERROR, "table gibbs_nb.packed is gone");
	relid = gnb_citus_local_placement(packed);
	if (!OidIsValid(relid))
		relid = packed;
	if (relid == packed_plans_relid && current_version_plan != NULL && load_plan != NULL)
		return;
	if (current_version_plan != NULL)
		SPI_freeplan(current_version_plan);
	if (load_plan != NULL)
		SPI_freeplan(load_plan);
	current_version_plan = load_plan = NULL;
	packed_plans_relid = InvalidOid;
	rel = quote_qualified_identifier("gibbs_nb", get_rel_name(relid));
	{
		Oid			types[1] = {TEXTOID};

		/* the deployed (pinned) version, else the latest */
		current_version_plan = keep_plan(psprintf("SELECT DISTINCT ON (owner) owner, version_id, xmin "
												  "FROM %s "
												  "WHERE model_name OPERATOR(pg_catalog.=) $1 "
												  "ORDER BY owner, pinned DESC, version DESC", rel),
										 1, types);
	}
	{
		Oid			types[1] = {INT8OID};

		load_plan = keep_plan(psprintf("SELECT classes, log_pi, tokens, log_theta, owner, model_name, version, xmin "
									   "FROM %s WHERE version_id OPERATOR(pg_catalog.=) $1", rel),
							  1, types);
	}
	packed_plans_relid = relid;
}

/*
 * The version_id of the version a model name means now, for the calling role and
 * under the current snapshot: the latest version of the model that
 * gnb_choose_owner picks among those row security lets the role see.  An
 * error if there is none.  SPI must be connected.
 */
int64
gnb_store_current_version_id(const char *name, TransactionId *row_xmin, const char **owner_out)
{
	Datum		arg = CStringGetTextDatum(name);
	char	  **owners;
	const char *owner;
	bool		isnull;

	prepare_packed_plans();
	if (SPI_execute_plan(current_version_plan, &arg, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not look up the version of model \"%s\"", name);
	owners = palloc(sizeof(char *) * (SPI_processed + 1));
	for (uint64 i = 0; i < SPI_processed; i++)
		owners[i] = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
	owner = gnb_choose_owner(name, owners, (int) SPI_processed);
	if (owner == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("model \"%s\" does not exist", name)));
	for (uint64 i = 0; i < SPI_processed; i++)
		if (owners[i] == owner)
		{
			if (row_xmin)
				*row_xmin = DatumGetTransactionId(SPI_getbinval(SPI_tuptable->vals[i],
																SPI_tuptable->tupdesc, 3,
																&isnull));
			if (owner_out)
				*owner_out = owner;
			return DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2,
											   &isnull));
		}
	pg_unreachable();
}

/*
 * The gibbs_nb.packed row of a version, read as the caller: (classes,
 * log_pi, tokens, log_theta, owner, model_name, version).  Valid until
 * SPI_finish.  SPI connected.
 */
HeapTuple
gnb_store_packed_row(int64 version_id, TupleDesc *desc)
{
	Datum		args[1] = {Int64GetDatum(version_id)};

	if (load_plan == NULL)
		prepare_packed_plans();
	if (SPI_execute_plan(load_plan, args, NULL, true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not load model version " INT64_FORMAT, version_id);
	*desc = SPI_tuptable->tupdesc;
	return SPI_tuptable->vals[0];
}

/*
 * A version's packed row as the caller may read it (row security), its
 * arrays detoasted into the current memory context and checked: one
 * dimension, no NULLs, K log pi-hat, V x K log theta-hat, V word counts (or
 * none: versions published before they were kept).  SPI connected.
 */
void
gnb_store_packed_model(int64 version_id, GnbPackedModel *p)
{
	Oid			types[1] = {INT8OID};
	Datum		args[1] = {Int64GetDatum(version_id)};
	MemoryContext cxt = CurrentMemoryContext;
	MemoryContext old;
	HeapTuple	tuple;
	TupleDesc	desc;
	ArrayType  *a[5];
	bool		isnull;
	int			n;

	gnb_execute("SELECT owner, model_name, version, classes, log_pi, tokens, log_theta, "
				"word_counts FROM gibbs_nb.packed WHERE version_id OPERATOR(pg_catalog.=) $1",
				1, types, args, NULL, GNB_AS_CALLER, SPI_OK_SELECT, 1);
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("model version " INT64_FORMAT " does not exist", version_id)));
	tuple = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	old = MemoryContextSwitchTo(cxt);
	p->owner = TextDatumGetCString(SPI_getbinval(tuple, desc, 1, &isnull));
	p->name = TextDatumGetCString(SPI_getbinval(tuple, desc, 2, &isnull));
	p->version = DatumGetInt32(SPI_getbinval(tuple, desc, 3, &isnull));
	for (int col = 4; col <= 8; col++)
	{
		Datum		d = SPI_getbinval(tuple, desc, col, &isnull);

		a[col - 4] = isnull ? NULL : DatumGetArrayTypePCopy(d);
		if ((isnull && col != 8) || (!isnull && (ARR_NDIM(a[col - 4]) > 1 || ARR_HASNULL(a[col - 4]))))
			elog(ERROR, "gibbs_nb.packed row of model \"%s\" version %d is malformed",
				 p->name, p->version);
	}
	deconstruct_array(a[0], TEXTOID, -1, false, TYPALIGN_INT, &p->classes, NULL, &n);
	p->n_classes = n;
	deconstruct_array(a[2], TEXTOID, -1, false, TYPALIGN_INT, &p->tokens, NULL, &n);
	p->n_words = n;
	p->log_pi = (const double *) ARR_DATA_PTR(a[1]);
	p->log_theta = (const double *) ARR_DATA_PTR(a[3]);
	p->word_counts = a[4] ? (const int64 *) ARR_DATA_PTR(a[4]) : NULL;
	if (ArrayGetNItems(ARR_NDIM(a[1]), ARR_DIMS(a[1])) != p->n_classes ||
		ArrayGetNItems(ARR_NDIM(a[3]), ARR_DIMS(a[3])) != (int64) p->n_words * p->n_classes ||
		(a[4] && ArrayGetNItems(ARR_NDIM(a[4]), ARR_DIMS(a[4])) != p->n_words))
		elog(ERROR, "gibbs_nb.packed row of model \"%s\" version %d is malformed",
			 p->name, p->version);
	MemoryContextSwitchTo(old);
}
