/*
 * shim.c
 *	  The backend functions the files of src/counts, src/tokens.h,
 *	  src/models/model_format.c and src/worker/node_setup.c reference, for
 *	  running them under libFuzzer outside the server (see shim.h).
 *
 * Each function behaves as the server's does for what the fuzz targets give
 * it, and raises the same errors (SQLSTATE and message) where the code under
 * test could tell the difference.  Memory: every palloc is its own malloc,
 * so that AddressSanitizer sees the exact bounds of each allocation (the
 * server's allocator would hide an overrun inside its blocks); all of it is
 * freed by shim_free_all at the end of an input, as a memory context reset
 * would, so an ERROR that jumps out of the code leaks nothing.
 */
/*
 * The shim defines appendBinaryStringInfo and tuplestore_putvalues, whose
 * prototypes changed in later releases (PostgreSQL 18 takes const void * data
 * and const Datum / bool arrays): the headers' declarations are renamed out
 * of the way, and the shim's own definitions below declare them, so one
 * source fits every release.
 */
#define appendBinaryStringInfo shim_hidden_appendBinaryStringInfo
#define tuplestore_putvalues shim_hidden_tuplestore_putvalues
#define pq_sendbytes shim_hidden_pq_sendbytes
#include "shim.h"

#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "catalog/dependency.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "libpq/pqformat.h"
#include "mb/pg_wchar.h"
#include "nodes/memnodes.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/expandeddatum.h"
#include "utils/memutils.h"
#include "utils/tuplestore.h"
#undef appendBinaryStringInfo
#undef tuplestore_putvalues
#undef pq_sendbytes

/* ---- memory ---- */

/* Header of one palloc'd chunk: all live chunks are on one list. */
typedef struct ShimChunk
{
	struct ShimChunk *prev;
	struct ShimChunk *next;
	Size		size;
} ShimChunk;

/* the user's bytes start MAXALIGNed after the header, as palloc's do */
#define CHUNK_HDRSZ MAXALIGN(sizeof(ShimChunk))
#define CHUNK_OF(ptr) ((ShimChunk *) ((char *) (ptr) - CHUNK_HDRSZ))
#define CHUNK_DATA(chunk) ((void *) ((char *) (chunk) + CHUNK_HDRSZ))

static ShimChunk chunks = {&chunks, &chunks, 0};

/*
 * Contexts exist only to be passed around: every allocation goes on the one
 * list, whatever its context.
 */
static MemoryContextData top_context;
static MemoryContextData agg_context;
MemoryContext CurrentMemoryContext = &top_context;
MemoryContext shim_agg_context = &agg_context;

static void *
shim_alloc(Size size, int flags)
{
	ShimChunk  *chunk;

	if (!((flags & MCXT_ALLOC_HUGE) ? AllocHugeSizeIsValid(size) : AllocSizeIsValid(size)))
		elog(ERROR, "invalid memory alloc request size %zu", size);
	chunk = (flags & MCXT_ALLOC_ZERO) ? calloc(1, CHUNK_HDRSZ + size) : malloc(CHUNK_HDRSZ + size);
	if (chunk == NULL)
	{
		if (flags & MCXT_ALLOC_NO_OOM)
			return NULL;
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	}
	chunk->size = size;
	chunk->next = chunks.next;
	chunk->prev = &chunks;
	chunks.next->prev = chunk;
	chunks.next = chunk;
	return CHUNK_DATA(chunk);
}

void *
MemoryContextAlloc(MemoryContext context, Size size)
{
	return shim_alloc(size, 0);
}

void *
MemoryContextAllocZero(MemoryContext context, Size size)
{
	return shim_alloc(size, MCXT_ALLOC_ZERO);
}

void *
MemoryContextAllocExtended(MemoryContext context, Size size, int flags)
{
	return shim_alloc(size, flags);
}

void *
palloc(Size size)
{
	return shim_alloc(size, 0);
}

void *
palloc0(Size size)
{
	return shim_alloc(size, MCXT_ALLOC_ZERO);
}

void *
palloc_extended(Size size, int flags)
{
	return shim_alloc(size, flags);
}

void
pfree(void *pointer)
{
	ShimChunk  *chunk = CHUNK_OF(pointer);

	chunk->prev->next = chunk->next;
	chunk->next->prev = chunk->prev;
	free(chunk);
}

static void *
shim_realloc(void *pointer, Size size, int flags)
{
	void	   *copy = shim_alloc(size, flags);

	memcpy(copy, pointer, Min(size, CHUNK_OF(pointer)->size));
	pfree(pointer);
	return copy;
}

void *
repalloc(void *pointer, Size size)
{
	return shim_realloc(pointer, size, 0);
}

void *
repalloc_huge(void *pointer, Size size)
{
	return shim_realloc(pointer, size, MCXT_ALLOC_HUGE);
}

/*
 * A memory context of its own, as an expanded object asks for: only its
 * parent is real (its allocations go on the one list all the same).
 */
MemoryContext
AllocSetContextCreateInternal(MemoryContext parent, const char *name, Size minContextSize,
							  Size initBlockSize, Size maxBlockSize)
{
	MemoryContext cxt = shim_alloc(sizeof(MemoryContextData), MCXT_ALLOC_ZERO);

	cxt->parent = parent;
	cxt->name = name;
	return cxt;
}

/*
 * Deleting a context frees nothing here: its allocations are on the one
 * list, and go when the input is done (shim_free_all).
 */
void
MemoryContextDelete(MemoryContext context)
{
}

/*
 * A context's reset callbacks, as the server keeps them: here they are
 * called when the input is done, before its memory goes (shim_free_all).
 */
static MemoryContextCallback *callbacks = NULL;

void
MemoryContextRegisterResetCallback(MemoryContext context, MemoryContextCallback *cb)
{
	cb->next = callbacks;
	callbacks = cb;
}

void
shim_free_all(void)
{
	while (callbacks != NULL)
	{
		MemoryContextCallback *cb = callbacks;

		callbacks = cb->next;
		cb->func(cb->arg);
	}
	while (chunks.next != &chunks)
		pfree(CHUNK_DATA(chunks.next));
	CurrentMemoryContext = &top_context;
}

/*
 * What a context has allocated: contexts are not tracked here, and the only
 * caller (the state's memory budget) is off in the fuzz targets, whose
 * gibbs_nb.class_counts_budget stays 0.
 */
Size
MemoryContextMemAllocated(MemoryContext context, bool recurse)
{
	return 0;
}

/* gibbs_nb.class_counts_budget (gibbs_nb.c): no bound, as by default */
int			gnb_class_counts_budget_kb = 0;

/* ---- errors ---- */

int			shim_sqlerrcode;
char		shim_errmsg[SHIM_ERRMSG_LEN];
static int	error_elevel;
static sigjmp_buf *error_jump;

bool
shim_try(void (*fn) (void *arg), void *arg)
{
	sigjmp_buf	jump;
	sigjmp_buf *outer = error_jump;
	MemoryContext cxt = CurrentMemoryContext;
	bool		returned = false;

	shim_sqlerrcode = 0;
	shim_errmsg[0] = '\0';
	if (sigsetjmp(jump, 0) == 0)
	{
		error_jump = &jump;
		fn(arg);
		returned = true;
	}
	error_jump = outer;
	CurrentMemoryContext = cxt;
	return returned;
}

const char *
shim_sqlstate(int sqlerrcode)
{
	static char buf[6];

	for (int i = 0; i < 5; i++)
	{
		buf[i] = PGUNSIXBIT(sqlerrcode);
		sqlerrcode >>= 6;
	}
	buf[5] = '\0';
	return buf;
}

void
shim_fail(const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	abort();
}

#ifdef USE_ASSERT_CHECKING
/*
 * Headers of a server built with assertions (the test command's PostgreSQL
 * 18) turn Assert() into calls of this: a failed one is a finding.
 */
void
ExceptionalCondition(const char *conditionName, const char *fileName, int lineNumber)
{
	shim_fail("TRAP: failed Assert(\"%s\"), File: \"%s\", Line: %d",
			  conditionName, fileName, lineNumber);
}
#endif

/* Only ERROR and above get this far: lower levels are not reported. */
bool
errstart(int elevel, const char *domain)
{
	if (elevel < ERROR)
		return false;
	error_elevel = elevel;
	shim_sqlerrcode = ERRCODE_INTERNAL_ERROR;	/* elog's default, as in the server */
	shim_errmsg[0] = '\0';
	return true;
}

bool
errstart_cold(int elevel, const char *domain)
{
	return errstart(elevel, domain);
}

int
errcode(int sqlerrcode)
{
	shim_sqlerrcode = sqlerrcode;
	return 0;
}

int
errmsg(const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(shim_errmsg, sizeof(shim_errmsg), fmt, ap);
	va_end(ap);
	return 0;
}

int
errmsg_internal(const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(shim_errmsg, sizeof(shim_errmsg), fmt, ap);
	va_end(ap);
	return 0;
}

/* A hint is not part of what the targets compare: dropped. */
int
errhint(const char *fmt,...)
{
	return 0;
}

/* Nor is a detail. */
int
errdetail(const char *fmt,...)
{
	return 0;
}

/*
 * An ERROR leaves the code under test as the server's longjmp would; with
 * no shim_try around it, or at FATAL and above, that is a finding.
 */
void
errfinish(const char *filename, int lineno, const char *funcname)
{
	if (error_elevel == ERROR && error_jump != NULL)
		siglongjmp(*error_jump, 1);
	shim_fail("%s:%d (%s): uncaught error %s: %s", filename, lineno, funcname,
			  shim_sqlstate(shim_sqlerrcode), shim_errmsg);
}

/* ---- expanded objects, as utils/adt/expandeddatum.c ---- */

void
EOH_init_header(ExpandedObjectHeader *eohptr, const ExpandedObjectMethods *methods,
				MemoryContext obj_context)
{
	varatt_expanded eptr;

	eohptr->vl_len_ = EOH_HEADER_MAGIC;
	eohptr->eoh_methods = methods;
	eohptr->eoh_context = obj_context;
	eptr.eohptr = eohptr;
	SET_VARTAG_EXTERNAL(eohptr->eoh_rw_ptr, VARTAG_EXPANDED_RW);
	memcpy(VARDATA_EXTERNAL(eohptr->eoh_rw_ptr), &eptr, sizeof(eptr));
	SET_VARTAG_EXTERNAL(eohptr->eoh_ro_ptr, VARTAG_EXPANDED_RO);
	memcpy(VARDATA_EXTERNAL(eohptr->eoh_ro_ptr), &eptr, sizeof(eptr));
}

ExpandedObjectHeader *
DatumGetEOHP(Datum d)
{
	varattrib_1b_e *datum = (varattrib_1b_e *) DatumGetPointer(d);
	varatt_expanded ptr;

	if (!VARATT_IS_EXTERNAL_EXPANDED(datum))
		shim_fail("DatumGetEOHP: not an expanded object");
	memcpy(&ptr, VARDATA_EXTERNAL(datum), sizeof(ptr));
	if (!VARATT_IS_EXPANDED_HEADER(ptr.eohptr))
		shim_fail("DatumGetEOHP: bad expanded object header");
	return ptr.eohptr;
}

void
DeleteExpandedObject(Datum d)
{
	MemoryContextDelete(DatumGetEOHP(d)->eoh_context);
}

/*
 * The catalog, read only in a window aggregate (class_counts.c's
 * state_writable): AggCheckCallContext below never says window.
 */
Oid
getExtensionOfObject(Oid classId, Oid objectId)
{
	shim_fail("getExtensionOfObject: no catalog in the fuzzer");
	return InvalidOid;
}

/* ---- varlena values: the targets only build plain, in-line ones ---- */

struct varlena *
pg_detoast_datum(struct varlena *datum)
{
	if (VARATT_IS_EXTERNAL(datum) || VARATT_IS_COMPRESSED(datum))
		shim_fail("pg_detoast_datum: a toasted value is not supported here");
	if (VARATT_IS_SHORT(datum))
	{
		/* as detoast_attr: a copy with a 4-byte header */
		Size		data_size = VARSIZE_SHORT(datum) - VARHDRSZ_SHORT;
		struct varlena *copy = palloc(data_size + VARHDRSZ);

		SET_VARSIZE(copy, data_size + VARHDRSZ);
		memcpy(VARDATA(copy), VARDATA_SHORT(datum), data_size);
		return copy;
	}
	return datum;
}

struct varlena *
pg_detoast_datum_copy(struct varlena *datum)
{
	struct varlena *plain = pg_detoast_datum(datum);
	struct varlena *copy;

	if (plain != datum)
		return plain;
	copy = palloc(VARSIZE(datum));
	memcpy(copy, datum, VARSIZE(datum));
	return copy;
}

struct varlena *
pg_detoast_datum_packed(struct varlena *datum)
{
	if (VARATT_IS_EXTERNAL(datum) || VARATT_IS_COMPRESSED(datum))
		shim_fail("pg_detoast_datum_packed: a toasted value is not supported here");
	return datum;
}

text *
cstring_to_text_with_len(const char *s, int len)
{
	text	   *result = (text *) palloc(len + VARHDRSZ);

	SET_VARSIZE(result, len + VARHDRSZ);
	memcpy(VARDATA(result), s, len);
	return result;
}

/* ---- StringInfo, as in common/stringinfo.c ---- */

void
initStringInfo(StringInfo str)
{
	str->maxlen = 1024;
	str->data = palloc(str->maxlen);
	resetStringInfo(str);
}

void
resetStringInfo(StringInfo str)
{
	str->data[0] = '\0';
	str->len = 0;
	str->cursor = 0;
}

void
enlargeStringInfo(StringInfo str, int needed)
{
	int			newlen;

	if (needed < 0)
		elog(ERROR, "invalid string enlargement request size: %d", needed);
	if (((Size) needed) >= (MaxAllocSize - (Size) str->len))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("out of memory")));
	needed += str->len + 1;
	if (needed <= str->maxlen)
		return;
	newlen = 2 * str->maxlen;
	while (needed > newlen)
		newlen = 2 * newlen;
	if (newlen > (int) MaxAllocSize)
		newlen = (int) MaxAllocSize;
	str->data = repalloc(str->data, newlen);
	str->maxlen = newlen;
}

void		appendBinaryStringInfo(StringInfo str, const void *data, int datalen);

void
appendBinaryStringInfo(StringInfo str, const void *data, int datalen)
{
	enlargeStringInfo(str, datalen);
	memcpy(str->data + str->len, data, datalen);
	str->len += datalen;
	str->data[str->len] = '\0';
}

void
appendStringInfoSpaces(StringInfo str, int count)
{
	if (count > 0)
	{
		enlargeStringInfo(str, count);
		while (--count >= 0)
			str->data[str->len++] = ' ';
		str->data[str->len] = '\0';
	}
}

/* ---- arrays, as in utils/adt/arrayutils.c ---- */

int
ArrayGetNItems(int ndim, const int *dims)
{
	int32		ret = 1;

	if (ndim <= 0)
		return 0;
	for (int i = 0; i < ndim; i++)
	{
		int64		prod;

		if (dims[i] < 0)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("array size exceeds the maximum allowed (%d)",
							(int) MaxArraySize)));
		prod = (int64) ret * (int64) dims[i];
		ret = (int32) prod;
		if ((int64) ret != prod)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("array size exceeds the maximum allowed (%d)",
							(int) MaxArraySize)));
	}
	if ((Size) ret > MaxArraySize)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("array size exceeds the maximum allowed (%d)",
						(int) MaxArraySize)));
	return (int) ret;
}

/* ---- encoding: a UTF8 database, checked by common/wchar.c itself ---- */

bool
pg_verifymbstr(const char *mbstr, int len, bool noError)
{
	int			ok_bytes = pg_encoding_verifymbstr(PG_UTF8, mbstr, len);
	char		buf[8 * 5 + 1];
	char	   *p = buf;
	int			n;

	if (ok_bytes == len)
		return true;
	if (noError)
		return false;
	/* report_invalid_encoding: the bytes of the bad character, at most 8 */
	n = Min(pg_encoding_mblen_or_incomplete(PG_UTF8, mbstr + ok_bytes, len - ok_bytes),
			len - ok_bytes);
	n = Min(n, 8);
	buf[0] = '\0';
	for (int j = 0; j < n; j++)
		p += sprintf(p, j ? " 0x%02x" : "0x%02x", (unsigned char) mbstr[ok_bytes + j]);
	ereport(ERROR,
			(errcode(ERRCODE_CHARACTER_NOT_IN_REPERTOIRE),
			 errmsg("invalid byte sequence for encoding \"%s\": %s", "UTF8", buf)));
	return false;
}

/* ---- what an aggregate and a set-returning function are given ---- */

int
AggCheckCallContext(FunctionCallInfo fcinfo, MemoryContext *aggcontext)
{
	if (aggcontext)
		*aggcontext = shim_agg_context;
	return AGG_CONTEXT_AGGREGATE;
}

void		(*shim_row_hook) (const Datum *values, const bool *nulls, void *arg);
void	   *shim_row_arg;

/* The target reads the rows through shim_row_hook: no tuplestore. */
void
InitMaterializedSRF(FunctionCallInfo fcinfo, bits32 flags)
{
}

void		tuplestore_putvalues(Tuplestorestate *state, TupleDesc tdesc,
								 const Datum *values, const bool *isnull);

void
tuplestore_putvalues(Tuplestorestate *state, TupleDesc tdesc, const Datum *values,
					 const bool *isnull)
{
	if (shim_row_hook == NULL)
		shim_fail("tuplestore_putvalues: no row hook");
	shim_row_hook(values, isnull, shim_row_arg);
}

/* ---- interrupts (CHECK_FOR_INTERRUPTS in model_format.c, node_setup.c): never pending ---- */

volatile sig_atomic_t InterruptPending = false;

void
ProcessInterrupts(void)
{
	shim_fail("ProcessInterrupts called with no interrupt pending");
}

/* pnstrdup, as the backend's (model_format.c) */
char *
pnstrdup(const char *in, Size len)
{
	char	   *out;

	len = strnlen(in, len);
	out = palloc(len + 1);
	memcpy(out, in, len);
	out[len] = '\0';
	return out;
}

/* ---- pqformat, as in libpq/pqformat.c (node_setup.c) ---- */

void		pq_sendbytes(StringInfo buf, const void *data, int datalen);

void
pq_sendbytes(StringInfo buf, const void *data, int datalen)
{
	appendBinaryStringInfo(buf, data, datalen);
}

void
pq_sendfloat8(StringInfo buf, float8 f)
{
	union
	{
		float8		f;
		int64		i;
	}			swap;

	swap.f = f;
	pq_sendint64(buf, swap.i);
}

bytea *
pq_endtypsend(StringInfo buf)
{
	bytea	   *result = (bytea *) buf->data;

	SET_VARSIZE(result, buf->len);
	return result;
}

/* the message's next datalen bytes, or the server's protocol error */
static const char *
shim_msg_bytes(StringInfo msg, int datalen)
{
	const char *p;

	if (datalen < 0 || datalen > (msg->len - msg->cursor))
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("insufficient data left in message")));
	p = &msg->data[msg->cursor];
	msg->cursor += datalen;
	return p;
}

int
pq_getmsgbyte(StringInfo msg)
{
	if (msg->cursor >= msg->len)
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("no data left in message")));
	return (unsigned char) msg->data[msg->cursor++];
}

unsigned int
pq_getmsgint(StringInfo msg, int b)
{
	const unsigned char *p;
	unsigned int result = 0;

	if (b != 1 && b != 2 && b != 4)
		elog(ERROR, "unsupported integer size %d", b);
	p = (const unsigned char *) shim_msg_bytes(msg, b);
	for (int i = 0; i < b; i++)
		result = (result << 8) | p[i];
	return result;
}

int64
pq_getmsgint64(StringInfo msg)
{
	const unsigned char *p = (const unsigned char *) shim_msg_bytes(msg, 8);
	uint64		result = 0;

	for (int i = 0; i < 8; i++)
		result = (result << 8) | p[i];
	return (int64) result;
}

float8
pq_getmsgfloat8(StringInfo msg)
{
	union
	{
		float8		f;
		int64		i;
	}			swap;

	swap.i = pq_getmsgint64(msg);
	return swap.f;
}

const char *
pq_getmsgbytes(StringInfo msg, int datalen)
{
	return shim_msg_bytes(msg, datalen);
}

/* ---- calling a V1 function ---- */

Datum
shim_call(PGFunction fn, int nargs, Datum a0, Datum a1, Node *resultinfo, bool *isnull)
{
	LOCAL_FCINFO(fcinfo, 2);
	Datum		result;

	InitFunctionCallInfoData(*fcinfo, NULL, nargs, InvalidOid, NULL, resultinfo);
	fcinfo->args[0].value = a0;
	fcinfo->args[0].isnull = a0 == (Datum) 0;
	fcinfo->args[1].value = a1;
	fcinfo->args[1].isnull = a1 == (Datum) 0;
	result = fn(fcinfo);
	*isnull = fcinfo->isnull;
	return result;
}
