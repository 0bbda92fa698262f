/*
 * compat.h
 *	  The server APIs gibbs_nb uses that differ between PostgreSQL 15, 16
 *	  and 17, behind one name each.
 */
#ifndef GNB_COMPAT_H
#define GNB_COMPAT_H

#include "storage/proc.h"

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

#endif							/* GNB_COMPAT_H */
