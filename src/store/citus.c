/*
 * citus.c
 *	  gibbs_nb on Citus: which relation holds this node's copy of a table
 *	  that gibbs_nb_citus_distribute made a Citus reference table, and the
 *	  labels table of a distributed source.
 *
 * Prediction runs wherever a query puts it: on a Citus worker, inside the
 * query on one shard of a distributed table.  There, reading the reference
 * table gibbs_nb.packed by its name would be a distributed query nested in a
 * shard's query, which Citus refuses (and rightly: it could go to another
 * node).  Every node holds a full copy of a reference table, its placement,
 * a plain table named <table>_<shardid> in the table's schema, with the
 * table's privileges and row security policies.  So the model is read from
 * that placement, as the caller, like any table: Citus does not route it.
 * Without Citus, or where this node has no placement (a coordinator that is
 * not in Citus's metadata), the table itself is read.
 *
 * The placement is looked up in Citus's catalog tables (pg_dist_shard,
 * pg_dist_placement, pg_dist_local_group, all in pg_catalog) as the
 * extension's owner, with the search_path pinned; its name is in schema
 * gibbs_nb, where only the extension's owner creates relations.
 */
#include "gibbs_nb.h"

#include "store/store.h"
#include "security/security.h"

#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "common/string.h"
#include "nodes/pg_list.h"
#include "utils/lsyscache.h"

/*
 * relid is a Citus distributed table (of any kind): false when Citus is not
 * installed in this database.  SPI must be connected.
 */
bool
gnb_citus_is_distributed(Oid relid)
{
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};

	if (!OidIsValid(get_extension_oid("citus", true)))
		return false;
	gnb_execute("SELECT 1 FROM pg_catalog.pg_dist_partition "
				"WHERE logicalrelid OPERATOR(pg_catalog.=) $1",
				1, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_SELECT, 1);
	return SPI_processed == 1;
}

/*
 * A labels table just created for a model whose source is a hash-distributed
 * Citus table is distributed too, by its id column, and co-located with the
 * source when the source is distributed by its id column (each document's
 * label on the node of the document: joins on id stay on the workers).  A
 * source that is not distributed (a local table, a reference table, a view)
 * keeps its labels table local.  Runs as the caller, who has the privileges
 * of the table's owner, the model's (create_distributed_table requires
 * them).  SPI connected.
 */
void
gnb_citus_distribute_labels(Oid labels_relid, Oid source_relid, const char *id_column)
{
	Oid			types[2] = {REGCLASSOID, TEXTOID};
	Datum		values[2];
	char	   *dist_column = gnb_citus_hash_column(source_relid);
	char	   *colocate_with;

	if (dist_column == NULL)
		return;
	colocate_with = strcmp(dist_column, id_column) == 0
		? quote_qualified_identifier(get_namespace_name(get_rel_namespace(source_relid)),
									 get_rel_name(source_relid))
		: "default";
	values[0] = ObjectIdGetDatum(labels_relid);
	values[1] = CStringGetTextDatum(colocate_with);
	gnb_execute("SELECT pg_catalog.create_distributed_table($1, 'id', colocate_with => $2)",
				2, types, values, NULL, GNB_AS_CALLER, SPI_OK_SELECT, 0);
}

/*
 * The distribution column of relid when it is a hash-distributed Citus
 * table, else NULL (Citus not installed, a local or reference table).  SPI
 * connected.
 */
char *
gnb_citus_hash_column(Oid relid)
{
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};

	if (!OidIsValid(get_extension_oid("citus", true)))
		return NULL;
	gnb_execute("SELECT pg_catalog.column_to_column_name(d.logicalrelid, d.partkey) "
				"FROM pg_catalog.pg_dist_partition d "
				"WHERE d.logicalrelid OPERATOR(pg_catalog.=) $1 "
				"AND d.partmethod OPERATOR(pg_catalog.=) 'h'",
				1, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_SELECT, 1);
	if (SPI_processed != 1)
		return NULL;
	return SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
}

/*
 * The distribution column of relid when a blocked chain can put its nodes
 * on the servers that hold relid's shards (worker/nodes.c): relid is a
 * hash-distributed plain table (not partitioned: a partition's rows are in
 * its own shards) whose every shard has one placement (with copies, a
 * query may read a shard on a server that does not own it).  Else NULL.
 * SPI connected.
 */
char *
gnb_citus_nodes_column(Oid relid)
{
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	char	   *column = gnb_citus_hash_column(relid);

	if (column == NULL || get_rel_relkind(relid) != RELKIND_RELATION)
		return NULL;
	gnb_execute("SELECT 1 FROM pg_catalog.pg_dist_shard s "
				"JOIN pg_catalog.pg_dist_placement p ON p.shardid OPERATOR(pg_catalog.=) s.shardid "
				"WHERE s.logicalrelid OPERATOR(pg_catalog.=) $1 "
				"GROUP BY s.shardid HAVING pg_catalog.count(*) OPERATOR(pg_catalog.>) 1",
				1, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_SELECT, 1);
	return SPI_processed == 0 ? column : NULL;
}

/*
 * The shards of a hash-distributed table are split among the nodes that hold
 * them: each shard belongs to the node of its placement with the least group
 * (one node, however many copies it has).  The nodes of a blocked chain are
 * one on each such node (worker/nodes.c).
 */
#define OWNING_GROUP \
	"(SELECT pg_catalog.min(p.groupid) FROM pg_catalog.pg_dist_placement p " \
	"WHERE p.shardid OPERATOR(pg_catalog.=) s.shardid)"

/*
 * For each node that owns a shard of relid with rows, one value of its
 * distribution column `column` from such a shard, as text (*n of them, in
 * cxt, which outlives SPI's): a condition on them reaches every such node
 * once.  Read
 * on the shards (run_command_on_shards) as the caller, prefixed so that a
 * shard without rows (an empty result) is told from an empty value.  SPI
 * connected.
 */
char **
gnb_citus_shard_anchors(Oid relid, const char *column, MemoryContext cxt, int *n)
{
	Oid			types[2] = {REGCLASSOID, TEXTOID};
	Datum		values[2];
	char	  **anchors;

	values[0] = ObjectIdGetDatum(relid);
	values[1] = CStringGetTextDatum(psprintf("SELECT 'v' OPERATOR(pg_catalog.||) %s::pg_catalog.text "
											 "FROM %%s LIMIT 1", quote_identifier(column)));
	gnb_execute("SELECT DISTINCT ON (o.groupid) r.result "
				"FROM pg_catalog.run_command_on_shards($1, $2) r "
				"JOIN (SELECT s.shardid, " OWNING_GROUP " AS groupid FROM pg_catalog.pg_dist_shard s "
				"      WHERE s.logicalrelid OPERATOR(pg_catalog.=) $1) o "
				"  ON o.shardid OPERATOR(pg_catalog.=) r.shardid "
				"WHERE r.success AND r.result OPERATOR(pg_catalog.<>) '' "
				"ORDER BY o.groupid, r.shardid",
				2, types, values, NULL, GNB_AS_CALLER, SPI_OK_SELECT, 0);
	anchors = MemoryContextAlloc(cxt, sizeof(char *) * (SPI_processed + 1));
	*n = 0;
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		char	   *v = SPI_getvalue(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1);

		if (v == NULL || v[0] != 'v')
			elog(ERROR, "gibbs_nb: a shard of %s answered \"%s\"", get_rel_name(relid),
				 v ? v : "NULL");
		anchors[(*n)++] = MemoryContextStrdup(cxt, v + 1);
	}
	return anchors;
}

/*
 * When relid is a shard of a hash-distributed Citus table, the shards of
 * that table this node owns (OWNING_GROUP), as relation OIDs of this node
 * (relid among them); else NIL.  Shards by Citus's own names for them
 * (shard_name: the table's name and the shard's id, shortened by a hash
 * when too long).  SPI connected.
 */
List *
gnb_citus_owned_shards(Oid relid)
{
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	List	   *shards = NIL;
	bool		isnull;

	if (!OidIsValid(get_extension_oid("citus", true)))
		return NIL;
	gnb_execute("WITH t AS (SELECT s.logicalrelid FROM pg_catalog.pg_dist_shard s "
				"           JOIN pg_catalog.pg_dist_partition d "
				"             ON d.logicalrelid OPERATOR(pg_catalog.=) s.logicalrelid "
				"           WHERE d.partmethod OPERATOR(pg_catalog.=) 'h' "
				"             AND pg_catalog.to_regclass(pg_catalog.shard_name(s.logicalrelid, s.shardid, false)) "
				"                 OPERATOR(pg_catalog.=) $1) "
				"SELECT pg_catalog.to_regclass(pg_catalog.shard_name(s.logicalrelid, s.shardid, false)) "
				"FROM pg_catalog.pg_dist_shard s JOIN t ON t.logicalrelid OPERATOR(pg_catalog.=) s.logicalrelid "
				"WHERE " OWNING_GROUP " OPERATOR(pg_catalog.=) "
				"      (SELECT g.groupid FROM pg_catalog.pg_dist_local_group g) "
				"ORDER BY s.shardid",
				1, types, values, NULL, GNB_AS_INTERNAL, SPI_OK_SELECT, 0);
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		Oid			shard = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[r],
														   SPI_tuptable->tupdesc, 1, &isnull));

		if (isnull)
			elog(ERROR, "gibbs_nb: a shard of the table of %s is not on this node",
				 get_rel_name(relid));
		shards = lappend_oid(shards, shard);
	}
	/* a shard of a table, but not this node's: it has no node here */
	if (shards != NIL && !list_member_oid(shards, relid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("shard %s is not owned by this node", get_rel_name(relid))));
	return shards;
}
