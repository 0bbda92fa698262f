/*
 * owners.c
 *	  Who owns a model.  Models live in per-role namespaces: a model is
 *	  (owner, model_name), the owner stored by name so that a restore into
 *	  another cluster, or another Citus node, means the same role.  Where an
 *	  owner name was registered (gibbs_nb.owners, as its first job ran or
 *	  model was imported) it means the role registered then, by OID
 *	  (gnb_owner_role): a role created later under a dropped role's name is
 *	  not given its models, a renamed role keeps them.  A name resolves
 *	  (gnb_choose_owner) to the current role's own model of that name, or else
 *	  to the one model of that name owned by a role whose privileges the
 *	  current role has.  Superusers, who have every role's privileges, resolve
 *	  only their own models: a name must never silently pick up whatever model
 *	  some other role made.  gibbs_nb.has_privileges_of is the row security
 *	  policy of every table.
 */
#include "gibbs_nb.h"

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
	/* a queued CREATE RULE on the table holds every reader for at most the bound */
	gnb_lock_relation_bounded(relid, AccessShareLock);
	gnb_lock_relation_bounded(indexid, AccessShareLock);	/* its index's too */
	rel = table_open(relid, NoLock);
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

/* The owner of a relation, InvalidOid if there is none of that OID. */
Oid
gnb_relation_owner(Oid relid)
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
	Oid			relowner = gnb_relation_owner(relid);
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
	if (!OidIsValid(found) || gnb_relation_owner(found) != owner)
		PG_RETURN_NULL();
	PG_RETURN_OID(found);
}

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

PG_FUNCTION_INFO_V1(gibbs_nb_has_privileges_of);

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
