/*
 * source.c
 *	  What a training source must be, checked once in the caller and again in
 *	  the worker, under a lock, before it is read.
 *
 * The caller describes the source (gnb_describe_source): its OID, the columns'
 * numbers and declared types.  That description travels to the worker, which
 * trusts none of it: it locks the OID, describes the relation again with the
 * same function and refuses to read if anything differs (a view replaced by
 * one with other column types, a column altered or dropped and re-added, the
 * relation dropped).  Only then does it make the relation's name, from the
 * catalogs, under the lock, for its queries; and it checks the type of every
 * column the queries return before it interprets a value.  Nothing is found
 * again by a name that was checked earlier.
 */
#include "gibbs_nb.h"

#include "security/security.h"

#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

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

/*
 * Describe a source as the current user may use it, or raise the error that
 * says why not.  The one definition of a valid source: gibbs_nb_train's
 * checks and the worker's re-check are both this function, and so are
 * gibbs_nb_evaluate's, which passes no id_column (NULL: no id is read).
 */
void
gnb_describe_source(Oid relid, const char *tokens_column, const char *label_column,
					const char *id_column, GnbSourceDesc *desc)
{
	char		relkind = get_rel_relkind(relid);

	memset(desc, 0, sizeof(*desc));
	if (relkind == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	if (relkind != RELKIND_RELATION && relkind != RELKIND_VIEW && relkind != RELKIND_MATVIEW &&
		relkind != RELKIND_PARTITIONED_TABLE && relkind != RELKIND_FOREIGN_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a table or view", get_rel_name(relid))));
	desc->relid = relid;
	desc->relkind = relkind;
	strlcpy(desc->tokens_column, tokens_column, NAMEDATALEN);
	if (id_column != NULL)
		strlcpy(desc->id_column, id_column, NAMEDATALEN);

	desc->tokens_attnum = source_column(relid, tokens_column, "tokens_column");
	desc->tokens_type = get_atttype(relid, desc->tokens_attnum);
	desc->tokens_base = getBaseType(desc->tokens_type);
	if (desc->tokens_base != TEXTARRAYOID && desc->tokens_base != TSVECTOROID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("tokens column \"%s\" is of type %s, not text[] or tsvector",
						tokens_column, format_type_be(desc->tokens_type)),
				 errhint("Cast it in a view, e.g. tokens::text[], or use to_tsvector().")));

	/* gibbs_nb_evaluate reads no ids */
	if (id_column != NULL)
	{
		desc->id_attnum = source_column(relid, id_column, "id_column");
		get_atttypetypmodcoll(relid, desc->id_attnum, &desc->id_type, &desc->id_typmod,
							  &desc->id_collation);
		if (!OidIsValid(lookup_type_cache(desc->id_type, TYPECACHE_EQ_OPR)->eq_opr))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_FUNCTION),
					 errmsg("id column \"%s\" is of type %s, which has no equality operator",
							id_column, format_type_be(desc->id_type))));
		if (!OidIsValid(get_array_type(desc->id_type)))
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("id column \"%s\" is of type %s, which has no array type",
							id_column, format_type_be(desc->id_type))));
	}

	if (label_column != NULL && label_column[0] != '\0')
	{
		strlcpy(desc->label_column, label_column, NAMEDATALEN);
		desc->label_attnum = source_column(relid, label_column, "label_column");
		desc->label_type = get_atttype(relid, desc->label_attnum);
	}
}

static bool
same_source(const GnbSourceDesc *a, const GnbSourceDesc *b)
{
	return a->relid == b->relid && a->relkind == b->relkind &&
		a->tokens_attnum == b->tokens_attnum && a->tokens_type == b->tokens_type &&
		a->label_attnum == b->label_attnum && a->label_type == b->label_type &&
		a->id_attnum == b->id_attnum && a->id_type == b->id_type &&
		a->id_typmod == b->id_typmod && a->id_collation == b->id_collation;
}

/*
 * In the worker, inside the read's transaction and before its snapshot:
 * lock the source the caller checked, by OID, and check it again.  Returns
 * its quoted, qualified name, made now from the catalogs; the locks (held to
 * the end of the transaction, on the relation and on its schema's name) keep
 * it from being dropped, renamed or altered, and its name from meaning
 * another relation, while it is read.
 */
char *
gnb_lock_source(const GnbSourceDesc *checked, int64 job_id)
{
	GnbSourceDesc now;

	LockRelationOid(checked->relid, AccessShareLock);
	if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(checked->relid)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("the source of gibbs_nb job " INT64_FORMAT " was dropped before it was read",
						job_id)));
	gnb_describe_source(checked->relid, checked->tokens_column, checked->label_column,
						checked->id_column, &now);
	if (!same_source(checked, &now))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the source of gibbs_nb job " INT64_FORMAT " changed before it was read",
						job_id),
				 errdetail("Its columns are no longer those gibbs_nb_train checked."),
				 errhint("Train again.")));
	gnb_lock_namespace_name(get_rel_namespace(checked->relid), true);
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(checked->relid)),
									  get_rel_name(checked->relid));
}

/*
 * A column of a query's result must have the type the reader will take its
 * values as.  The lock makes a mismatch impossible; this makes it harmless.
 */
void
gnb_check_result_column(TupleDesc desc, int col, Oid type, const char *what)
{
	if (col > desc->natts || TupleDescAttr(desc, col - 1)->atttypid != type)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the %s column of the source read as type %s, not %s",
						what,
						col > desc->natts ? "(none)" :
						format_type_be(TupleDescAttr(desc, col - 1)->atttypid),
						format_type_be(type))));
}

/*
 * The number of distinct labels against n_classes (0: not given), with
 * `source` naming the relation: the one definition of a usable labelling,
 * for gibbs_nb_train's check and for the worker's read of the same rows.
 */
void
gnb_check_label_values(int n_values, int n_classes, const char *source)
{
	if (n_values > GNB_MAX_CLASSES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the label column has more than %d distinct values", GNB_MAX_CLASSES)));
	if (n_values == 0)
	{
		if (n_classes == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s has no labelled rows and n_classes was not given", source),
					 errhint("Pass n_classes to cluster the documents without labels.")));
		return;
	}
	if (n_classes != 0 && n_values != n_classes)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("n_classes is %d but the label column has %d distinct values",
						n_classes, n_values)));
	if (n_values < 2)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the label column has only one distinct value"),
				 errhint("A model needs at least 2 classes.")));
}
