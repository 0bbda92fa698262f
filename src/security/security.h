/*
 * security/security.h
 *	  Every privilege decision: switching to the extension's owner or a
 *	  model's owner and back (privileges.c, with the one SPI helper that runs
 *	  a statement as either), who owns a model (owners.c: the owner registry,
 *	  name resolution, the row security policy), what a valid source is and
 *	  locking it (source.c), and a worker becoming its caller (identity.c).
 *
 * The tables in schema gibbs_nb are owned by the extension's owner and are
 * not writable by anyone else.  Code that writes them (or must see other
 * roles' rows) switches to that owner for the duration, with search_path
 * pinned to pg_catalog so that nothing a user created can be called with
 * those privileges.  Code that reads them as the caller relies on their row
 * security (see gibbs_nb--0.1.0--0.2.0.sql).
 */
#ifndef GNB_SECURITY_SECURITY_H
#define GNB_SECURITY_SECURITY_H

#include "gibbs_nb.h"

#include "storage/lockdefs.h"

/* privileges.c: switching roles, and running statements as one */
typedef struct GnbPrivilegeState
{
	Oid			save_user;
	int			save_sec_context;
	int			save_nestlevel;
} GnbPrivilegeState;

/* privileges.c: a region whose lock waits are bounded (gibbs_nb.lock_timeout) */
typedef struct GnbLockWait
{
	int			nest_level;		/* its own GUC level for the bound, or 0 */
	ErrorContextCallback callback;
} GnbLockWait;

typedef enum GnbRunAs
{
	GNB_AS_CALLER,				/* the current user, row security applies */
	GNB_AS_INTERNAL				/* the extension's owner */
} GnbRunAs;

/* privileges.c */
extern Oid	gnb_internal_owner(void);
extern void gnb_become_internal(GnbPrivilegeState *state);
extern void gnb_become_role(Oid role, GnbPrivilegeState *state);
extern void gnb_restore_user(GnbPrivilegeState *state);
extern void gnb_pin_search_path(GnbPrivilegeState *state);
extern int	gnb_lock_wait_bound_ms(void);
extern void gnb_lock_wait_begin(GnbLockWait *wait);
extern void gnb_lock_wait_end(GnbLockWait *wait);
extern void gnb_lock_relation_bounded(Oid relid, LOCKMODE mode);
extern void gnb_execute(const char *sql, int nargs, Oid *types, Datum *values,
						const char *nulls, GnbRunAs as, int expected, long limit);
extern void gnb_execute_unfolded(const char *sql, int nargs, Oid *types, Datum *values,
								 const char *nulls, GnbRunAs as, int expected);
extern void gnb_install_statement_target_check(void);
extern void gnb_execute_on_relation(Oid relid, const char *sql, int nargs, Oid *types,
									Datum *values, int expected);
extern Datum gnb_result_value(int col, bool *isnull);
extern void gnb_lock_namespace_name(Oid nspid, bool nowait);
extern char *gnb_current_role_name(void);
extern void gnb_model_statement(const char *sql, const char *owner, const char *model_name,
								GnbRunAs as, int expected, long limit);

/*
 * A model row's relation, as SQL: relid and name columns of gibbs_nb.models
 * (gibbs_nb.model_relation, owners.c).
 */
#define MODEL_RELATION(relid, name) \
	"gibbs_nb.model_relation(" relid ", " name ", catalog, owner)"

/* owners.c */
extern Oid	gnb_relation_owner(Oid relid);
extern Oid	gnb_labels_table_owner(Oid relid, const char *model_owner, const char *model_name,
								   int elevel);
extern const char *gnb_cluster_identity(void);
extern Oid	gnb_owner_role(const char *owner);
extern Oid	gnb_owner_role_required(const char *owner);
extern Oid	gnb_check_owner(const char *owner);
extern void gnb_register_owner(const char *owner, Oid role);
extern const char *gnb_choose_owner(const char *model_name, char **owners, int n);
extern const char *gnb_resolve_model_owner(const char *model_name, bool missing_ok);
extern char *gnb_catalog_identity(void);
extern bool gnb_labels_table_registered(const char *owner, const char *model_name, Oid relid);

/* source.c: the one definition of a valid source, for caller and worker */
extern void gnb_describe_source(Oid relid, const char *tokens_column,
								const char *label_column, const char *id_column,
								GnbSourceDesc *desc);
extern char *gnb_lock_source(const GnbSourceDesc *checked, int64 job_id);
extern void gnb_check_result_column(TupleDesc desc, int col, Oid type, const char *what);
extern void gnb_check_label_values(int n_values, int n_classes, const char *source);

/* identity.c: a job's worker or chain worker becomes the caller */
extern void gnb_become_caller(const GnbJobParams *p, const char *application_name);

#endif							/* GNB_SECURITY_SECURITY_H */
