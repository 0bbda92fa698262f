/*
 * model.c
 *	  Dropping versions of a model: gibbs_nb_drop, retention
 *	  (gibbs_nb_set_retention and at publish).
 */
#include "gibbs_nb.h"

#include "models/models.h"
#include "worker/worker.h"
#include "store/store.h"
#include "security/security.h"

#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

PG_FUNCTION_INFO_V1(gibbs_nb_drop);
PG_FUNCTION_INFO_V1(gibbs_nb_set_retention);

/*
 * Drop a labels table, locked by the caller: by OID (RESTRICT, as DROP
 * TABLE: what another role built on it keeps it), or, distributed by Citus,
 * by Citus's DROP TABLE (its shards go with it only through the utility
 * command), named from the catalogs under the schema's row lock.
 */
static void
drop_labels_table(Oid relid)
{
	ObjectAddress table;

	if (gnb_citus_is_distributed(relid))
	{
		gnb_lock_namespace_name(get_rel_namespace(relid), false);
		gnb_execute(psprintf("DROP TABLE %s",
							 quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
														get_rel_name(relid))),
					0, NULL, NULL, NULL, GNB_AS_CALLER, SPI_OK_UTILITY, 0);
		return;
	}
	ObjectAddressSet(table, RelationRelationId, relid);
	performDeletion(&table, DROP_RESTRICT, 0);
}

/*
 * Serve `version` of a model (0: none pinned, the latest serves) and rewrite
 * its labels table with that version's labels.  Returns the version that
 * serves.  With `required`, a version that does not exist or keeps no labels
 * is an error; without (a drop moved the serving version), nothing is pinned
 * then and the labels table is left as it is.  The model locked
 * (gnb_store_lock_model); SPI connected.
 */
static int32
serve_version(const char *owner, const char *model_name, int32 version, bool required)
{
	int32		serving;
	GnbDocLabels labels;
	char	  **classes;
	Oid			labels_relid;
	Oid			id_type;
	char	   *qualified;
	GnbPrivilegeState priv;
	bool		found;

	serving = gnb_store_pin(owner, model_name, version);
	if (serving == 0)
	{
		if (!required)
			return 0;
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("model \"%s\" has no version %d", model_name, version)));
	}
	/*
	 * The ids are made of the labels table's id column type as the table's
	 * owner would make them, the model's (gnb_labels_table_owner): that type's
	 * input (a domain's CHECK, say, that another member of a group put on the
	 * group's table) never runs with the caller's privileges.
	 */
	gnb_become_role(gnb_owner_role_required(owner), &priv);
	found = gnb_store_version_labels(owner, model_name, serving, &labels, &classes,
									 &labels_relid, &id_type);
	gnb_restore_user(&priv);
	if (!found)
	{
		if (!required)
			return serving;
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("version %d of model \"%s\" keeps no labels to deploy", serving, model_name),
				 errdetail("It was trained before gibbs_nb 0.2.0, or its labels table is gone."),
				 errhint("Retrain the model, then deploy a version trained since.")));
	}
	/* the labels table is the model owner's: rewritten as the owner, by OID */
	qualified = gnb_lock_labels_table(labels_relid, ShareRowExclusiveLock);
	if (qualified != NULL)
		gnb_write_label_rows(labels_relid, qualified, owner, model_name, id_type, classes,
							 &labels, NULL, 0, serving, 0);
	return serving;
}

/*
 * gibbs_nb_drop(model_name text, version int DEFAULT NULL) returns int
 *
 * Drops one version of a model (its models, pi, packed (theta-hat) and trace
 * rows, and its rows in the labels table), or with version NULL the whole
 * model, including the labels table training created for it; dropping the
 * last version drops the model.  The name is resolved as every model name
 * is (security/owners.c): the caller's own model, or the one model of that name of a
 * role whose privileges it has.  Returns the number of versions dropped.
 */
Datum
gibbs_nb_drop(PG_FUNCTION_ARGS)
{
	char	   *model_name;
	const char *owner;
	bool		all_versions = PG_ARGISNULL(1);
	int32		version = all_versions ? 0 : PG_GETARG_INT32(1);
	List	   *labels_tables = NIL;
	int			dropped;
	int32		serving_before;
	ListCell   *lc;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("model_name must not be NULL")));
	model_name = text_to_cstring(PG_GETARG_TEXT_PP(0));

	SPI_connect();
	owner = gnb_resolve_model_owner(model_name, false);
	gnb_store_lock_model(owner, model_name);
	serving_before = gnb_store_serving_version(owner, model_name);
	dropped = gnb_delete_versions(owner, model_name, all_versions ?
								  "owner OPERATOR(pg_catalog.=) $1 AND model_name OPERATOR(pg_catalog.=) $2 AND $3 IS NOT NULL" :
								  "owner OPERATOR(pg_catalog.=) $1 AND model_name OPERATOR(pg_catalog.=) $2 "
								  "AND version OPERATOR(pg_catalog.=) $3",
								  version, &labels_tables);
	if (dropped == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("model \"%s\" has no version %d", model_name, version)));
	/* dropping the last version drops the model: its labels table goes too */
	if (!all_versions)
	{
		all_versions = gnb_store_newest_version(owner, model_name) == 0;
	}

	/*
	 * The labels tables are the model owner's: drop or clean them as the
	 * owner (gnb_labels_table_owner), by OID, locked first (waiting at most
	 * gibbs_nb.lock_timeout) and named from the catalogs under the lock.  One
	 * that was dropped since, or that belongs to someone else now (a
	 * WARNING), is left alone.  The schema's row is not locked (a GRANT on
	 * the schema would wait for this transaction): a table is dropped by OID,
	 * and rows deleted by a name checked to lead to it.
	 */
	foreach(lc, labels_tables)
	{
		Oid			relid = lfirst_oid(lc);
		Oid			vtype[1] = {INT4OID};
		Datum		vvalue[1] = {Int32GetDatum(version)};
		char	   *qualified;
		Oid			table_owner;
		GnbPrivilegeState priv;

		qualified = gnb_lock_labels_table(relid, all_versions ? AccessExclusiveLock : RowExclusiveLock);
		if (qualified == NULL)
			continue;
		table_owner = gnb_labels_table_owner(relid, owner, model_name, WARNING);
		if (!OidIsValid(table_owner))
			continue;
		gnb_become_role(table_owner, &priv);
		if (all_versions)
			drop_labels_table(relid);
		else
			gnb_execute_on_relation(relid,
									psprintf("DELETE FROM %s WHERE version OPERATOR(pg_catalog.=) $1",
											 qualified),
									1, vtype, vvalue, SPI_OK_DELETE);
		gnb_restore_user(&priv);
	}

	/*
	 * The version that served is gone, the model is not: the latest serves
	 * now (nothing pinned), and its labels fill the labels table, whose
	 * rows of the dropped version went above.
	 */
	if (!all_versions && version == serving_before)
		(void) serve_version(owner, model_name, 0, false);
	SPI_finish();
	PG_RETURN_INT32(dropped);
}

/*
 * gibbs_nb_set_retention(model_name text, keep_versions int) returns int
 *
 * Keep a model's newest keep_versions versions: older ones are dropped now
 * and whenever a new version is published.  Returns how many were dropped
 * now.  The name is resolved as for gibbs_nb_drop.
 */
Datum
gibbs_nb_set_retention(PG_FUNCTION_ARGS)
{
	char	   *model_name;
	const char *owner;
	int32		keep;
	int32		newest;
	int			dropped;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be NULL", PG_ARGISNULL(0) ? "model_name" : "keep_versions")));
	model_name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	keep = PG_GETARG_INT32(1);
	if (keep < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("keep_versions must be at least 1, not %d", keep)));

	SPI_connect();
	owner = gnb_resolve_model_owner(model_name, false);
	gnb_store_lock_model(owner, model_name);
	gnb_store_set_keep_versions(owner, model_name, keep);
	newest = gnb_store_newest_version(owner, model_name);
	dropped = gnb_apply_retention(owner, model_name, newest, keep);
	SPI_finish();
	PG_RETURN_INT32(dropped);
}

PG_FUNCTION_INFO_V1(gibbs_nb_deploy);

/*
 * gibbs_nb_deploy(model_name text, version int) returns int
 *
 * Serve `version` of a model: prediction uses it instead of the latest
 * (from the next statement on), retention never drops it, and its labels
 * table is rewritten with that version's labels (and left alone by later
 * trainings while it is deployed).  version NULL serves the latest version
 * again, its labels with it.  Returns the version that serves.  The name is
 * resolved as for gibbs_nb_drop.
 */
Datum
gibbs_nb_deploy(PG_FUNCTION_ARGS)
{
	char	   *model_name;
	const char *owner;
	int32		version;
	int32		serving;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("model_name must not be NULL")));
	model_name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	version = PG_ARGISNULL(1) ? 0 : PG_GETARG_INT32(1);

	SPI_connect();
	owner = gnb_resolve_model_owner(model_name, false);
	gnb_store_lock_model(owner, model_name);
	serving = serve_version(owner, model_name, version, true);
	SPI_finish();
	PG_RETURN_INT32(serving);
}
