/*
 * store.c
 *	  The extension's tables: every statement against them is here, with the
 *	  one SPI helper (gnb_execute), the privilege switch, how a model name is
 *	  resolved, whether a job's worker lives, and the job limits' counts.
 *	  Training, the worker, publishing, prediction and dropping only
 *	  coordinate.  The schema is named GNB_SCHEMA in C and "gibbs_nb" in
 *	  the statements' text.
 *
 * The tables in schema gibbs_nb are owned by the extension's owner and are
 * not writable by anyone else.  Code that writes them (or must see other
 * roles' rows) switches to that owner for the duration, with search_path
 * pinned to pg_catalog so that nothing a user created can be called with
 * those privileges.  Code that reads them as the caller relies on their row
 * security (see gibbs_nb--0.1.0--0.2.0.sql).
 *
 * Models live in per-role namespaces: a model is (owner, model_name), the
 * owner stored by name so that a restore into another cluster, or another
 * Citus node, means the same role.  In the cluster where an owner name was
 * registered (gibbs_nb.owners, as its first job ran or model was imported)
 * it means the role registered then, by OID (gnb_owner_role): a role
 * created later under a dropped role's name is not given its models, a
 * renamed role keeps them.  A name resolves (gnb_choose_owner) to the
 * current role's own model of that name, or else to the one model of that
 * name owned by a role whose privileges the current role has.  Superusers,
 * who have every role's privileges, resolve only their own models: a name
 * must never silently pick up whatever model some other role made.
 */
#include "gibbs_nb.h"

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

/*
 * locktag_field4 of a job's liveness lock: user advisory locks use 1 and 2,
 * so no SQL call can take or fake this one.
 */
#define JOB_LOCK_CLASS 0x474E
/* ... and of the lock that makes checking the job limits and launching one step */
#define LAUNCH_LOCK_CLASS 0x474F
/* ... and of the lock every worker of a role holds, in every database */
#define ROLE_LOCK_CLASS 0x4751
/* ... and of a chain worker's slot, held for it by its job's worker */
#define CHAIN_LOCK_CLASS 0x4752

/* The owner of schema gibbs_nb: the role that created the extension. */
Oid
gnb_internal_owner(void)
{
	Oid			nspid = get_namespace_oid(GNB_SCHEMA, false);
	HeapTuple	tuple;
	Oid			owner;

	tuple = SearchSysCache1(NAMESPACEOID, ObjectIdGetDatum(nspid));
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for schema %u", nspid);
	owner = ((Form_pg_namespace) GETSTRUCT(tuple))->nspowner;
	ReleaseSysCache(tuple);
	return owner;
}

/*
 * Act as the extension's owner until gnb_restore_user, as a SECURITY DEFINER
 * function would: restricted operation, search_path = pg_catalog, pg_temp.
 * An error in between is safe: transaction abort restores both.
 */
void
gnb_become_internal(GnbPrivilegeState *state)
{
	gnb_become_role(gnb_internal_owner(), state);
}

/*
 * As role, in a security-restricted operation, with search_path pinned to
 * pg_catalog, pg_temp, until gnb_restore_user: as PostgreSQL runs its
 * maintenance commands (REFRESH MATERIALIZED VIEW, CREATE INDEX) as a
 * table's owner.
 */
void
gnb_become_role(Oid role, GnbPrivilegeState *state)
{
	GetUserIdAndSecContext(&state->save_user, &state->save_sec_context);
	state->save_nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp",
							 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE,
							 true, 0, false);
	SetUserIdAndSecContext(role,
						   state->save_sec_context |
						   SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
}

/* The owner of a relation, InvalidOid if there is none of that OID. */
static Oid
relation_owner(Oid relid)
{
	HeapTuple	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid			owner;

	if (!HeapTupleIsValid(tuple))
		return InvalidOid;
	owner = ((Form_pg_class) GETSTRUCT(tuple))->relowner;
	ReleaseSysCache(tuple);
	return owner;
}

/*
 * The role a model's labels table must belong to, and is written as: the
 * model's owner.  A labels table is written as its owner (gnb_become_role),
 * never as the role that asked: a model's owner may be a group, and a
 * trigger another member put on the group's labels table ran as whichever
 * member deployed, dropped or retrained the model, with that member's
 * privileges.  Written as the group, it gets only the group's, which every
 * member has anyway.  A table that belongs to someone else now is
 * reported at elevel (ERROR, or WARNING when it is to
 * be left alone: then InvalidOid).
 */
Oid
gnb_labels_table_owner(Oid relid, const char *model_owner, const char *model_name, int elevel)
{
	Oid			relowner = relation_owner(relid);
	Oid			owner = gnb_owner_role(model_owner);

	if (!OidIsValid(relowner))
	{
		/* gone: dropped meanwhile (the check when training is asked for holds no lock) */
		if (elevel >= ERROR)
			elog(ERROR, "gibbs_nb: labels table %u of model \"%s\" is gone", relid, model_name);
		return InvalidOid;
	}
	if (OidIsValid(owner) && relowner == owner)
		return owner;
	ereport(elevel,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("labels table %s of model \"%s\" is not owned by the model's owner",
					quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
											   get_rel_name(relid)), model_name),
			 errhint("Give it back to its owner (ALTER TABLE ... OWNER TO), or drop it: the next training makes it again.")));
	return InvalidOid;
}

void
gnb_restore_user(GnbPrivilegeState *state)
{
	SetUserIdAndSecContext(state->save_user, state->save_sec_context);
	AtEOXact_GUC(true, state->save_nestlevel);
}

/*
 * As the current user, with search_path pinned to pg_catalog, pg_temp until
 * gnb_restore_user: for the caller's statements that gnb_execute cannot run
 * (a cursor over the caller's table).
 */
void
gnb_pin_search_path(GnbPrivilegeState *state)
{
	GetUserIdAndSecContext(&state->save_user, &state->save_sec_context);
	state->save_nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp",
							 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE,
							 true, 0, false);
}

/*
 * Run one statement through SPI (which must be connected) and check its
 * result code.  GNB_AS_INTERNAL runs it as the extension's owner; GNB_AS_CALLER
 * as the current user, with row security, and search_path pinned all the
 * same: every name in the extension's SQL is qualified, and what is not
 * (a user's column or table, quoted) must not be looked up elsewhere.
 * Never read-only: it must see what this transaction wrote.
 */
void
gnb_execute(const char *sql, int nargs, Oid *types, Datum *values, const char *nulls,
			GnbRunAs as, int expected, long limit)
{
	GnbPrivilegeState priv;
	int			rc;

	if (as == GNB_AS_INTERNAL)
		gnb_become_internal(&priv);
	else
		gnb_pin_search_path(&priv);
	rc = nargs > 0 ? SPI_execute_with_args(sql, nargs, types, values, nulls, false, limit)
		: SPI_execute(sql, false, limit);
	if (rc != expected)
		elog(ERROR, "gibbs_nb: statement failed (%s): %s", SPI_result_code_string(rc), sql);
	gnb_restore_user(&priv);
}

/*
 * gnb_execute for a statement whose parameters are large values (nulls as
 * for gnb_execute): they are passed as parameters the planner may not fold into
 * constants.  SPI_execute_with_args marks them constant, and the planner
 * then copies each value into the plan, which doubled the memory of a
 * version's packed row as it was written.  Read at execution instead, the
 * values are used where they are.
 */
static void
execute_unfolded(const char *sql, int nargs, Oid *types, Datum *values, const char *nulls,
				 GnbRunAs as, int expected)
{
	GnbPrivilegeState priv;
	ParamListInfo params = makeParamList(nargs);
	SPIExecuteOptions options;
	int			rc;

	for (int i = 0; i < nargs; i++)
	{
		params->params[i].value = values[i];
		params->params[i].isnull = nulls != NULL && nulls[i] == 'n';
		params->params[i].pflags = 0;
		params->params[i].ptype = types[i];
	}
	memset(&options, 0, sizeof(options));
	options.params = params;
	options.read_only = false;
	if (as == GNB_AS_INTERNAL)
		gnb_become_internal(&priv);
	else
		gnb_pin_search_path(&priv);
	rc = SPI_execute_extended(sql, &options);
	if (rc != expected)
		elog(ERROR, "gibbs_nb: statement failed (%s): %s", SPI_result_code_string(rc), sql);
	gnb_restore_user(&priv);
	pfree(params);
}

/*
 * Keep a schema's name until the transaction ends: a row lock on its
 * pg_namespace row, which ALTER SCHEMA ... RENAME (and DROP SCHEMA) must wait
 * for.  A relation locked by OID and named from the catalogs for the
 * statements that follow is named by its schema too; without this the
 * schema's owner (with CREATE on the database) could rename the schema and
 * create another of that name holding a look-alike relation, which the next
 * statement by that name would reach, running the look-alike's triggers or
 * view as the caller.  A job's worker does not wait (nowait): the row may be
 * one its caller's open transaction altered (GRANT ... ON SCHEMA, then
 * gibbs_nb_train), and the caller is waiting for the worker; it fails with
 * 55P03 instead.  Connects to SPI itself (nested if connected).
 */
void
gnb_lock_namespace_name(Oid nspid, bool nowait)
{
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(nspid)};
	/* the worker locks its source before it takes the read's snapshot */
	bool		push = !ActiveSnapshotSet();
	bool		locked;

	if (push)
		PushActiveSnapshot(GetTransactionSnapshot());
	SPI_connect();
	gnb_execute(nowait ?
				"SELECT 1 FROM pg_catalog.pg_namespace WHERE oid OPERATOR(pg_catalog.=) $1 FOR SHARE SKIP LOCKED" :
				"SELECT 1 FROM pg_catalog.pg_namespace WHERE oid OPERATOR(pg_catalog.=) $1 FOR SHARE",
				1, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_SELECT, 0);
	locked = SPI_processed > 0;
	SPI_finish();
	if (push)
		PopActiveSnapshot();
	if (!locked)
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("schema \"%s\" is being altered by another transaction",
						get_namespace_name(nspid)),
				 errdetail("A gibbs_nb job does not wait for a schema whose relations it names."),
				 errhint("Commit the transaction that altered the schema (ALTER SCHEMA, GRANT ... ON SCHEMA), then train again.")));
}

/* The first column of the first row of the last gnb_execute, or *isnull. */
Datum
gnb_result_value(int col, bool *isnull)
{
	*isnull = true;
	if (SPI_processed == 0)
		return (Datum) 0;
	return SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, col, isnull);
}

/*
 * Run a statement whose $1 and $2 are a model's owner and name.  SPI
 * connected.
 */
static void
model_statement(const char *sql, const char *owner, const char *model_name, GnbRunAs as,
				int expected, long limit)
{
	Oid			types[2] = {TEXTOID, TEXTOID};
	Datum		values[2] = {CStringGetTextDatum(owner), CStringGetTextDatum(model_name)};

	gnb_execute(sql, 2, types, values, NULL, as, expected, limit);
}

/* The current user's name: what a model's owner column holds. */
char *
gnb_current_role_name(void)
{
	return GetUserNameFromId(GetUserId(), false);
}

/*
 * A hash of some identifiers, in hex: the identities of catalogs and
 * clusters are stored in rows every role may read, the system identifier is
 * not for every role to read.  out has IDENTITY_HEX_SIZE bytes.
 */
#define IDENTITY_HEX_SIZE 17

static void
identity_hex(const void *data, Size len, char *out)
{
	snprintf(out, IDENTITY_HEX_SIZE, "%016llx",
			 (unsigned long long) DatumGetUInt64(hash_any_extended((const unsigned char *) data, len, 0)));
}

/*
 * The cluster a role OID stored in gibbs_nb.owners belongs to: role OIDs are
 * the cluster's, the same in all its databases and across a pg_restore
 * --clean.  A hash of the system identifier (see identity_hex), which does
 * not change while the server runs: made once per process.
 */
const char *
gnb_cluster_identity(void)
{
	static char identity[IDENTITY_HEX_SIZE];

	if (identity[0] == '\0')
	{
		uint64		system_identifier = GetSystemIdentifier();

		identity_hex(&system_identifier, sizeof(system_identifier), identity);
	}
	return identity;
}

PG_FUNCTION_INFO_V1(gibbs_nb_cluster_identity);

/*
 * gibbs_nb.cluster_identity() returns text
 *
 * gnb_cluster_identity, for the extension's scripts and tests.
 */
Datum
gibbs_nb_cluster_identity(PG_FUNCTION_ARGS)
{
	PG_RETURN_TEXT_P(cstring_to_text(gnb_cluster_identity()));
}

/*
 * The role gibbs_nb.owners registers for an owner name, if its row was
 * written in this cluster (gnb_cluster_identity): true and
 * *role set (to a role that may since have been dropped), else false.  A
 * row of role_oid 0 (a name whose role was gone when it was registered) is
 * nobody's in any cluster: true, *role 0.  Read through its primary key,
 * with the active snapshot in a parallel operation (row security calls this
 * from parallel workers) and the latest one otherwise (an import registers
 * a name and reads it back in one transaction).  Only the extension's owner
 * writes the table.
 */
static bool
registered_owner_role(const char *owner, Oid *role)
{
	Oid			nspid = get_namespace_oid(GNB_SCHEMA, false);
	Oid			relid = get_relname_relid("owners", nspid);
	Oid			indexid = get_relname_relid("owners_pkey", nspid);
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData key;
	HeapTuple	tuple;
	Snapshot	snapshot;
	bool		found = false;

	/* none while the update script that makes it runs: names alone then */
	if (!OidIsValid(relid) || !OidIsValid(indexid))
		return false;
	rel = table_open(relid, AccessShareLock);
	snapshot = RegisterSnapshot(IsInParallelMode() ? GetActiveSnapshot() : GetLatestSnapshot());
	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_TEXTEQ, CStringGetTextDatum(owner));
	/* the index's collation, not ScanKeyInit's C: the descent must follow its order */
	key.sk_collation = TupleDescAttr(RelationGetDescr(rel), 0)->attcollation;
	scan = systable_beginscan(rel, indexid, true, snapshot, 1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
	{
		bool		null_role;
		bool		null_cluster;
		Oid			role_oid = DatumGetObjectId(heap_getattr(tuple, 2, RelationGetDescr(rel), &null_role));
		Datum		row_cluster = heap_getattr(tuple, 3, RelationGetDescr(rel), &null_cluster);

		if (!null_role && role_oid == InvalidOid)
			found = true;
		else if (!null_role && !null_cluster &&
				 strcmp(TextDatumGetCString(row_cluster), gnb_cluster_identity()) == 0)
			found = true;
		if (found)
			*role = role_oid;
	}
	systable_endscan(scan);
	UnregisterSnapshot(snapshot);
	table_close(rel, AccessShareLock);
	return found;
}

/*
 * The role a model's owner column means (see the file header): in the
 * cluster a name was registered in (gibbs_nb.owners, written as the name's
 * first job runs or first model is imported), the role registered then,
 * found by OID, so that a role renamed keeps its models and a new role
 * created under a dropped or renamed role's name gets none of them;
 * elsewhere (a row restored into another cluster, a Citus worker's copy of
 * the tables) the role of that name.  InvalidOid if that role does not
 * exist now.
 */
Oid
gnb_owner_role(const char *owner)
{
	Oid			role;

	if (strlen(owner) >= NAMEDATALEN)
		return InvalidOid;
	if (registered_owner_role(owner, &role))
		return OidIsValid(role) && SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(role)) ?
			role : InvalidOid;
	return get_role_oid(owner, true);
}

/* gnb_owner_role, an error (42704) if the role does not exist. */
Oid
gnb_owner_role_required(const char *owner)
{
	Oid			role = gnb_owner_role(owner);

	if (!OidIsValid(role))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("the owner of models stored under the name \"%s\" does not exist", owner)));
	return role;
}

/*
 * The role an owner name stands for (gnb_owner_role), if the current user
 * may write rows under the name (train, import a model): it must have that
 * role's privileges.  A role created under the name of a dropped or renamed
 * one, whose models are still stored under it, may not add to them (they
 * are not its own, and it could not see what it trained).  An error (42501)
 * if not.
 */
Oid
gnb_check_owner(const char *owner)
{
	Oid			role = gnb_owner_role(owner);

	if (!OidIsValid(role) || !has_privs_of_role(GetUserId(), role))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("the models stored under the name \"%s\" do not belong to you", owner),
				 errdetail("The name stands for a role whose privileges you do not have: a role of that name that had models or jobs was dropped or renamed, or you are no longer its member."),
				 errhint("A superuser can give the name's models to the role now of that name or delete them (gibbs_nb's documentation, Operations: \"A role dropped or renamed\").")));
	return role;
}

/*
 * Register an owner name in this cluster before rows are written under it
 * (a job's worker, once the job runs, in a transaction of its own; an
 * import): a first job or model of the name records the role the caller's
 * check found (role, from gnb_check_owner: by OID, so that a role renamed
 * or dropped and made again since is not taken for it), and a row restored
 * from another cluster is claimed again so.  Then gnb_check_owner again,
 * on what the table now says.  SPI connected.
 */
void
gnb_register_owner(const char *owner, Oid role)
{
	Oid			registered;

	if (!registered_owner_role(owner, &registered))
	{
		Oid			types[3] = {TEXTOID, OIDOID, TEXTOID};
		Datum		values[3] = {CStringGetTextDatum(owner), ObjectIdGetDatum(role),
								 CStringGetTextDatum(gnb_cluster_identity())};

		gnb_execute("INSERT INTO gibbs_nb.owners AS o (owner, role_oid, cluster) VALUES ($1, $2, $3) "
					"ON CONFLICT (owner) DO UPDATE SET role_oid = excluded.role_oid, cluster = excluded.cluster "
					"WHERE o.cluster OPERATOR(pg_catalog.<>) excluded.cluster "
					"AND o.role_oid OPERATOR(pg_catalog.<>) 0",
					3, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_INSERT, 0);
	}
	(void) gnb_check_owner(owner);
}

/*
 * Of the owners that have a model of this name and whose rows the current
 * role can see, the one the name means (see the file header), or NULL if
 * none.  A name two of them could mean is an error (42725), never a guess.
 */
const char *
gnb_choose_owner(const char *model_name, char **owners, int n)
{
	const char *me = gnb_current_role_name();
	const char *chosen = NULL;
	int			n_chosen = 0;
	StringInfoData others;

	for (int i = 0; i < n; i++)
		if (strcmp(owners[i], me) == 0)
			return owners[i];
	if (superuser())
		return NULL;
	initStringInfo(&others);
	for (int i = 0; i < n; i++)
	{
		Oid			role = gnb_owner_role(owners[i]);

		if (OidIsValid(role) && has_privs_of_role(GetUserId(), role))
		{
			appendStringInfo(&others, "%s%s", n_chosen ? ", " : "", quote_identifier(owners[i]));
			chosen = owners[i];
			n_chosen++;
		}
	}
	if (n_chosen > 1)
		ereport(ERROR,
				(errcode(ERRCODE_AMBIGUOUS_PARAMETER),
				 errmsg("model name \"%s\" is ambiguous", model_name),
				 errdetail("Roles %s each have a model of that name, and you have the privileges of each.",
						   others.data),
				 errhint("SET ROLE to the owner whose model you mean, or train a model of your own under that name.")));
	return chosen;
}

/*
 * The owner of the model `model_name` names for the current role (see
 * gnb_choose_owner), or with missing_ok NULL if there is none; otherwise a
 * model it does not name is "does not exist", whether or not another role
 * has one.  Reads as the caller, so row security has the last word.
 * SPI must be connected.
 */
const char *
gnb_resolve_model_owner(const char *model_name, bool missing_ok)
{
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(model_name)};
	char	  **owners;
	const char *owner;

	gnb_execute("SELECT DISTINCT owner FROM gibbs_nb.models "
				"WHERE model_name OPERATOR(pg_catalog.=) $1",
				1, types, values, NULL, GNB_AS_CALLER, SPI_OK_SELECT, 0);
	owners = palloc(sizeof(char *) * (SPI_processed + 1));
	for (uint64 i = 0; i < SPI_processed; i++)
		owners[i] = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
	owner = gnb_choose_owner(model_name, owners, (int) SPI_processed);
	if (owner == NULL && !missing_ok)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("model \"%s\" does not exist", model_name)));
	return owner;
}

/*
 * The catalogs an OID stored in gibbs_nb.models belongs to: this cluster (its
 * system identifier), this database and this installation of the extension
 * (its OID: pg_restore --clean into the same database drops and creates it
 * again, with new OIDs for the relations it restores).  A hash of the three,
 * in hex: the system identifier is not for every role to read.
 */
char *
gnb_catalog_identity(void)
{
	struct
	{
		uint64		system_identifier;
		Oid			database;
		Oid			extension;
	}			id;

	char	   *identity = palloc(IDENTITY_HEX_SIZE);

	memset(&id, 0, sizeof(id));
	id.system_identifier = GetSystemIdentifier();
	id.database = MyDatabaseId;
	id.extension = get_extension_oid("gibbs_nb", false);
	identity_hex(&id, sizeof(id), identity);
	return identity;
}

PG_FUNCTION_INFO_V1(gibbs_nb_catalog_identity);
PG_FUNCTION_INFO_V1(gibbs_nb_model_relation);

/*
 * gibbs_nb.catalog_identity() returns text
 *
 * What gibbs_nb.models.catalog holds for rows written here and now.
 */
Datum
gibbs_nb_catalog_identity(PG_FUNCTION_ARGS)
{
	PG_RETURN_TEXT_P(cstring_to_text(gnb_catalog_identity()));
}

/*
 * gibbs_nb.model_relation(relid oid, name text, catalog text, owner text)
 * returns oid
 *
 * The relation a model's row means by (relid, name): relid if the row was
 * written in these catalogs (it follows renames; a relation since dropped
 * gives its OID all the same, for the caller to find missing); otherwise,
 * for a restored row, the relation of that qualified name now, but only if
 * it belongs to the model's owner: a name another role could take (one the
 * dump left out, say) must not lead a deploy, a drop or a retrain to that
 * role's relation, whose triggers, domains or view functions would run as
 * the model's owner or the retraining role.  NULL if none, and for no
 * relation (relid 0 and no name: an imported version's labels table).  The
 * caller locks the relation by OID and checks it before use.
 */
Datum
gibbs_nb_model_relation(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_ARGISNULL(0) ? InvalidOid : PG_GETARG_OID(0);
	char	   *name;
	Oid			found;
	Oid			owner;

	/* the identity once per call site: a query reads many rows */
	if (fcinfo->flinfo->fn_extra == NULL)
		fcinfo->flinfo->fn_extra = MemoryContextStrdup(fcinfo->flinfo->fn_mcxt,
													   gnb_catalog_identity());
	if (!PG_ARGISNULL(2) &&
		strcmp(text_to_cstring(PG_GETARG_TEXT_PP(2)), (char *) fcinfo->flinfo->fn_extra) == 0)
	{
		if (!OidIsValid(relid))
			PG_RETURN_NULL();
		PG_RETURN_OID(relid);
	}
	if (PG_ARGISNULL(1) || PG_ARGISNULL(3))
		PG_RETURN_NULL();
	name = text_to_cstring(PG_GETARG_TEXT_PP(1));
	if (name[0] == '\0')
		PG_RETURN_NULL();
	/* nothing for a caller who may not act for the owner (it would tell who that is) */
	owner = gnb_owner_role(text_to_cstring(PG_GETARG_TEXT_PP(3)));
	if (!OidIsValid(owner) || !has_privs_of_role(GetUserId(), owner))
		PG_RETURN_NULL();
	found = RangeVarGetRelid(makeRangeVarFromNameList(gnb_qualified_name_list(name)),
							 NoLock, true);
	if (!OidIsValid(found) || relation_owner(found) != owner)
		PG_RETURN_NULL();
	PG_RETURN_OID(found);
}

/* A model row's relation, as SQL: relid and name columns of gibbs_nb.models */
#define MODEL_RELATION(relid, name) \
	"gibbs_nb.model_relation(" relid ", " name ", catalog, owner)"

/*
 * Is relid the labels table that training created for this model?
 * SPI must be connected.
 */
bool
gnb_labels_table_registered(const char *owner, const char *model_name, Oid relid)
{
	Oid			types[3] = {TEXTOID, TEXTOID, OIDOID};
	Datum		values[3] = {CStringGetTextDatum(owner), CStringGetTextDatum(model_name),
	ObjectIdGetDatum(relid)};

	gnb_execute("SELECT 1 FROM gibbs_nb.models WHERE owner OPERATOR(pg_catalog.=) $1 "
				"AND model_name OPERATOR(pg_catalog.=) $2 "
				"AND " MODEL_RELATION("labels_relid", "labels_table") " OPERATOR(pg_catalog.=) $3 LIMIT 1",
				3, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_SELECT, 1);
	return SPI_processed > 0;
}

static void
job_lock_tag(LOCKTAG *tag, int64 job_id)
{
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, (uint32) ((uint64) job_id >> 32),
						 (uint32) job_id, JOB_LOCK_CLASS);
}

/*
 * The lock each worker of a role holds (shared) while its job runs: in no
 * database, so that counting its holders counts the role's jobs in the
 * whole cluster (gibbs_nb.max_jobs_per_role).
 */
static void
role_lock_tag(LOCKTAG *tag, Oid role)
{
	SET_LOCKTAG_ADVISORY(*tag, InvalidOid, role, 0, ROLE_LOCK_CLASS);
}

/*
 * pg_advisory_unlock_all() releases every session lock of the advisory lock
 * method the process holds, whatever the tag: in a job's worker, the job,
 * role and chain-slot locks above, which are what count the job as running.
 * User code runs there (the source's views and functions, its types' input
 * and output, the labels table's triggers): one call dropped them, and with
 * them every job limit, the one job per model, gibbs_nb_cancel and DROP
 * EXTENSION's guard, for as many jobs as its role could start.  A job's
 * worker refuses the call: every call the executor sets up, of a built-in
 * function too, passes the object access hook (OAT_FUNCTION_EXECUTE) before
 * it runs.  No other SQL releases those locks: DISCARD ALL cannot run in a
 * function, and pg_advisory_unlock takes only the tags SQL can name.
 */
static object_access_hook_type prev_object_access_hook = NULL;

static void
job_object_access(ObjectAccessType access, Oid classId, Oid objectId, int subId, void *arg)
{
	if (access == OAT_FUNCTION_EXECUTE && classId == ProcedureRelationId &&
		objectId == F_PG_ADVISORY_UNLOCK_ALL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("pg_advisory_unlock_all() cannot be called in a gibbs_nb job"),
				 errdetail("The job's worker holds session locks that count the job as running.")));
	if (prev_object_access_hook != NULL)
		prev_object_access_hook(access, classId, objectId, subId, arg);
}

/* Installed by a job's worker before it takes its locks, for its lifetime. */
void
gnb_guard_job_locks(void)
{
	prev_object_access_hook = object_access_hook;
	object_access_hook = job_object_access;
}

/* Whether this process holds its job's lock (it is a worker that does). */
static bool job_lock_held = false;
/* ... and the role lock of the role its job runs as */
static Oid	role_lock_role = InvalidOid;

/*
 * Called by a job's worker before it registers the job: session locks it
 * holds until the job's outcome is recorded (gnb_release_job_lock), or until
 * it exits, however it exits.  The job lock's being held is what "the job is
 * running" means, to everyone, whatever their privileges: to the jobs view,
 * to the job limits, to DROP EXTENSION; the role lock (role: the role the
 * job runs as) is what the per-role limit counts.
 */
void
gnb_hold_job_lock(int64 job_id, Oid role)
{
	LOCKTAG		tag;

	job_lock_tag(&tag, job_id);
	(void) LockAcquire(&tag, ExclusiveLock, true, false);
	job_lock_held = true;
	role_lock_tag(&tag, role);
	(void) LockAcquire(&tag, ShareLock, true, false);
	role_lock_role = role;
}

/*
 * Called by the worker once its job's outcome is recorded, before it tells
 * its caller: a call that returns has a job that no longer counts as running.
 */
void
gnb_release_job_lock(int64 job_id)
{
	LOCKTAG		tag;

	gnb_release_chain_slots();
	if (OidIsValid(role_lock_role))
	{
		role_lock_tag(&tag, role_lock_role);
		LockRelease(&tag, ShareLock, true);
		role_lock_role = InvalidOid;
	}
	if (!job_lock_held)
		return;
	job_lock_tag(&tag, job_id);
	LockRelease(&tag, ExclusiveLock, true);
	job_lock_held = false;
}

/* Does a live worker hold this job's lock? */
bool
gnb_job_worker_alive(int64 job_id)
{
	LOCKTAG		tag;
	LockAcquireResult res;

	job_lock_tag(&tag, job_id);
	res = LockAcquire(&tag, ShareLock, false, true);
	if (res == LOCKACQUIRE_NOT_AVAIL)
		return true;
	LockRelease(&tag, ShareLock, false);
	return false;
}

PG_FUNCTION_INFO_V1(gibbs_nb_job_worker_alive);
PG_FUNCTION_INFO_V1(gibbs_nb_has_privileges_of);

/*
 * gibbs_nb.job_worker_alive(job_id bigint) returns boolean
 *
 * Whether the job's worker is running; used by the gibbs_nb_jobs view and
 * when stale 'running' rows are put right.  Everyone may call it (the view
 * runs as whoever queries it), so it answers only for a job whose row the
 * caller may see: false for any other, running or not, so that probing job
 * ids tells a role nothing about other roles' jobs.
 */
Datum
gibbs_nb_job_worker_alive(PG_FUNCTION_ARGS)
{
	int64		job_id = PG_GETARG_INT64(0);
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(job_id)};
	bool		visible;

	SPI_connect();
	gnb_execute("SELECT 1 FROM gibbs_nb.jobs WHERE job_id OPERATOR(pg_catalog.=) $1",
				1, types, values, NULL, GNB_AS_CALLER, SPI_OK_SELECT, 1);
	visible = SPI_processed > 0;
	SPI_finish();
	PG_RETURN_BOOL(visible && gnb_job_worker_alive(job_id));
}

PG_FUNCTION_INFO_V1(gibbs_nb_job_worker_lost);

/*
 * gibbs_nb.job_worker_lost(job_id bigint) returns boolean
 *
 * Whether the job's row says 'running' though no worker is left to finish
 * it (a restart, a crash): what the gibbs_nb_jobs view shows as failed, and
 * what gnb_reconcile_jobs puts right.  The lock is looked at first, and the
 * row read after it with the latest snapshot, not the statement's: a worker
 * commits its job's outcome before it lets go of the lock, so a row read
 * after the lock was found free shows the outcome of a job that ended.  Read
 * the other way round (the row from the statement's snapshot, the lock
 * now), a job that ends in between would be taken for lost.  As the caller,
 * so that a job the caller may not see is never lost to it.
 */
Datum
gibbs_nb_job_worker_lost(PG_FUNCTION_ARGS)
{
	int64		job_id = PG_GETARG_INT64(0);
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(job_id)};
	GnbPrivilegeState priv;
	SPIPlanPtr	plan;
	bool		lost;
	bool		isnull;
	Datum		status;
	int			rc;

	if (gnb_job_worker_alive(job_id))
		PG_RETURN_BOOL(false);
	SPI_connect();
	gnb_pin_search_path(&priv);
	plan = SPI_prepare("SELECT j.status OPERATOR(pg_catalog.=) 'running' FROM gibbs_nb.jobs j "
					   "WHERE j.job_id OPERATOR(pg_catalog.=) $1",
					   1, types);
	if (plan == NULL)
		elog(ERROR, "gibbs_nb: could not prepare the job's status query: %s",
			 SPI_result_code_string(SPI_result));
	/* the latest snapshot, whatever the transaction's isolation level */
	rc = SPI_execute_snapshot(plan, values, NULL, GetLatestSnapshot(), InvalidSnapshot,
							  true, false, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "gibbs_nb: could not read the job's status (%s)", SPI_result_code_string(rc));
	gnb_restore_user(&priv);
	status = gnb_result_value(1, &isnull);	/* no row: null */
	lost = !isnull && DatumGetBool(status);
	SPI_finish();
	PG_RETURN_BOOL(lost);
}

/*
 * gibbs_nb.has_privileges_of(owner text) returns boolean
 *
 * Whether the current user has the privileges of the role an owner name
 * stands for (gnb_owner_role: the role registered for the name in this
 * cluster, else the role of that name): the row security policy of every
 * gibbs_nb table.  A name that stands for no role (its role dropped, or not
 * restored) is nobody's: false, not an error, so that one such row never
 * breaks a query.
 *
 * The policy is this call alone, with no subquery (Citus refuses policies
 * with subqueries on its tables), so it runs once per row: the answers are
 * kept in fn_extra, for the query's life, keyed by the user asking and the
 * name, the last one first, and a table's rows, mostly of a few owners,
 * cost a comparison each; a name not kept is looked up in gibbs_nb.owners
 * (its primary key).  Role membership cannot change within a query (catalog changes of
 * other sessions are seen at the next command).
 */
#define PRIVILEGE_ANSWERS 8

typedef struct PrivilegeAnswer
{
	Oid			user;
	int			len;			/* -1: nothing kept here yet */
	bool		result;
	char		name[NAMEDATALEN];
} PrivilegeAnswer;

typedef struct PrivilegeAnswers
{
	int			last;			/* the answer given last */
	int			next;			/* the one to replace next */
	PrivilegeAnswer answer[PRIVILEGE_ANSWERS];
} PrivilegeAnswers;

Datum
gibbs_nb_has_privileges_of(PG_FUNCTION_ARGS)
{
	text	   *owner_text = PG_GETARG_TEXT_PP(0);
	const char *name = VARDATA_ANY(owner_text);
	int			len = VARSIZE_ANY_EXHDR(owner_text);
	Oid			user = GetUserId();
	PrivilegeAnswers *kept = (PrivilegeAnswers *) fcinfo->flinfo->fn_extra;
	PrivilegeAnswer *a;
	char	   *owner;
	Oid			role;
	bool		result;

	/* role names are shorter than NAMEDATALEN: a longer one is no role */
	if (len >= NAMEDATALEN)
		PG_RETURN_BOOL(false);
	if (kept == NULL)
	{
		kept = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(PrivilegeAnswers));
		for (int i = 0; i < PRIVILEGE_ANSWERS; i++)
			kept->answer[i].len = -1;
		fcinfo->flinfo->fn_extra = kept;
	}
	for (int k = 0; k < PRIVILEGE_ANSWERS; k++)
	{
		int			i = (kept->last + k) % PRIVILEGE_ANSWERS;

		a = &kept->answer[i];
		if (a->len == len && a->user == user && memcmp(a->name, name, len) == 0)
		{
			kept->last = i;
			PG_RETURN_BOOL(a->result);
		}
	}
	owner = text_to_cstring(owner_text);
	role = gnb_owner_role(owner);
	result = OidIsValid(role) && has_privs_of_role(user, role);
	pfree(owner);
	a = &kept->answer[kept->next];
	kept->last = kept->next;
	kept->next = (kept->next + 1) % PRIVILEGE_ANSWERS;
	a->user = user;
	a->len = len;
	a->result = result;
	memcpy(a->name, name, len);
	PG_RETURN_BOOL(result);
}

/*
 * Mark failed the jobs left 'running' by a worker that is gone
 * (an immediate shutdown, a crash): their worker never recorded an outcome.
 * The gibbs_nb_jobs view already shows them so; this puts the rows right.
 *
 * Rows another transaction has locked are skipped, here and in
 * gnb_prune_jobs: both run while training starts, the caller holding the
 * cluster-wide launch lock, and a role's own transaction left open after
 * deleting its finished jobs' rows (or after a prune of its own) would
 * otherwise hold every role's training until it ended.  What is skipped is
 * put right by a later call.  SPI must be connected.
 */
void
gnb_reconcile_jobs(void)
{
	gnb_execute("UPDATE gibbs_nb.jobs j SET status = 'failed', "
				"finished_at = pg_catalog.now(), sqlstate = '57P01', "
				"message = 'the job''s worker exited without finishing it (server restart or crash)' "
				"WHERE j.job_id OPERATOR(pg_catalog.=) ANY (ARRAY("
				"SELECT l.job_id FROM gibbs_nb.jobs l "
				"WHERE l.status OPERATOR(pg_catalog.=) 'running' "
				"AND gibbs_nb.job_worker_lost(l.job_id) FOR UPDATE SKIP LOCKED))",
				0, NULL, NULL, NULL, GNB_AS_INTERNAL, SPI_OK_UPDATE, 0);
}

/*
 * The job that is training this model now, or 0: a job whose worker is gone
 * is not (gnb_reconcile_jobs may have skipped its row).  SPI connected.
 */
int64
gnb_running_job(const char *owner, const char *model_name)
{
	bool		isnull;
	Datum		job;

	model_statement("SELECT j.job_id FROM gibbs_nb.jobs j "
					"WHERE j.owner OPERATOR(pg_catalog.=) $1 "
					"AND j.model_name OPERATOR(pg_catalog.=) $2 "
					"AND j.status OPERATOR(pg_catalog.=) 'running' "
					"AND NOT gibbs_nb.job_worker_lost(j.job_id) "
					"ORDER BY j.job_id LIMIT 1",
					owner, model_name, GNB_AS_INTERNAL, SPI_OK_SELECT, 1);
	job = gnb_result_value(1, &isnull);
	return isnull ? 0 : DatumGetInt64(job);
}

/*
 * The launch lock: one cluster-wide lock that a caller holds from checking
 * the job limits until its worker has registered its job (or failed to
 * start), so that two calls at the same instant cannot both pass a bound
 * that has room for one.  A session lock, because the caller's transaction
 * may go on waiting for the job; released explicitly, on errors too.
 */
static bool launch_lock_held = false;

static void
launch_lock_tag(LOCKTAG *tag)
{
	SET_LOCKTAG_ADVISORY(*tag, InvalidOid, 0, 0, LAUNCH_LOCK_CLASS);
}

void
gnb_launch_lock_acquire(void)
{
	LOCKTAG		tag;

	launch_lock_tag(&tag);
	(void) LockAcquire(&tag, ExclusiveLock, true, false);
	launch_lock_held = true;
}

void
gnb_launch_lock_release(void)
{
	LOCKTAG		tag;

	if (!launch_lock_held)
		return;
	launch_lock_tag(&tag);
	LockRelease(&tag, ExclusiveLock, true);
	launch_lock_held = false;
}

/*
 * How many processes of the cluster hold a lock of ours of this class in
 * this mode (a job's lock, a role's lock), counted from the lock table, so
 * that no other database's table is needed.  With `role` valid, only the
 * locks of that role (their tag's second field; the first is no database).
 */
static int
count_lock_holders(uint16 lock_class, Oid role, LOCKMODE mode)
{
	LockData   *data = GetLockStatusData();
	int			n = 0;

	for (int i = 0; i < data->nelements; i++)
	{
		const LockInstanceData *l = &data->locks[i];

		if (l->locktag.locktag_type == LOCKTAG_ADVISORY &&
			l->locktag.locktag_lockmethodid == USER_LOCKMETHOD &&
			l->locktag.locktag_field4 == lock_class &&
			(!OidIsValid(role) ||
			 (l->locktag.locktag_field1 == InvalidOid && l->locktag.locktag_field2 == role)) &&
			(l->holdMask & LOCKBIT_ON(mode)) != 0)
			n++;
	}
	return n;
}

/*
 * A chain worker's slot: held, shared, by the job's worker for each chain
 * worker it may start (the third field tells them apart), in no database;
 * the second field is the role the job runs as.
 */
static void
chain_lock_tag(LOCKTAG *tag, Oid role, int32 chain)
{
	SET_LOCKTAG_ADVISORY(*tag, InvalidOid, role, (uint32) chain, CHAIN_LOCK_CLASS);
}

/* The chain slots this worker holds (chain_lock_tag's 1 .. n) */
static int32 chain_slots_held = 0;

/*
 * How many chain workers, of the `wanted` a job of this worker asks for, it
 * may start: chain workers take job slots that are free.  The workers of
 * gibbs_nb in the cluster (jobs' and chains') stay within max_jobs, and
 * those of the job's role within max_jobs_per_role (the caller's
 * gibbs_nb.max_jobs and gibbs_nb.max_jobs_per_role, that admitted the job),
 * counting the ones granted; the chains beyond run in the job's own worker.
 * Jobs are admitted counting jobs only, so chains never keep a job from
 * starting.  Without this, one role's two jobs of five chains took every
 * background worker slot of the cluster, and other roles' training failed
 * (53400) and parallel query went without workers.  The slots are held as locks by this
 * worker (counted with the jobs' locks, under the launch lock, so that two
 * jobs cannot both take the last one) until gnb_release_chain_slots or its
 * exit.
 */
int32
gnb_reserve_chain_slots(int32 wanted, int max_jobs, int max_jobs_per_role)
{
	volatile int32 granted = wanted;
	int			n;

	if (wanted <= 0 || !OidIsValid(role_lock_role))
		return 0;
	gnb_launch_lock_acquire();
	PG_TRY();
	{
		if (max_jobs > 0)
		{
			n = count_lock_holders(JOB_LOCK_CLASS, InvalidOid, ExclusiveLock) +
				count_lock_holders(CHAIN_LOCK_CLASS, InvalidOid, ShareLock);
			granted = Min(granted, Max(max_jobs - n, 0));
		}
		if (max_jobs_per_role > 0)
		{
			n = count_lock_holders(ROLE_LOCK_CLASS, role_lock_role, ShareLock) +
				count_lock_holders(CHAIN_LOCK_CLASS, role_lock_role, ShareLock);
			granted = Min(granted, Max(max_jobs_per_role - n, 0));
		}
		for (int32 c = chain_slots_held + 1; c <= chain_slots_held + granted; c++)
		{
			LOCKTAG		tag;

			chain_lock_tag(&tag, role_lock_role, c);
			(void) LockAcquire(&tag, ShareLock, true, false);
		}
		chain_slots_held += granted;
	}
	PG_FINALLY();
	{
		gnb_launch_lock_release();
	}
	PG_END_TRY();
	return granted;
}

/* Let go of the chain slots this worker holds (its chains have ended). */
void
gnb_release_chain_slots(void)
{
	for (int32 c = 1; c <= chain_slots_held; c++)
	{
		LOCKTAG		tag;

		chain_lock_tag(&tag, role_lock_role, c);
		LockRelease(&tag, ShareLock, true);
	}
	chain_slots_held = 0;
}

/* Jobs whose worker is alive, in every database of the cluster. */
int
gnb_count_live_jobs(void)
{
	return count_lock_holders(JOB_LOCK_CLASS, InvalidOid, ExclusiveLock);
}

/*
 * Jobs of this database whose row says running and whose worker is alive:
 * a job whose outcome is recorded does not count, even in the instant
 * before its worker lets go of its lock.  SPI connected.
 */
int64
gnb_count_running_jobs_here(void)
{
	bool		isnull;

	gnb_execute("SELECT pg_catalog.count(*) FROM gibbs_nb.jobs "
				"WHERE status OPERATOR(pg_catalog.=) 'running' "
				"AND gibbs_nb.job_worker_alive(job_id)",
				0, NULL, NULL, NULL, GNB_AS_INTERNAL, SPI_OK_SELECT, 1);
	return DatumGetInt64(gnb_result_value(1, &isnull));
}

/*
 * Jobs that run as `role` and whose worker is alive, in every database of
 * the cluster, so that a role cannot pass its bound by starting jobs in
 * other databases.
 */
int
gnb_count_role_jobs(Oid role)
{
	return count_lock_holders(ROLE_LOCK_CLASS, role, ShareLock);
}

/*
 * Delete the rows of jobs that ended more than gibbs_nb.job_retention ago
 * (their traces went with their versions, or never existed).  SPI connected.
 */
void
gnb_prune_jobs(void)
{
	Oid			types[1] = {FLOAT8OID};
	Datum		values[1] = {Float8GetDatum((double) gnb_job_retention_s)};

	if (gnb_job_retention_s <= 0)
		return;
	/*
	 * The jobs to prune, locked (those another transaction holds are
	 * skipped: see gnb_reconcile_jobs); the traces of those that no version
	 * needs (failed ones); their rows.
	 */
	gnb_execute("WITH expired AS (SELECT job_id FROM gibbs_nb.jobs "
				"WHERE status OPERATOR(pg_catalog.<>) 'running' "
				/* OPERATOR() gives every operator one precedence: parenthesise */
				"AND finished_at OPERATOR(pg_catalog.<) (pg_catalog.now() OPERATOR(pg_catalog.-) "
				"pg_catalog.make_interval(secs => $1)) FOR UPDATE SKIP LOCKED), "
				"traces AS (DELETE FROM gibbs_nb.trace t USING expired e "
				"WHERE t.job_id OPERATOR(pg_catalog.=) e.job_id "
				"AND NOT EXISTS (SELECT 1 FROM gibbs_nb.models m "
				"WHERE m.job_id OPERATOR(pg_catalog.=) e.job_id)) "
				"DELETE FROM gibbs_nb.jobs j USING expired e "
				"WHERE j.job_id OPERATOR(pg_catalog.=) e.job_id",
				1, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_DELETE, 0);
}

/* ---------- a job's row, written by its worker ---------- */

/*
 * Run one statement on a job's row as the extension's owner, in a
 * transaction of its own unless one is open (the worker samples with none).
 */
static void
job_row_statement(const char *sql, int nargs, Oid *types, Datum *values, int expected)
{
	bool		own_xact = !IsTransactionState();
	MemoryContext caller_cxt = CurrentMemoryContext;

	if (own_xact)
	{
		StartTransactionCommand();
		PushActiveSnapshot(GetTransactionSnapshot());
	}
	SPI_connect();
	gnb_execute(sql, nargs, types, values, NULL, GNB_AS_INTERNAL, expected, 0);
	SPI_finish();
	if (own_xact)
	{
		PopActiveSnapshot();
		CommitTransactionCommand();
		MemoryContextSwitchTo(caller_cxt);
	}
}

/* The job's row, status running, as its worker (pid) starts it. */
void
gnb_store_job_started(const GnbJobParams *p, int pid)
{
	Oid			types[8] = {INT8OID, TEXTOID, TEXTOID, INT4OID, INT4OID, TEXTOID, INT4OID, TEXTOID};
	Datum		values[8];

	values[0] = Int64GetDatum(p->job_id);
	values[1] = CStringGetTextDatum(p->model_name);
	values[2] = CStringGetTextDatum(p->model_owner);
	values[3] = Int32GetDatum(p->sampler.sweeps);
	values[4] = Int32GetDatum(p->sampler.chains);
	values[5] = CStringGetTextDatum(p->source_display);
	values[6] = Int32GetDatum(pid);
	/* the role the worker acts as: what the job's reads are checked against */
	values[7] = CStringGetTextDatum(gnb_current_role_name());
	job_row_statement("INSERT INTO gibbs_nb.jobs (job_id, model_name, owner, status, sweeps, chains, "
					  "source, worker_pid, worker_user, started_at) "
					  "VALUES ($1, $2, $3, 'running', $4, $5, $6, $7, $8::pg_catalog.name, pg_catalog.now())",
					  8, types, values, SPI_OK_INSERT);
}

/*
 * Where a running job is (chain, 0-based here; the row counts chains from 1,
 * as gibbs_nb.trace and pg_stat_activity do) and its log joint.
 */
void
gnb_store_job_progress(int64 job_id, int32 chain, int32 sweep, double log_joint)
{
	Oid			types[4] = {INT8OID, INT4OID, INT4OID, FLOAT8OID};
	Datum		values[4] = {Int64GetDatum(job_id), Int32GetDatum(chain + 1), Int32GetDatum(sweep),
	Float8GetDatum(log_joint)};

	job_row_statement("UPDATE gibbs_nb.jobs SET chain = $2, sweep = $3, log_likelihood = $4 "
					  "WHERE job_id OPERATOR(pg_catalog.=) $1", 4, types, values, SPI_OK_UPDATE);
}

/* A job that published `version`: in the publishing transaction. */
void
gnb_store_job_succeeded(const GnbJobParams *p, int32 version, double log_likelihood,
						double read_seconds, double sample_seconds, double publish_seconds)
{
	Oid			types[8] = {INT8OID, INT4OID, FLOAT8OID, INT4OID, INT4OID,
	FLOAT8OID, FLOAT8OID, FLOAT8OID};
	Datum		values[8];

	values[0] = Int64GetDatum(p->job_id);
	values[1] = Int32GetDatum(version);
	values[2] = Float8GetDatum(log_likelihood);
	values[3] = Int32GetDatum(p->sampler.sweeps);
	values[4] = Int32GetDatum(p->sampler.chains);	/* the last, from 1 */
	values[5] = Float8GetDatum(read_seconds);
	values[6] = Float8GetDatum(sample_seconds);
	values[7] = Float8GetDatum(publish_seconds);
	job_row_statement("UPDATE gibbs_nb.jobs SET status = 'succeeded', version = $2, "
					  "log_likelihood = $3, sweep = $4, chain = $5, read_seconds = $6, "
					  "sample_seconds = $7, publish_seconds = $8, "
					  "finished_at = pg_catalog.clock_timestamp() WHERE job_id OPERATOR(pg_catalog.=) $1",
					  8, types, values, SPI_OK_UPDATE);
}

/*
 * A job that failed or was cancelled: an upsert, since the row does not
 * exist if registering it failed; it touches only this worker's own row,
 * and only while it says 'running' (an error after the job's success was
 * committed leaves the row as it is: the version was published).
 */
void
gnb_store_job_ended(const GnbJobParams *p, const char *status, const char *message,
					const char *sqlstate, int pid)
{
	Oid			types[10] = {INT8OID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID,
	INT4OID, INT4OID, TEXTOID, INT4OID};
	Datum		values[10];

	values[0] = Int64GetDatum(p->job_id);
	values[1] = CStringGetTextDatum(status);
	values[2] = CStringGetTextDatum(message);
	values[3] = CStringGetTextDatum(sqlstate);
	values[4] = CStringGetTextDatum(p->model_name);
	values[5] = CStringGetTextDatum(p->model_owner);
	values[6] = Int32GetDatum(p->sampler.sweeps);
	values[7] = Int32GetDatum(p->sampler.chains);
	values[8] = CStringGetTextDatum(p->source_display);
	values[9] = Int32GetDatum(pid);
	job_row_statement("INSERT INTO gibbs_nb.jobs (job_id, status, message, sqlstate, "
					  "model_name, owner, sweeps, chains, source, worker_pid, finished_at) "
					  "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, pg_catalog.clock_timestamp()) "
					  "ON CONFLICT (job_id) DO UPDATE SET status = excluded.status, "
					  "message = excluded.message, sqlstate = excluded.sqlstate, "
					  "finished_at = excluded.finished_at "
					  "WHERE gibbs_nb.jobs.worker_pid OPERATOR(pg_catalog.=) excluded.worker_pid "
					  "AND gibbs_nb.jobs.owner OPERATOR(pg_catalog.=) excluded.owner "
					  "AND gibbs_nb.jobs.model_name OPERATOR(pg_catalog.=) excluded.model_name "
					  "AND gibbs_nb.jobs.status OPERATOR(pg_catalog.=) 'running'",
					  10, types, values, SPI_OK_INSERT);
}

/*
 * A job as the caller may see it (row security): false if it may not;
 * else whether it runs and its worker's pid (0 if none).  SPI connected.
 */
bool
gnb_store_job_lookup(int64 job_id, bool *running, int *pid)
{
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(job_id)};
	bool		isnull;
	Datum		d;

	gnb_execute("SELECT status OPERATOR(pg_catalog.=) 'running', worker_pid "
				"FROM gibbs_nb.jobs WHERE job_id OPERATOR(pg_catalog.=) $1",
				1, types, values, NULL, GNB_AS_CALLER, SPI_OK_SELECT, 1);
	if (SPI_processed == 0)
		return false;
	*running = DatumGetBool(gnb_result_value(1, &isnull));
	d = gnb_result_value(2, &isnull);
	*pid = isnull ? 0 : DatumGetInt32(d);
	return true;
}

/*
 * Delete the row of a job that has ended, and its trace unless a version
 * keeps it (the trace of a version's job goes with the version).  The caller
 * has checked that it may see the job.  True if the row was deleted.  SPI
 * connected.
 */
bool
gnb_store_delete_job(int64 job_id)
{
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(job_id)};

	gnb_execute("DELETE FROM gibbs_nb.jobs WHERE job_id OPERATOR(pg_catalog.=) $1 "
				"AND status OPERATOR(pg_catalog.<>) 'running'",
				1, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_DELETE, 0);
	if (SPI_processed == 0)
		return false;
	gnb_execute("DELETE FROM gibbs_nb.trace WHERE job_id OPERATOR(pg_catalog.=) $1 "
				"AND NOT EXISTS (SELECT 1 FROM gibbs_nb.models m "
				"WHERE m.job_id OPERATOR(pg_catalog.=) $1)",
				1, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_DELETE, 0);
	return true;
}

/* A new job's id. */
int64
gnb_store_next_job_id(void)
{
	return nextval_internal(get_relname_relid("job_id_seq", get_namespace_oid(GNB_SCHEMA, false)),
							false);
}

/* ---------- a model version's rows ---------- */

/*
 * Arrays to pass many rows' values as one statement parameter.  They are
 * built in place, byte for byte what construct_array makes, without its
 * array of Datums (and for text, one palloc'd value per element) beside the
 * result: a version's vocabulary and log theta-hat are the largest values a
 * job publishes, and these copies were most of its memory then.
 */

/*
 * A zeroed one-dimensional array of n elements (n > 0, at most
 * MaxArraySize) of type elmtype, with data_size bytes for them and no null
 * bitmap; the caller fills ARR_DATA_PTR.  The whole must fit an allocation.
 */
static ArrayType *
new_1d_array(Oid elmtype, int n, Size data_size)
{
	Size		size = ARR_OVERHEAD_NONULLS(1) + data_size;
	ArrayType  *a;

	if (!AllocSizeIsValid(size))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("array size exceeds the maximum allowed (%d)", (int) MaxAllocSize)));
	a = (ArrayType *) palloc0(size);
	SET_VARSIZE(a, size);
	a->ndim = 1;
	a->dataoffset = 0;
	a->elemtype = elmtype;
	ARR_DIMS(a)[0] = n;
	ARR_LBOUND(a)[0] = 1;
	return a;
}

/*
 * A one-dimensional array of n elements of a fixed-length type, zeroed,
 * and in *data where its elements go (contiguous: a length that is a
 * multiple of its alignment).  n = 0 gives the empty array, as
 * construct_array does.
 */
ArrayType *
gnb_fixed_array(Oid elmtype, int elmlen, int64 n, void **data)
{
	ArrayType  *a;

	if (n <= 0)
	{
		*data = NULL;
		return construct_empty_array(elmtype);
	}
	if (n > (int64) MaxArraySize)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("array size exceeds the maximum allowed (%d)", (int) MaxArraySize)));
	a = new_1d_array(elmtype, (int) n, (Size) n * elmlen);
	*data = ARR_DATA_PTR(a);
	return a;
}

ArrayType *
gnb_float8_array(const double *values, int n)
{
	void	   *data;
	ArrayType  *a = gnb_fixed_array(FLOAT8OID, sizeof(float8), n, &data);

	if (n > 0)
		memcpy(data, values, sizeof(float8) * n);
	return a;
}

ArrayType *
gnb_text_array(char **values, int n)
{
	return gnb_text_array_strided((const char *const *) values, sizeof(char *), NULL, n);
}

/*
 * The text[] of n strings whose pointers are stride bytes apart from
 * strs[0] on (in an array of structs, say), written straight into the
 * array: of the lengths in lens, or NUL-terminated if lens is NULL.
 */
ArrayType *
gnb_text_array_strided(const char *const *strs, size_t stride, const int32 *lens, int n)
{
#define STR_AT(i) (*(const char *const *) ((const char *) strs + (size_t) (i) * stride))
#define LEN_AT(i) (lens ? (size_t) lens[i] : strlen(STR_AT(i)))
	Size		size = 0;
	ArrayType  *a;
	char	   *p;

	if (n <= 0)
		return construct_empty_array(TEXTOID);
	if (n > (int) MaxArraySize)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("array size exceeds the maximum allowed (%d)", (int) MaxArraySize)));
	/* each element a 4-byte header and its bytes, int-aligned */
	for (int i = 0; i < n; i++)
	{
		size += INTALIGN(VARHDRSZ + LEN_AT(i));
		if (!AllocSizeIsValid(size))
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("array size exceeds the maximum allowed (%d)", (int) MaxAllocSize)));
	}
	a = new_1d_array(TEXTOID, n, size);
	p = ARR_DATA_PTR(a);
	for (int i = 0; i < n; i++)
	{
		size_t		len = LEN_AT(i);

		SET_VARSIZE(p, VARHDRSZ + len);
		memcpy(p + VARHDRSZ, STR_AT(i), len);
		p += INTALIGN(VARHDRSZ + len);
	}
	return a;
#undef STR_AT
#undef LEN_AT
}

ArrayType *
gnb_int4_array(const int32 *values, int n)
{
	void	   *data;
	ArrayType  *a = gnb_fixed_array(INT4OID, sizeof(int32), n, &data);

	if (n > 0)
		memcpy(data, values, sizeof(int32) * n);
	return a;
}


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
 * Rows of a job's trace, as its worker samples: n of them, (chain, sweep,
 * log joint, share of labels changed) each.  In a transaction of its own
 * unless one is open, so that the trace is there while the job runs (and
 * stays when it fails).
 */
void
gnb_store_trace_rows(const GnbJobParams *params, int n, const int32 *chain, const int32 *sweep,
					 const double *log_joint, const double *changed,
					 const double *gamma_theta, const double *gamma_pi)
{
	Oid			types[10] = {INT8OID, INT4ARRAYOID, INT4ARRAYOID, FLOAT8ARRAYOID,
		FLOAT8ARRAYOID, TEXTOID, FLOAT8ARRAYOID, FLOAT8ARRAYOID, BOOLOID, BOOLOID};
	Datum		values[10];

	if (n == 0)
		return;
	values[0] = Int64GetDatum(params->job_id);
	values[1] = PointerGetDatum(gnb_int4_array(chain, n));
	values[2] = PointerGetDatum(gnb_int4_array(sweep, n));
	values[3] = PointerGetDatum(gnb_float8_array(log_joint, n));
	values[4] = PointerGetDatum(gnb_float8_array(changed, n));
	values[5] = CStringGetTextDatum(params->model_owner);
	values[6] = PointerGetDatum(gnb_float8_array(gamma_theta, n));
	values[7] = PointerGetDatum(gnb_float8_array(gamma_pi, n));
	values[8] = BoolGetDatum(params->sampler.sample_gamma_theta != 0);
	values[9] = BoolGetDatum(params->sampler.sample_gamma_pi != 0);
	/* the gammas only where they were sampled */
	job_row_statement("INSERT INTO gibbs_nb.trace (job_id, chain, sweep, log_likelihood, changed, owner, "
					  "gamma_theta, gamma_pi) "
					  "SELECT $1, u.c, u.s, u.l, u.x, $6, CASE WHEN $9 THEN u.gt END, "
					  "CASE WHEN $10 THEN u.gp END "
					  "FROM ROWS FROM (pg_catalog.unnest($2), pg_catalog.unnest($3), pg_catalog.unnest($4), "
					  "pg_catalog.unnest($5), pg_catalog.unnest($7), pg_catalog.unnest($8)) "
					  "AS u(c, s, l, x, gt, gp)",
					  10, types, values, SPI_OK_INSERT);
}

/*
 * Ids cross versions as text (gibbs_nb.packed.label_ids): written by a job
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
 * The packed row prediction loads: vocabulary and log theta-hat as arrays.
 * Each large array is made in place (gnb_fixed_array, gnb_text_array); the
 * words' counts were made when the sampler let the documents go
 * (gnb_corpus_word_counts).  theta-hat itself goes once its logs are made:
 * the row is formed (a copy of every value) and toasted with it gone.
 */
static void
write_packed(const GnbJobParams *params, const GnbCorpus *corpus,
			 gnb_result *result, const GnbDocLabels *labels, int32 version,
			 int64 version_id)
{
	int32		V = corpus->n_words;
	int32		K = corpus->n_classes;
	double	   *log_pi = palloc(sizeof(double) * K);
	Oid			types[11] = {TEXTOID, INT4OID, TEXTOID, TEXTARRAYOID, FLOAT8ARRAYOID,
	TEXTARRAYOID, FLOAT8ARRAYOID, INT8OID, TEXTARRAYOID, FLOAT8ARRAYOID, INT8ARRAYOID};
	Datum		values[11];
	char	  **ids = palloc_extended(sizeof(char *) * (labels->n + 1), MCXT_ALLOC_HUGE);
	ArrayType  *log_theta;
	double	   *lt;
	Oid			output;
	bool		varlena;
	int			level;

	if (corpus->word_counts == NULL)
		elog(ERROR, "gibbs_nb: the words' counts were not made before publishing");

	/* the documents' ids as text: a version's labels outlive its job */
	level = gnb_pin_id_text_format();
	getTypeOutputInfo(params->source.id_type, &output, &varlena);
	for (int64 i = 0; i < labels->n; i++)
		ids[i] = OidOutputFunctionCall(output, labels->ids[i]);
	AtEOXact_GUC(true, level);

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
	values[8] = PointerGetDatum(gnb_text_array(ids, (int) labels->n));
	values[9] = PointerGetDatum(gnb_float8_array(labels->probs, (int) (labels->n * K)));
	/* each word's occurrences in the training documents, labelled or not */
	values[10] = PointerGetDatum(corpus->word_counts);
	execute_unfolded("INSERT INTO gibbs_nb.packed (model_name, version, owner, classes, log_pi, "
					 "tokens, log_theta, version_id, label_ids, label_probabilities, word_counts) "
					 "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
					 11, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_INSERT);
	pfree(log_theta);
}

static const char *
sampler_name(gnb_sampler_kind kind)
{
	return kind == GNB_SAMPLER_COLLAPSED ? "collapsed" : "paper";
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
	model_statement("INSERT INTO gibbs_nb.versions_issued AS v (owner, model_name, last_version) "
					"VALUES ($1, $2, 1) ON CONFLICT (model_name, owner) "
					"DO UPDATE SET last_version = v.last_version OPERATOR(pg_catalog.+) 1 "
					"RETURNING v.last_version",
					owner, model_name, GNB_AS_INTERNAL, SPI_OK_INSERT_RETURNING, 0);
	*version = DatumGetInt32(gnb_result_value(1, &isnull));
	model_statement("SELECT pg_catalog.nextval('gibbs_nb.version_id_seq'::pg_catalog.regclass), "
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
	model_statement("SELECT 1 FROM gibbs_nb.versions_issued "
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
 * Write a version's rows: pi, packed and the model row (the trace was
 * written as the job sampled, gnb_store_trace_rows), as the extension's
 * owner, in the caller's transaction.  theta-hat is written once, in the
 * packed row: gibbs_nb.theta is a view of it; result->theta is released
 * as soon as that row's log theta-hat is made (NULL after).  warnings is
 * the model row's (diagnostics.c composes them).  SPI connected.
 */
void
gnb_store_version(const GnbJobParams *params, const GnbCorpus *corpus, gnb_result *result,
				  ArrayType *warnings, const GnbDocLabels *labels, int32 version,
				  int64 version_id, Oid labels_relid, int32 keep_versions, double seconds)
{
	write_pi(params, corpus, result, version);
	write_packed(params, corpus, result, labels, version, version_id);
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
				"label_column, id_column, tokenizer FROM gibbs_nb.models "
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
		Oid			types[29] = {
			TEXTOID, INT4OID, TEXTOID, TEXTARRAYOID, INT4OID, INT4OID, INT4OID, INT8OID,
			INT4OID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, INT4OID, INT4OID, INT4OID,
			INT4OID, INT4OID, TEXTOID, FLOAT8OID, FLOAT8OID, FLOAT8OID, INT8OID, FLOAT8OID,
			FLOAT8OID, INT8OID, INT4OID, TEXTOID, TEXTOID
		};
		Datum		v[29];
		char		nulls[29];

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
		gnb_execute("INSERT INTO gibbs_nb.models (model_name, version, owner, classes, "
					"n_documents, n_labeled, n_skipped, n_tokens, vocabulary_size, "
					"source, tokens_column, label_column, id_column, n_classes, "
					"sweeps, burn_in, lag, chains, sampler, gamma_pi, gamma_theta, "
					"unlabeled_weight, seed, r_hat, log_likelihood, labels_table, "
					"labels_relid, trained_by, version_id, keep_versions, tokenizer, "
					"catalog, warnings) VALUES "
					"($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, "
					"$15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, '', "
					"0::pg_catalog.oid, $3, $26, $27, $28, $29, "
					"'{\"imported: the training diagnostics (warnings, ess, split_r_hat, "
					"whether a gamma was sampled, held-out metrics) stayed where the model "
					"was trained\"}')",
					29, types, v, nulls, GNB_AS_INTERNAL, SPI_OK_INSERT, 0);
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
		/* not folded into the plan: that copied the arrays once more */
		execute_unfolded("INSERT INTO gibbs_nb.packed (model_name, version, owner, classes, log_pi, "
						 "tokens, log_theta, version_id, word_counts) "
						 "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
						 9, types, v, nulls, GNB_AS_INTERNAL, SPI_OK_INSERT);
	}
	(void) gnb_apply_retention(owner, model_name, version, keep);
	return version;
}

/* An id of the previous version, for the warm start's binary search. */
typedef struct WarmId
{
	const char *id;
	int32		doc;
} WarmId;

static int
cmp_warm_id(const void *a, const void *b)
{
	return strcmp(((const WarmId *) a)->id, ((const WarmId *) b)->id);
}

/*
 * A warm start from a version (gibbs_nb_retrain(..., warm => true)): for
 * each unlabelled document of the corpus, init_label gets the class its id
 * had in that version (its most probable, by class name), or -1 if the
 * version did not have the document or the class.  Returns how many
 * documents start warm.  Read as the caller.  SPI connected.
 */
int64
gnb_store_warm_start(int64 version_id, const GnbCorpus *corpus, Oid id_type, int32 *init_label)
{
	Oid			types[1] = {INT8OID};
	Datum		args[1] = {Int64GetDatum(version_id)};
	bool		isnull;
	ArrayType  *ids;
	ArrayType  *probs;
	ArrayType  *classes;
	Datum	   *id_texts;
	Datum	   *class_texts;
	int			n;
	int			Kp;
	int32	   *class_map;
	WarmId	   *sorted;
	Oid			output;
	bool		varlena;
	int64		matched = 0;
	int			level;

	for (int32 j = 0; j < corpus->n_docs; j++)
		init_label[j] = -1;
	gnb_execute("SELECT label_ids, label_probabilities, classes FROM gibbs_nb.packed "
				"WHERE version_id OPERATOR(pg_catalog.=) $1",
				1, types, args, NULL, GNB_AS_CALLER, SPI_OK_SELECT, 1);
	if (SPI_processed != 1)
		return 0;
	(void) gnb_result_value(1, &isnull);
	if (isnull)
		return 0;				/* a version that keeps no labels: a cold start */
	ids = DatumGetArrayTypePCopy(gnb_result_value(1, &isnull));
	probs = DatumGetArrayTypePCopy(gnb_result_value(2, &isnull));
	classes = DatumGetArrayTypePCopy(gnb_result_value(3, &isnull));
	deconstruct_array(ids, TEXTOID, -1, false, TYPALIGN_INT, &id_texts, NULL, &n);
	deconstruct_array(classes, TEXTOID, -1, false, TYPALIGN_INT, &class_texts, NULL, &Kp);
	if (ARR_HASNULL(probs) || ArrayGetNItems(ARR_NDIM(probs), ARR_DIMS(probs)) != (int64) n * Kp)
		elog(ERROR, "gibbs_nb.packed row of version " INT64_FORMAT " is malformed", version_id);

	/* the previous classes, by name, in this corpus's order */
	class_map = palloc(sizeof(int32) * Kp);
	for (int k = 0; k < Kp; k++)
	{
		char	   *name = TextDatumGetCString(class_texts[k]);

		class_map[k] = -1;
		for (int32 c = 0; c < corpus->n_classes; c++)
			if (strcmp(corpus->classes[c], name) == 0)
				class_map[k] = c;
	}
	sorted = palloc_extended(sizeof(WarmId) * ((Size) n + 1), MCXT_ALLOC_HUGE);
	for (int i = 0; i < n; i++)
	{
		sorted[i].id = TextDatumGetCString(id_texts[i]);
		sorted[i].doc = i;
	}
	qsort(sorted, n, sizeof(WarmId), cmp_warm_id);

	level = gnb_pin_id_text_format();
	getTypeOutputInfo(id_type, &output, &varlena);
	for (int32 j = 0; j < corpus->n_docs; j++)
	{
		WarmId		key;
		WarmId	   *hit;
		const double *row;
		int			best = 0;

		CHECK_FOR_INTERRUPTS();
		key.id = OidOutputFunctionCall(output, corpus->ids[j]);
		hit = bsearch(&key, sorted, n, sizeof(WarmId), cmp_warm_id);
		if (hit == NULL)
			continue;
		row = (const double *) ARR_DATA_PTR(probs) + (int64) hit->doc * Kp;
		for (int k = 1; k < Kp; k++)
			if (row[k] > row[best])
				best = k;
		if (class_map[best] >= 0)
		{
			init_label[j] = class_map[best];
			matched++;
		}
	}
	AtEOXact_GUC(true, level);
	return matched;
}

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

/* The newest version of a model, or 0 if it has none.  SPI connected. */
int32
gnb_store_newest_version(const char *owner, const char *model_name)
{
	bool		isnull;
	Datum		d;

	model_statement("SELECT pg_catalog.max(version) FROM gibbs_nb.models "
					"WHERE owner OPERATOR(pg_catalog.=) $1 AND model_name OPERATOR(pg_catalog.=) $2",
					owner, model_name, GNB_AS_INTERNAL, SPI_OK_SELECT, 1);
	d = gnb_result_value(1, &isnull);
	return isnull ? 0 : DatumGetInt32(d);
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
	model_statement("SELECT model_name, " MODEL_RELATION("source_relid", "source") ", "
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
	model_statement("SELECT 1 FROM gibbs_nb.packed WHERE owner OPERATOR(pg_catalog.=) $1 "
					"AND model_name OPERATOR(pg_catalog.=) $2 AND pinned",
					owner, model_name, GNB_AS_INTERNAL, SPI_OK_SELECT, 1);
	return SPI_processed > 0;
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
