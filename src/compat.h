/*
 * compat.h
 *	  The server APIs gibbs_nb uses that differ between PostgreSQL 15, 16,
 *	  17 and 18, behind one name each.  Each guard names the release that
 *	  changed the API, so that every release between takes the right branch.
 */
#ifndef GNB_COMPAT_H
#define GNB_COMPAT_H

#include "catalog/pg_namespace.h"
#include "storage/proc.h"
#include "utils/acl.h"

/* PostgreSQL 16 moved the varlena macros (VARDATA_ANY, ...) from postgres.h to varatt.h. */
#if PG_VERSION_NUM >= 160000
#include "varatt.h"
#endif

/*
 * PostgreSQL 18 replaced the postfix pg_attribute_noreturn() by the prefix
 * pg_noreturn (C11 _Noreturn); before it, the attribute serves as a prefix.
 */
#if PG_VERSION_NUM < 180000 && !defined(pg_noreturn)
#define pg_noreturn pg_attribute_noreturn()
#endif

/*
 * PostgreSQL 18 lets a module name itself and its version in its magic block
 * (pg_get_loaded_modules() shows them).  GNB_VERSION is the control file's
 * default_version, passed by the Makefile, so the two cannot disagree.
 */
#if PG_VERSION_NUM >= 180000
#define GNB_MODULE_MAGIC PG_MODULE_MAGIC_EXT(.name = "gibbs_nb", .version = GNB_VERSION)
#else
#define GNB_MODULE_MAGIC PG_MODULE_MAGIC
#endif

/* PostgreSQL 17 moved the local transaction id into PGPROC's vxid. */
#if PG_VERSION_NUM >= 170000
#define GNB_MY_LXID() (MyProc->vxid.lxid)
#else
#define GNB_MY_LXID() (MyProc->lxid)
#endif

/* PostgreSQL 16 gave stringToQualifiedNameList a soft-error context. */
#if PG_VERSION_NUM >= 160000
#define gnb_qualified_name_list(str) stringToQualifiedNameList((str), NULL)
#else
#define gnb_qualified_name_list(str) stringToQualifiedNameList(str)
#endif

/* PostgreSQL 16 folded pg_namespace_aclcheck and friends into object_aclcheck. */
#if PG_VERSION_NUM >= 160000
#define gnb_namespace_aclcheck(nsp, role, mode) \
	object_aclcheck(NamespaceRelationId, (nsp), (role), (mode))
#else
#define gnb_namespace_aclcheck(nsp, role, mode) pg_namespace_aclcheck((nsp), (role), (mode))
#endif

/* PostgreSQL 18 made the bytes pg_b64_encode reads and pg_b64_decode writes uint8. */
#if PG_VERSION_NUM >= 180000
typedef uint8 gnb_b64_byte;
#else
typedef char gnb_b64_byte;
#endif

/*
 * The longest a btree entry may be (an index tuple, its header included),
 * as nbtree.h has it for BLCKSZ pages: PostgreSQL 18's BTMaxItemSize takes
 * no page; 15's measured a page (the same 2,704 bytes at 8 kB).  Where it
 * is used, access/nbtree.h is included.
 */
#if PG_VERSION_NUM >= 180000
#define GNB_BTREE_ITEM_MAX ((Size) BTMaxItemSize)
#else
#define GNB_BTREE_ITEM_MAX \
	((Size) MAXALIGN_DOWN((BLCKSZ - MAXALIGN(SizeOfPageHeaderData + 3 * sizeof(ItemIdData) + \
											 3 * sizeof(ItemPointerData)) - \
						   MAXALIGN(sizeof(BTPageOpaqueData))) / 3))
#endif

#endif							/* GNB_COMPAT_H */
