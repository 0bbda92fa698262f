/*
 * publish.c
 *	  Publish a finished job's model version, all in the caller's transaction.
 *
 * The worker calls gnb_publish inside one short transaction: the new version's
 * rows in the extension's tables (written by src/store) and the new contents of
 * the labels table (written here, as its owner, the model's)
 * become visible together when it commits, or not at all.  Rows go in as
 * arrays unnested by one INSERT per batch, not a statement per row.
 */
#include "gibbs_nb.h"

#include "worker/worker.h"
#include "worker/nodes.h"
#include "store/store.h"
#include "security/security.h"

#include <math.h>

#include "access/detoast.h"
#include "access/htup_details.h"
#include "access/nbtree.h"
#include "access/relation.h"
#include "access/toast_compression.h"
#include "access/toast_internals.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/objectaddress.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/comment.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/typcache.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"

/*
 * The comment of every labels table training creates: without the model's
 * name (pg_description is every role's to read); what tells a lost job's
 * table from a table that took its OID since.
 */
#define LABELS_TABLE_COMMENT "labels of a gibbs_nb model"

/* How long creating a labels table waits for another transaction (ms). */
#define LABELS_CREATE_WAIT_MS 5000

/* errcontext of create_labels_table */
static void
create_labels_table_context(void *arg)
{
	errcontext("creating labels table %s", (const char *) arg);
}

/*
 * Create the model's labels table, as the model's owner (who needs CREATE in
 * its schema, gnb_labels_table_owner), and lock it; its OID.  The CREATE
 * waits at most LABELS_CREATE_WAIT_MS for another transaction: one that is
 * creating a relation or type of that name (anyone with CREATE there) holds
 * it until it ends, and a job waiting so would hold its slot as long.
 */
static Oid
create_labels_table(const GnbJobParams *params, Oid nspid, const char *qualified)
{
	GnbPrivilegeState priv;
	Oid			owner = gnb_owner_role_required(params->model_owner);
	MemoryContext cxt = CurrentMemoryContext;
	TypeCacheEntry *idtype;
	ErrorContextCallback context;
	int			guc_level;
	char		wait_ms[16];
	Oid			relid;

	context.callback = create_labels_table_context;
	context.arg = (void *) qualified;
	context.previous = error_context_stack;
	error_context_stack = &context;
	guc_level = NewGUCNestLevel();
	snprintf(wait_ms, sizeof(wait_ms), "%d", LABELS_CREATE_WAIT_MS);
	(void) set_config_option("lock_timeout", wait_ms, PGC_SUSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);

	/* the model's owner's table, made as the owner (gnb_labels_table_owner) */
	gnb_become_role(owner, &priv);
	idtype = lookup_type_cache(params->source.id_type, TYPECACHE_BTREE_OPFAMILY);
	PG_TRY();
	{
		gnb_execute(psprintf("CREATE TABLE %s (id %s%s, label pg_catalog.text, "
							 "probability pg_catalog.float8, probabilities pg_catalog.float8[], "
							 "version pg_catalog.int4 NOT NULL)",
							 qualified,
							 format_type_extended(params->source.id_type, params->source.id_typmod,
												  FORMAT_TYPE_TYPEMOD_GIVEN | FORMAT_TYPE_FORCE_QUALIFY),
							 OidIsValid(idtype->btree_opf) ? " PRIMARY KEY" : " NOT NULL"),
					0, NULL, NULL, NULL, GNB_AS_CALLER, SPI_OK_UTILITY, 0);
	}
	PG_CATCH();
	{
		MemoryContext ecxt = MemoryContextSwitchTo(cxt);
		ErrorData  *edata = CopyErrorData();

		if (edata->sqlerrcode != ERRCODE_LOCK_NOT_AVAILABLE)
		{
			MemoryContextSwitchTo(ecxt);
			PG_RE_THROW();
		}
		FlushErrorState();
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("could not create labels table %s: another transaction holds a lock it needs",
						qualified),
				 errdetail("A transaction that creates a relation or type of that name does, until it ends. A gibbs_nb job waits %d ms for it, then fails.",
						   LABELS_CREATE_WAIT_MS),
				 errhint("Train again once that transaction has ended, or pass another labels_table.")));
	}
	PG_END_TRY();
	/*
	 * Without the model's name: comments are in pg_description, which every
	 * role reads (gibbs_nb.models.labels_table tells the owner whose it is).
	 */
	gnb_execute(psprintf("COMMENT ON TABLE %s IS %s", qualified,
						 quote_literal_cstr(LABELS_TABLE_COMMENT)),
				0, NULL, NULL, NULL, GNB_AS_CALLER, SPI_OK_UTILITY, 0);
	gnb_restore_user(&priv);
	AtEOXact_GUC(true, guc_level);
	error_context_stack = context.previous;

	/* created in this transaction: nobody else can have it yet */
	relid = get_relname_relid(params->labels_table, nspid);
	LockRelationOid(relid, ShareRowExclusiveLock);
	/* on Citus, distributed like a distributed source (citus.c) */
	gnb_citus_distribute_labels(relid, params->source.relid, params->source.id_column);
	return relid;
}

/* A table of the labels table's name that no version of the model made: an error. */
static void
refuse_unregistered_labels_table(const GnbJobParams *params, Oid relid, const char *qualified)
{
	if (!gnb_labels_table_registered(params->model_owner, params->model_name, relid))
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_TABLE),
				 errmsg("table %s already exists and was not created for model \"%s\"",
						qualified, params->model_name),
				 errhint("Drop or rename the table, or pass another labels_table.")));
}

/*
 * A labels table of that name exists: it must be the one training created
 * for this model, by an earlier version or by this job (labels_reserved).
 * Locked; false if the name went meanwhile.
 */
static bool
check_existing_labels_table(const GnbJobParams *params, Oid nspid, Oid relid,
							const char *qualified)
{
	/* another role may hold it (PREPARE of a DELETE): at most the bound */
	gnb_lock_relation_bounded(relid, ShareRowExclusiveLock);
	if (get_relname_relid(params->labels_table, nspid) != relid)
	{
		UnlockRelationOid(relid, ShareRowExclusiveLock);
		return false;
	}
	if (relid != params->labels_reserved)
		refuse_unregistered_labels_table(params, relid, qualified);
	return true;
}

/*
 * The labels table of this model: reuse the one training created for it,
 * create it (as the model's owner) if there is none, refuse a table of that
 * name that is not ours.  Returns its OID, locked against concurrent DDL until
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

	if (!OidIsValid(relid) || !check_existing_labels_table(params, nspid, relid, qualified))
		relid = create_labels_table(params, nspid, qualified);
	gnb_lock_namespace_name(get_rel_namespace(relid), true);
	*sql_name = quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
										   get_rel_name(relid));
	return relid;
}

/*
 * Before it reads, the job's worker creates the labels table it will publish
 * into if there is none yet (a model's first version, or a labels table
 * dropped since), in a transaction of its own, and keeps its OID in
 * params->labels_reserved.  Created at publish, after every sweep, the name
 * was anyone's to take meanwhile who can create in that schema: a table or
 * type of that name failed the job after hours of sampling, and one being
 * created in a transaction left open made the job wait, holding its slot,
 * for as long as that transaction lasted.  Now such a name fails the job
 * before it reads (or is refused to the other role: it exists).
 */
void
gnb_reserve_labels_table(GnbJobParams *params)
{
	Oid			nspid;
	Oid			relid;
	char	   *qualified = quote_qualified_identifier(params->labels_schema,
													   params->labels_table);

	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	SPI_connect();
	nspid = get_namespace_oid(params->labels_schema, false);
	relid = get_relname_relid(params->labels_table, nspid);
	/* one that exists is locked at publish; refused now if it is not ours */
	if (OidIsValid(relid))
		refuse_unregistered_labels_table(params, relid, qualified);
	else
	{
		relid = create_labels_table(params, nspid, qualified);
		params->labels_reserved = relid;
		/* committed with it: a worker lost from here on leaves it to the next job */
		gnb_store_job_labels_reserved(params->job_id, relid);
	}
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
}

/* How a btree index of the labels table holds its id: storage, compression. */
typedef struct IdEntry
{
	char		storage;		/* the index column's attstorage */
	char		compression;	/* its attcompression, or the default's */
} IdEntry;

/*
 * The labels table relid's btree indexes on its id: how each holds it
 * (*n of them, the array palloc'd).
 */
static IdEntry *
btree_entries_of_id(Oid relid, int *n)
{
	AttrNumber	id_attnum = get_attnum(relid, "id");
	Relation	rel;
	List	   *indexes;
	ListCell   *lc;
	IdEntry    *entries;

	*n = 0;
	/* no wait: the check is worth none (publish waits for the table's lock) */
	if (id_attnum == InvalidAttrNumber || !ConditionalLockRelationOid(relid, AccessShareLock))
		return NULL;
	rel = try_relation_open(relid, NoLock);
	if (rel == NULL)
	{
		UnlockRelationOid(relid, AccessShareLock);
		return NULL;
	}
	indexes = RelationGetIndexList(rel);
	entries = palloc(sizeof(IdEntry) * (list_length(indexes) + 1));
	foreach(lc, indexes)
	{
		Oid			indexoid = lfirst_oid(lc);
		HeapTuple	index = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(indexoid));
		HeapTuple	class = SearchSysCache1(RELOID, ObjectIdGetDatum(indexoid));

		if (HeapTupleIsValid(index) && HeapTupleIsValid(class) &&
			((Form_pg_class) GETSTRUCT(class))->relam == BTREE_AM_OID)
		{
			Form_pg_index ix = (Form_pg_index) GETSTRUCT(index);

			for (int i = 0; i < ix->indnatts; i++)
			{
				HeapTuple	att;

				if (ix->indkey.values[i] != id_attnum)
					continue;
				att = SearchSysCache2(ATTNUM, ObjectIdGetDatum(indexoid), Int16GetDatum(i + 1));
				if (!HeapTupleIsValid(att))
					continue;
				entries[*n].storage = ((Form_pg_attribute) GETSTRUCT(att))->attstorage;
				entries[*n].compression = ((Form_pg_attribute) GETSTRUCT(att))->attcompression;
				if (!CompressionMethodIsValid(entries[*n].compression))
					entries[*n].compression = default_toast_compression;
				(*n)++;
				ReleaseSysCache(att);
				break;
			}
		}
		if (HeapTupleIsValid(index))
			ReleaseSysCache(index);
		if (HeapTupleIsValid(class))
			ReleaseSysCache(class);
	}
	list_free(indexes);
	relation_close(rel, AccessShareLock);
	return entries;
}

/* What gnb_id_fits_labels_table checks ids against. */
struct GnbIdFit
{
	IdEntry    *entries;
	int			n_entries;
};

/*
 * A document's id must fit an entry of each of the labels table's btree
 * indexes on id (the primary key training gives it): at most
 * GNB_BTREE_ITEM_MAX bytes with the entry's header, compressed as
 * index_form_tuple compresses it (with the index column's method, from the
 * id as the labels table's INSERT has it: whole).  A longer one failed the
 * INSERT of its row at publish, after every sweep ("index row size N
 * exceeds btree version 4 maximum 2704"); now the job fails before it
 * samples (54000).  Not while another version is deployed: publishing then
 * writes no labels row.  The indexes as they are now, in the read's
 * transaction: NULL if no id need be checked (ids of a fixed length, no
 * labels table yet, another version deployed).
 */
GnbIdFit *
gnb_id_fit_begin(const GnbJobParams *params)
{
	Oid			nspid = get_namespace_oid(params->labels_schema, true);
	Oid			relid = OidIsValid(nspid) ? get_relname_relid(params->labels_table, nspid) :
		InvalidOid;
	GnbIdFit   *fit;
	bool		pinned;

	if (get_typlen(params->source.id_type) != -1 || !OidIsValid(relid))
		return NULL;
	SPI_connect();
	pinned = gnb_store_pinned(params->model_owner, params->model_name);
	SPI_finish();
	if (pinned)
		return NULL;
	fit = palloc(sizeof(GnbIdFit));
	fit->entries = btree_entries_of_id(relid, &fit->n_entries);
	return fit;
}

/* id (of the source's type) fits the indexes of gnb_id_fit_begin: else 54000. */
void
gnb_id_fits_labels_table(const GnbIdFit *fit, Datum id)
{
	struct varlena *whole;
	Size		raw;

	if (fit == NULL || fit->n_entries == 0)
		return;
	raw = toast_raw_datum_size(id);
	if (MAXALIGN(sizeof(IndexTupleData) + raw) <= GNB_BTREE_ITEM_MAX)
		return;
	/* whole, as the labels table's INSERT hands it to the index */
	whole = detoast_attr((struct varlena *) DatumGetPointer(id));
	for (int e = 0; e < fit->n_entries; e++)
	{
		Size		size = VARSIZE_ANY(whole);

		if (fit->entries[e].storage == TYPSTORAGE_EXTENDED ||
			fit->entries[e].storage == TYPSTORAGE_MAIN)
		{
			Datum		compressed = toast_compress_datum(PointerGetDatum(whole),
														  fit->entries[e].compression);

			if (DatumGetPointer(compressed) != NULL)
			{
				size = VARSIZE(DatumGetPointer(compressed));
				pfree(DatumGetPointer(compressed));
			}
		}
		if (MAXALIGN(sizeof(IndexTupleData) + size) > GNB_BTREE_ITEM_MAX)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("a document id of %zu bytes is too long for the labels table's index on id",
							(size_t) (raw - VARHDRSZ)),
					 errdetail("An entry of a btree index is at most %zu bytes, this id's would be %zu. The job would have sampled, then failed to write its labels.",
							   (size_t) GNB_BTREE_ITEM_MAX,
							   (size_t) MAXALIGN(sizeof(IndexTupleData) + size)),
					 errhint("Give the documents shorter ids.")));
	}
	if ((Pointer) whole != DatumGetPointer(id))
		pfree(whole);
}

/*
 * Every id the corpus holds that publishing writes fits the labels table
 * (gnb_id_fits_labels_table); those of documents nodes hold, and then of
 * the labelled and held-out ones, were checked as they were read
 * (gnb_read_corpus).  In the read's transaction, once the corpus is read.
 */
void
gnb_check_ids_fit_labels_table(const GnbJobParams *params, const GnbCorpus *corpus)
{
	GnbIdFit   *fit = gnb_id_fit_begin(params);
	int64		n = gnb_published_labels(params, corpus);

	for (int64 i = 0; i < n && fit != NULL; i++)
	{
		if ((i & 1023) == 0)
			CHECK_FOR_INTERRUPTS();
		gnb_id_fits_labels_table(fit, gnb_published_id(corpus, i));
	}
}

/*
 * relid, an ordinary table locked by the caller, has no row (whatever row
 * security would show) in at most max_blocks blocks: a longer one counts as
 * not empty, unscanned (anyone could make a lost job's table long with dead
 * rows, and stall the job that looks).
 */
static bool
relation_is_empty(Oid relid, BlockNumber max_blocks)
{
	Relation	rel = table_open(relid, NoLock);
	bool		empty = false;

	if (RelationGetNumberOfBlocks(rel) <= max_blocks)
	{
		TupleTableSlot *slot = table_slot_create(rel, NULL);
		TableScanDesc scan = table_beginscan(rel, GetActiveSnapshot(), 0, NULL);

		empty = !table_scan_getnextslot(scan, ForwardScanDirection, slot);
		table_endscan(scan);
		ExecDropSingleTupleTableSlot(slot);
	}
	table_close(rel, NoLock);
	return empty;
}

/* The most blocks of a lost job's labels table scanned for a row. */
#define LOST_TABLE_MAX_BLOCKS 128

/* How long dropping a failed job's labels table waits for a lock (ms). */
#define LABELS_RELEASE_WAIT_MS 1000

/* relid has the comment create_labels_table gives a labels table. */
static bool
made_by_training(Oid relid)
{
	char	   *comment = GetComment(relid, RelationRelationId, 0);

	return comment != NULL && strcmp(comment, LABELS_TABLE_COMMENT) == 0;
}

/*
 * A labels table reserved by a job (gnb_reserve_labels_table) that will not
 * publish into it: dropped if nothing else came to hold it: still an
 * ordinary table of the model's owner (under the name it was made with, when
 * schema and name are given; else with the comment it was made with), no
 * version of the model registered it, and it has no rows (a lost job's: in
 * at most LOST_TABLE_MAX_BLOCKS blocks).
 * The owner and kind are checked before it is locked (a table that took a
 * lost job's OID is not locked), and again after.  By OID (performDeletion,
 * RESTRICT: an object made on it since keeps it), so that no name is looked
 * up: the caller may be waiting for this job in a transaction that altered
 * the schema (its row is locked then; the job failed for it).  A Citus
 * distributed table is dropped by its own job's worker only (by its DROP
 * TABLE, as model.c drops one: named from the catalogs under the schema's
 * lock), never a lost job's (that would run as its owner, whose policies
 * may run anything; false then).  A table locked and then found not to be
 * dropped is let go of at once.  The table's own lock is not waited for; the locks
 * performDeletion takes on what depends on it wait at most the caller's
 * lock_timeout.  Returns whether the reservation is settled: the table
 * dropped, gone, or no longer one a job may drop.  In the caller's
 * transaction, SPI connected.
 */
static bool
drop_reserved_labels_table(Oid relid, const char *model_owner, const char *model_name,
						   const char *schema, const char *name)
{
	Oid			owner_role = gnb_owner_role(model_owner);
	bool		settled = true;

	/*
	 * Before the lock, from the catalogs: not another role's table, nor (a
	 * lost job's) one without training's comment; a lost job's distributed
	 * table is left unlocked
	 */
	if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)) ||
		get_rel_relkind(relid) != RELKIND_RELATION ||
		gnb_relation_owner(relid) != owner_role ||
		(schema == NULL && !made_by_training(relid)))
		return true;
	if (schema == NULL && gnb_citus_is_distributed(relid))
		return false;
	if (!ConditionalLockRelationOid(relid, AccessExclusiveLock))
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("another transaction holds a lock on it")));
	/* a snapshot after the lock: it sees every version committed before */
	PushActiveSnapshot(GetTransactionSnapshot());
	/*
	 * Still the table it made: by name too (renamed since: left alone) or
	 * by its comment, an ordinary table (its owner may have made it a view),
	 * the model's owner's (not one given away since), no version's.
	 */
	if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)) ||
		get_rel_relkind(relid) != RELKIND_RELATION ||
		gnb_relation_owner(relid) != owner_role ||
		(schema != NULL &&
		 (get_rel_namespace(relid) != get_namespace_oid(schema, true) ||
		  strcmp(get_rel_name(relid), name) != 0)) ||
		(schema == NULL && !made_by_training(relid)) ||
		gnb_labels_table_registered(model_owner, model_name, relid))
		UnlockRelationOid(relid, AccessExclusiveLock);	/* not ours to drop: let go */
	else if (!gnb_citus_is_distributed(relid))
	{
		/* a lost job's only if short: see relation_is_empty */
		if (relation_is_empty(relid, schema != NULL ? MaxBlockNumber : LOST_TABLE_MAX_BLOCKS))
		{
			ObjectAddress table;

			ObjectAddressSet(table, RelationRelationId, relid);
			performDeletion(&table, DROP_RESTRICT, 0);
		}
		else
			UnlockRelationOid(relid, AccessExclusiveLock);
	}
	else if (schema != NULL)
	{
		Oid			table_owner;

		gnb_lock_namespace_name(get_rel_namespace(relid), true);
		table_owner = gnb_labels_table_owner(relid, model_owner, model_name, WARNING);
		if (OidIsValid(table_owner))
		{
			char	   *qualified = quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
															   get_rel_name(relid));
			GnbPrivilegeState priv;
			bool		isnull;

			gnb_become_role(table_owner, &priv);
			gnb_execute(psprintf("SELECT EXISTS (SELECT FROM %s)", qualified),
						0, NULL, NULL, NULL, GNB_AS_CALLER, SPI_OK_SELECT, 0);
			if (!DatumGetBool(gnb_result_value(1, &isnull)))
				gnb_execute(psprintf("DROP TABLE %s", qualified), 0, NULL, NULL, NULL,
							GNB_AS_CALLER, SPI_OK_UTILITY, 0);
			gnb_restore_user(&priv);
		}
	}
	else
	{
		/* a lost job's distributed table (distributed since the check above): left */
		UnlockRelationOid(relid, AccessExclusiveLock);
		settled = false;
	}
	PopActiveSnapshot();
	return settled;
}

/*
 * A job that failed drops the labels table it created (gnb_reserve_labels_table)
 * if nothing else came to hold it (drop_reserved_labels_table), and says so in
 * its row.  Best effort, before the job's outcome is written: no lock is
 * waited for longer than LABELS_RELEASE_WAIT_MS, and a failure here is a
 * WARNING and the table is left, still reserved in the job's row (a later
 * job's worker drops it: gnb_release_lost_labels_tables).
 */
void
gnb_release_labels_table(const GnbJobParams *params)
{
	Oid			relid = params->labels_reserved;
	MemoryContext cxt = CurrentMemoryContext;

	if (!OidIsValid(relid))
		return;
	PG_TRY();
	{
		char		wait_ms[16];

		StartTransactionCommand();
		snprintf(wait_ms, sizeof(wait_ms), "%d", LABELS_RELEASE_WAIT_MS);
		(void) set_config_option("lock_timeout", wait_ms, PGC_SUSET, PGC_S_SESSION,
								 GUC_ACTION_LOCAL, true, 0, false);
		SPI_connect();
		if (drop_reserved_labels_table(relid, params->model_owner, params->model_name,
									   params->labels_schema, params->labels_table))
			gnb_store_job_labels_reserved(params->job_id, InvalidOid);
		SPI_finish();
		CommitTransactionCommand();
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		AbortOutOfAnyTransaction();
		ereport(WARNING,
				(errmsg("gibbs_nb job " INT64_FORMAT " left the labels table it created, %s.%s",
						params->job_id, params->labels_schema, params->labels_table),
				 errdetail("Dropping it failed: %s", edata->message)));
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
}

/*
 * At most this many lost jobs' labels tables are looked at by one job's
 * worker, for at most LOST_TOTAL_MS in all, each drop waiting at most
 * LOST_WAIT_MS for what depends on its table: a role that keeps its own lost
 * tables' dependents locked delays every job's start by this much at most.
 */
#define LOST_RESERVATIONS_MAX 4
#define LOST_WAIT_MS 50
#define LOST_TOTAL_MS 500

/*
 * The labels tables that jobs reserved and left (their worker was lost: a
 * crash, a restart; or it could not drop its own), dropped by the next job's
 * worker before it reserves its own, each if nothing else came to hold it
 * (drop_reserved_labels_table: known by its OID and the comment it was made
 * with, as its name is not in the job's row), this model's first.  A lost
 * model's first training left an empty table of the model's labels table's
 * name, which refused the model's next training (42P07) until someone dropped
 * it by hand.  A settled job's row is cleared, unless another transaction
 * holds it (the caller waiting for this job may: its launch put the lost
 * jobs' rows right); a later job clears it.  Each in a subtransaction: one
 * that cannot be dropped now (a lock is held on it, or on what depends on it
 * past LOST_WAIT_MS) is a LOG line and left for a later job.  A cancel (the
 * job's, or a shutdown's) is not caught: it stops the job.  In a transaction
 * of its own, as the extension (the jobs' rows).
 */
void
gnb_release_lost_labels_tables(const GnbJobParams *params)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner;
	int64	   *jobs;
	char	  **owners;
	char	  **models;
	Oid		   *relids;
	int			n;
	char		wait_ms[16];
	TimestampTz start = GetCurrentTimestamp();

	StartTransactionCommand();
	owner = CurrentResourceOwner;
	/* what depends on a table is locked by its drop: waited for this long at most */
	snprintf(wait_ms, sizeof(wait_ms), "%d", LOST_WAIT_MS);
	(void) set_config_option("lock_timeout", wait_ms, PGC_SUSET, PGC_S_SESSION,
							 GUC_ACTION_LOCAL, true, 0, false);
	PushActiveSnapshot(GetTransactionSnapshot());
	SPI_connect();
	n = gnb_store_lost_reservations(params->model_owner, params->model_name,
									LOST_RESERVATIONS_MAX, &jobs, &owners, &models, &relids);
	for (int i = 0; i < n && !TimestampDifferenceExceeds(start, GetCurrentTimestamp(),
														 LOST_TOTAL_MS); i++)
	{
		BeginInternalSubTransaction(NULL);
		MemoryContextSwitchTo(cxt);
		PG_TRY();
		{
			bool		settled = drop_reserved_labels_table(relids[i], owners[i], models[i],
															 NULL, NULL);

			if (settled)
				gnb_store_lost_reservation_settled(jobs[i]);
			else
				ereport(LOG,
						(errmsg("gibbs_nb: the labels table (OID %u) that job " INT64_FORMAT " left is distributed: drop it with gibbs_nb_drop or DROP TABLE",
								relids[i], jobs[i])));
			ReleaseCurrentSubTransaction();
			MemoryContextSwitchTo(cxt);
			CurrentResourceOwner = owner;
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
			/* a cancel stops the job: record_failure says so */
			if (edata->sqlerrcode == ERRCODE_QUERY_CANCELED)
				ReThrowError(edata);
			ereport(LOG,
					(errmsg("gibbs_nb: the labels table (OID %u) that job " INT64_FORMAT " left is left for now",
							relids[i], jobs[i]),
					 errdetail("Dropping it failed: %s", edata->message)));
		}
		PG_END_TRY();
	}
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	MemoryContextSwitchTo(cxt);
}

/*
 * The documents' labels of a finished job: clamped documents first, then the
 * others (unless nodes hold them: then neither, gnb_nodes_write_labels,
 * gnb_nodes_store_labels), then the held-out ones (holdout_probs, as the
 * version predicts them).
 */
static void
doc_labels(const GnbCorpus *corpus, const gnb_result *result, const double *holdout_probs,
		   GnbDocLabels *dl)
{
	int32		K = corpus->n_classes;
	int64		n_labeled = corpus->labeled_in_source ? 0 : corpus->n_labeled;
	int64		n_unlabeled = corpus->n_docs;	/* (none when nodes hold them) */
	int64		first_holdout = n_labeled + n_unlabeled;

	dl->n = first_holdout + (holdout_probs ? corpus->n_holdout : 0);
	dl->n_classes = K;
	dl->ids = palloc_extended(sizeof(Datum) * (dl->n + 1), MCXT_ALLOC_HUGE);
	dl->probs = palloc_extended(sizeof(double) * (dl->n * K + 1), MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	for (int64 i = 0; i < n_labeled; i++)
	{
		dl->ids[i] = corpus->labeled_ids[i];
		dl->probs[i * K + corpus->labeled_class[i]] = 1.0;
	}
	for (int64 j = 0; j < n_unlabeled; j++)
	{
		dl->ids[n_labeled + j] = corpus->ids[j];
		memcpy(dl->probs + (n_labeled + j) * K, result->label_prob + j * K,
			   sizeof(double) * K);
	}
	for (int64 i = 0; holdout_probs && i < corpus->n_holdout; i++)
	{
		dl->ids[first_holdout + i] = corpus->holdout_ids[i];
		memcpy(dl->probs + (first_holdout + i) * K, holdout_probs + i * K, sizeof(double) * K);
	}
}

/*
 * Lock a labels table by OID, waiting at most gibbs_nb.lock_timeout, and
 * name it from the catalogs under the lock; NULL if it is gone.  Statements
 * by that name go through gnb_execute_on_relation, which checks that the
 * name still leads to it: the schema's row is not locked.
 */
char *
gnb_lock_labels_table(Oid relid, LOCKMODE mode)
{
	gnb_lock_relation_bounded(relid, mode);
	if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)))
		return NULL;
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
									  get_rel_name(relid));
}

/*
 * dl's rows into a labels table (relid, named `qualified`) as the current
 * user: each document's most probable class (ties to the earlier class),
 * its probability and all of them; its ids of id_type.  Batched as
 * gnb_labels_batch_size says, in batch_cxt (reset after each).  SPI
 * connected.
 */
static void
insert_label_rows(Oid relid, const char *qualified, Oid id_type, char **classes,
				  const GnbDocLabels *dl, int32 version, MemoryContext batch_cxt)
{
	int32		K = dl->n_classes;
	Oid			id_array_type = get_array_type(id_type);
	int16		typlen;
	bool		typbyval;
	char		typalign;
	Oid			types[6] = {id_array_type, TEXTARRAYOID, FLOAT8ARRAYOID, FLOAT8ARRAYOID,
	INT4OID, INT8OID};
	char	   *insert;

	get_typlenbyvalalign(id_type, &typlen, &typbyval, &typalign);
	/*
	 * the arrays unnested in the target list, in step: in FROM, unnest of
	 * ids of a row type would give their fields as columns, not the ids
	 */
	insert = psprintf("INSERT INTO %s (id, label, probability, probabilities, version) "
					  "SELECT u.id, u.label, u.p, " GNB_BATCH_ROW_SQL("$4", "u.o", "$6") ", $5 "
					  "FROM (SELECT pg_catalog.unnest($1) AS id, pg_catalog.unnest($2) AS label, "
					  "pg_catalog.unnest($3) AS p, pg_catalog.generate_subscripts($3, 1) AS o) AS u",
					  qualified);
	for (int64 start = 0, n; start < dl->n; start += n)
	{
		MemoryContext old = MemoryContextSwitchTo(batch_cxt);
		char	  **labels;
		double	   *best;
		Datum	   *ids;
		Datum		values[6];

		n = gnb_labels_batch_size(dl->ids + start, dl->n - start, K, typlen, typbyval);
		labels = palloc(sizeof(char *) * n);
		best = palloc(sizeof(double) * n);
		/* a copy: construct_array detoasts its elements in place */
		ids = palloc(sizeof(Datum) * n);
		for (int32 i = 0; i < n; i++)
		{
			const double *p = dl->probs + (start + i) * K;
			int32		arg = gnb_argmax(p, K);

			labels[i] = classes[arg];
			best[i] = p[arg];
		}
		memcpy(ids, dl->ids + start, sizeof(Datum) * n);
		values[0] = PointerGetDatum(construct_array(ids, n, id_type, typlen, typbyval, typalign));
		values[1] = PointerGetDatum(gnb_text_array(labels, n));
		values[2] = PointerGetDatum(gnb_float8_array(best, n));
		values[3] = PointerGetDatum(gnb_float8_array(dl->probs + start * K, n * K));
		values[4] = Int32GetDatum(version);
		values[5] = Int64GetDatum(K);
		MemoryContextSwitchTo(old);
		gnb_execute_on_relation(relid, insert, 6, types, values, SPI_OK_INSERT);
		MemoryContextReset(batch_cxt);
		CHECK_FOR_INTERRUPTS();
	}
}

/* What copy_label gathers a version's documents' labels in, for a labels table. */
typedef struct LabelsCopy
{
	Oid			relid;
	const char *qualified;
	Oid			id_type;		/* the labels table's */
	char	  **classes;
	int32		version;
	FmgrInfo	input;			/* id_type's input, looked up once */
	Oid			ioparam;
	GnbDocLabels batch;			/* room for GNB_LABELS_FETCH */
	MemoryContext ids_cxt;		/* the batch's ids, made by the input */
	MemoryContext batch_cxt;	/* insert_label_rows's */
	int64		n;
	int			pinned_level;	/* the pinned formats' GUC level, or 0 */
} LabelsCopy;

/*
 * The batch into the labels table, under the session's formats (its
 * triggers' statements must not run under the ids' pinned ones).
 */
static void
flush_labels_copy(LabelsCopy *c)
{
	if (c->pinned_level > 0)
		AtEOXact_GUC(true, c->pinned_level);
	c->pinned_level = 0;
	insert_label_rows(c->relid, c->qualified, c->id_type, c->classes, &c->batch, c->version,
					  c->batch_cxt);
	c->batch.n = 0;
	MemoryContextReset(c->ids_cxt);
}

/* gnb_store_each_document_label's fn: a document's label into the batch. */
static void
copy_label(void *arg, const struct varlena *id, const double *probs, int n_probs)
{
	LabelsCopy *c = arg;
	int32		K = c->batch.n_classes;
	MemoryContext old;
	char	   *str;

	if (n_probs != K)
		elog(ERROR, "gibbs_nb.document_labels row of version %d is malformed", c->version);
	if (c->pinned_level == 0)
		c->pinned_level = gnb_pin_id_text_format();
	old = MemoryContextSwitchTo(c->ids_cxt);
	str = text_to_cstring((const text *) id);
	c->batch.ids[c->batch.n] = InputFunctionCall(&c->input, str, c->ioparam, -1);
	MemoryContextSwitchTo(old);
	memcpy(c->batch.probs + c->batch.n * K, probs, sizeof(double) * K);
	c->batch.n++;
	c->n++;
	if (c->batch.n == GNB_LABELS_FETCH)
		flush_labels_copy(c);
}

/*
 * The rows of a version's documents' labels (gibbs_nb.document_labels of
 * version_id, read as the extension's owner, who wrote them) added to its
 * labels table (relid, named `qualified`) as the current user: ids made from
 * their text by the table's id type's input, under the pinned text formats
 * they were written under (gnb_pin_id_text_format), a batch at a time.
 * Returns how many.  SPI connected.
 */
static int64
copy_document_labels(Oid relid, const char *qualified, char **classes, int32 n_classes,
					 int32 version, int64 version_id, MemoryContext batch_cxt)
{
	LabelsCopy	c;
	Oid			input;

	memset(&c, 0, sizeof(c));
	c.relid = relid;
	c.qualified = qualified;
	c.id_type = get_atttype(relid, get_attnum(relid, "id"));
	if (!OidIsValid(c.id_type))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("labels table %s has no column \"id\"", qualified)));
	c.classes = classes;
	c.version = version;
	getTypeInputInfo(c.id_type, &input, &c.ioparam);
	/* once: a domain's input keeps its CHECK's state across calls (fn_extra) */
	fmgr_info(input, &c.input);
	c.batch.n_classes = n_classes;
	c.batch.ids = palloc(sizeof(Datum) * GNB_LABELS_FETCH);
	c.batch.probs = palloc(sizeof(double) * GNB_LABELS_FETCH * n_classes);
	c.ids_cxt = AllocSetContextCreate(CurrentMemoryContext, "gibbs_nb labels copied",
									  ALLOCSET_DEFAULT_SIZES);
	c.batch_cxt = batch_cxt;
	(void) gnb_store_each_document_label(version_id, true, copy_label, &c);
	if (c.batch.n > 0)
		flush_labels_copy(&c);
	MemoryContextDelete(c.ids_cxt);
	pfree(c.batch.ids);
	pfree(c.batch.probs);
	return c.n;
}

/*
 * Replace a labels table's rows with a version's labels
 * (insert_label_rows): those of dl, and with nodes, those of the labelled
 * documents and of the documents the job's nodes hold, written where they
 * are (gnb_nodes_write_labels), or with n_copied, those the version's
 * documents' labels hold already (stored from the source and the nodes,
 * gnb_nodes_store_labels; n_copied of them; version_id).  Runs as the
 * table's owner, the model's (gnb_labels_table_owner): an error if the
 * table is someone else's.  relid
 * locked by the caller, and named `qualified` under that lock.  SPI
 * connected.
 */
void
gnb_write_label_rows(Oid relid, const char *qualified, const char *model_owner,
					 const char *model_name, Oid id_type, char **classes,
					 const GnbDocLabels *dl, struct NodesRun *nodes, int64 n_copied,
					 int32 version, int64 version_id)
{
	GnbPrivilegeState priv;
	MemoryContext batch_cxt = AllocSetContextCreate(CurrentMemoryContext,
													"gibbs_nb labels batch",
													ALLOCSET_DEFAULT_SIZES);

	gnb_become_role(gnb_labels_table_owner(relid, model_owner, model_name, ERROR), &priv);
	gnb_execute_on_relation(relid, psprintf("DELETE FROM %s", qualified), 0, NULL, NULL,
							SPI_OK_DELETE);
	insert_label_rows(relid, qualified, id_type, classes, dl, version, batch_cxt);
	/* and the documents the nodes hold, from them, where they are */
	if (nodes)
		gnb_nodes_write_labels(nodes, relid, qualified, classes, version);
	/* or from their labels this version stored already */
	if (n_copied > 0 &&
		copy_document_labels(relid, qualified, classes, dl->n_classes, version, version_id,
							 batch_cxt) != n_copied)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the documents' labels of version %d changed while they were published",
						version)));
	gnb_restore_user(&priv);
	MemoryContextDelete(batch_cxt);
}

/* Where write_holdout_rows writes a batch of labels: a labels table. */
typedef struct LabelsTableWriter
{
	Oid			relid;
	const char *qualified;
	Oid			id_type;
	char	  **classes;
	int32		version;
	MemoryContext batch_cxt;
} LabelsTableWriter;

/* A GnbLabelsBatchFn: the batch into a labels table (insert_label_rows). */
static void
write_labels_batch(void *arg, const GnbDocLabels *batch)
{
	LabelsTableWriter *w = arg;

	insert_label_rows(w->relid, w->qualified, w->id_type, w->classes, batch, w->version,
					  w->batch_cxt);
}

/*
 * The held-out rows of a job whose nodes wrote their documents' rows where
 * they are (gnb_nodes_write_labels): read from the source, scored, and
 * written into the labels table (relid, named `qualified` under its lock)
 * as its owner, the job's caller, a batch at a time
 * (gnb_score_holdout_rows); every one the job read (else 55000); their
 * metrics as JSON in *metrics_json.  SPI connected.
 */
static void
write_holdout_rows(const GnbJobParams *params, const GnbCorpus *corpus, const gnb_result *result,
				   GnbNodesRun *nodes, Oid relid, const char *qualified, int32 version,
				   char **metrics_json)
{
	GnbPrivilegeState priv;
	LabelsTableWriter w;
	int64		n;

	w.relid = relid;
	w.qualified = qualified;
	w.id_type = params->source.id_type;
	w.classes = corpus->classes;
	w.version = version;
	w.batch_cxt = AllocSetContextCreate(CurrentMemoryContext, "gibbs_nb labels batch",
										ALLOCSET_DEFAULT_SIZES);
	gnb_become_role(gnb_labels_table_owner(relid, params->model_owner, params->model_name, ERROR),
					&priv);
	n = gnb_score_holdout_rows(params, corpus, result, gnb_nodes_holdout_sql(nodes),
							   write_labels_batch, &w, NULL, metrics_json);
	gnb_restore_user(&priv);
	gnb_nodes_check_labels_given(nodes, (uint64) n, corpus->n_holdout, "held-out");
	MemoryContextDelete(w.batch_cxt);
}

/* Where store_holdout_labels writes a batch of labels: a version's documents' labels. */
typedef struct DocumentLabelsWriter
{
	const GnbJobParams *params;
	int64		version_id;
} DocumentLabelsWriter;

/* A GnbLabelsBatchFn: the batch into the version's documents' labels. */
static void
store_labels_batch(void *arg, const GnbDocLabels *batch)
{
	DocumentLabelsWriter *w = arg;

	gnb_store_document_labels_batch(w->params, batch, w->version_id);
}

/*
 * The held-out rows of a job whose nodes' labels come here
 * (gnb_nodes_store_labels): read from the source as the caller, scored,
 * and written into the version's documents' labels (version_id), a batch
 * at a time (gnb_score_holdout_rows), before anything is written as
 * another role; every one the job read (else 55000); their ids added to
 * ids, their metrics as JSON in *metrics_json.  Returns how many.  SPI
 * connected.
 */
static int64
store_holdout_labels(const GnbJobParams *params, const GnbCorpus *corpus, const gnb_result *result,
					 GnbNodesRun *nodes, int64 version_id, GnbIdSum *ids, char **metrics_json)
{
	DocumentLabelsWriter w = {params, version_id};
	int64		n;

	n = gnb_score_holdout_rows(params, corpus, result, gnb_nodes_holdout_sql(nodes),
							   store_labels_batch, &w, ids, metrics_json);
	gnb_nodes_check_labels_given(nodes, (uint64) n, corpus->n_holdout, "held-out");
	return n;
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

/* A version whose estimates are not numbers would label with garbage. */
static void
not_finite(const GnbJobParams *params)
{
	ereport(ERROR,
			(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
			 errmsg("gibbs_nb job " INT64_FORMAT " produced estimates that are not finite; nothing was published",
					params->job_id)));
}

/*
 * Publish a finished job as a new version of its model; returns the version.
 * Must run inside a transaction with a snapshot; the caller commits.
 * seconds_so_far is the job's time up to here; the publish time is added.
 * nodes: the job's nodes, which still hold its unlabelled documents, or
 * NULL.
 * result->theta is released once the packed row's log theta-hat is made
 * from it (NULL after).
 */
int32
gnb_publish(const GnbJobParams *params, const GnbCorpus *corpus, GnbNodesRun *nodes,
			gnb_result *result, double seconds_so_far)
{
	TimestampTz start = GetCurrentTimestamp();
	Oid			owner_role = gnb_owner_role(params->model_owner);
	char	   *labels_sql;
	Oid			labels_relid;
	int32		version;
	int64		version_id;
	int32		keep_versions;
	GnbDocLabels labels;
	double	   *holdout_probs = NULL;
	char	   *holdout_metrics = NULL;
	bool		pinned;
	bool		held;
	int64		n_stored = 0;
	long		secs;
	int			usecs;

	if (!all_finite(result->theta, (int64) corpus->n_words * corpus->n_classes) ||
		!all_finite(result->pi, corpus->n_classes))
		not_finite(params);

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
	gnb_store_number_version(params->model_owner, params->model_name, &version, &version_id,
							 &keep_versions);

	/*
	 * The labels table is the model owner's: create and fill it as the
	 * owner, unless another version is deployed (gibbs_nb_deploy): the
	 * labels table follows the version that serves.  Documents held by
	 * nodes get their rows there from their nodes, and the labelled ones
	 * from the source, when the nodes can write them
	 * (gnb_nodes_can_write_labels), and the version's document_labels are
	 * then read back from the table; else their labels come here a batch at
	 * a time (gnb_nodes_store_labels).
	 */
	labels_relid = prepare_labels_table(params, &labels_sql);
	pinned = gnb_store_pinned(params->model_owner, params->model_name);
	held = nodes != NULL && !pinned && gnb_nodes_can_write_labels(nodes, labels_relid);
	/*
	 * Else the nodes' labels come here, a batch at a time, into the
	 * version's document_labels, before anything is written as the owner
	 * (gnb_nodes_store_labels says why); the labels table is written from
	 * them.
	 */
	if (nodes != NULL && !held)
	{
		GnbIdSum	ids = {&params->source, 0};

		n_stored = gnb_nodes_store_labels(nodes, version_id, &ids);
		if (params->holdout > 0.0)
			n_stored += store_holdout_labels(params, corpus, result, nodes, version_id, &ids,
											 &holdout_metrics);
		gnb_nodes_check_ids(nodes, ids.sum);
	}
	if (nodes == NULL && !all_finite(result->label_prob, (int64) corpus->n_docs * corpus->n_classes))
		not_finite(params);
	if (params->holdout > 0.0 && !corpus->labeled_in_source)
		holdout_probs = gnb_score_holdout(params, corpus, result, &holdout_metrics);
	doc_labels(corpus, result, holdout_probs, &labels);
	if (!pinned)
		gnb_write_label_rows(labels_relid, labels_sql, params->model_owner, params->model_name,
							 params->source.id_type, corpus->classes, &labels,
							 held ? nodes : NULL, n_stored, version, version_id);
	if (held && params->holdout > 0.0)
		write_holdout_rows(params, corpus, result, nodes, labels_relid, labels_sql, version,
						   &holdout_metrics);

	TimestampDifference(start, GetCurrentTimestamp(), &secs, &usecs);
	if (held)
	{
		/* every row written from the source: their ids summed as the read's */
		GnbIdSum	ids = {&params->source, 0};

		Assert(labels.n == 0);
		gnb_store_document_labels_from(params, labels_relid, labels_sql, version, version_id,
									   corpus->n_classes,
									   (int64) corpus->n_held + corpus->n_labeled +
									   (params->holdout > 0.0 ? corpus->n_holdout : 0),
									   gnb_id_sum_add, &ids);
		gnb_nodes_check_ids(nodes, ids.sum);
	}
	gnb_store_version(params, corpus, result, gnb_warnings_array(result, corpus->classes),
					  &labels, version, version_id, labels_relid, keep_versions,
					  seconds_so_far + secs + usecs / 1e6);
	if (params->holdout > 0.0)
		gnb_store_holdout(params->model_owner, params->model_name, version, params->holdout,
						  holdout_metrics);
	/* the model keeps its newest keep_versions versions, this one included */
	(void) gnb_apply_retention(params->model_owner, params->model_name, version, keep_versions);

	SPI_finish();
	return version;
}
