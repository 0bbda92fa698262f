/*
 * shim.h
 *	  The few backend functions gibbs_nb's count value and token code call,
 *	  for the libFuzzer targets, which run that code outside the server.
 *
 * The targets compile the files of src/counts unchanged against the real server
 * headers and link it with shim.c instead of the server.  shim.c implements
 * what those objects reference (palloc and friends, ereport, detoasting of
 * plain values, StringInfo, ArrayGetNItems, the SRF and aggregate hooks) as
 * the server does for the inputs the targets build, and aborts on anything
 * else (a toasted value, FATAL), so that the fuzzer reports it.
 */
#ifndef GNB_FUZZ_SHIM_H
#define GNB_FUZZ_SHIM_H

#include "postgres.h"

#include "compat.h"

#include "fmgr.h"
#include "nodes/nodes.h"

/*
 * Run fn(arg) as if in a PG_TRY block: returns true if it returned, false if
 * it raised an ERROR, whose SQLSTATE (as from ERRCODE_*) and message are
 * then in shim_sqlerrcode and shim_errmsg.  CurrentMemoryContext is restored
 * either way, as the server's error recovery does.
 */
extern bool shim_try(void (*fn) (void *arg), void *arg);
extern int	shim_sqlerrcode;
#define SHIM_ERRMSG_LEN 1024
extern char shim_errmsg[SHIM_ERRMSG_LEN];

/* "22P03" for an ERRCODE_* value, for messages. */
extern const char *shim_sqlstate(int sqlerrcode);

/*
 * Free everything palloc'd since the last call: the end of a fuzz input,
 * like the reset of a query's memory context.  Nothing may be used after.
 */
extern void shim_free_all(void);

/* The context AggCheckCallContext gives out: "called as an aggregate". */
extern MemoryContext shim_agg_context;

/* Called by tuplestore_putvalues with each row a set-returning function returns. */
extern void (*shim_row_hook) (const Datum *values, const bool *nulls, void *arg);
extern void *shim_row_arg;

/* Call a V1 function with up to two arguments (a NULL pointer is SQL NULL). */
extern Datum shim_call(PGFunction fn, int nargs, Datum a0, Datum a1, Node *resultinfo,
					   bool *isnull);

/* Abort with a message: an invariant the fuzzer found broken. */
pg_noreturn extern void shim_fail(const char *fmt,...) pg_attribute_printf(1, 2);

#endif							/* GNB_FUZZ_SHIM_H */
