/*
 * node_setup.c
 *	  What a node of a blocked chain needs to know of its job before its
 *	  first call (nodes.h): the sampler's parameters, the source's columns,
 *	  the vocabulary, the clamped counts and the whole corpus's unlabelled
 *	  counts, as one bytea.
 *
 * The node may be another server: the relation it reads is named by the
 * call itself, with an OID of the node's own.  Numbers in network byte order (pqformat),
 * doubles by their bits.  Decoding checks every length against what is left
 * of the value before it allocates by it, so that a value made up by hand
 * costs about twice its own size at most (a pointer and a chunk a token),
 * which the node checks against its budget before it decodes.  The
 * labels-only model the nodes score their documents by, when the label
 * check falls back to it, is read here too.
 */
#include "gibbs_nb.h"

#include "worker/nodes.h"

#include "libpq/pqformat.h"
#include "miscadmin.h"
#include "utils/memutils.h"

#define SETUP_MAGIC		0x474E4253	/* "GNBS" */
#define SETUP_VERSION	2

/*
 * A bytea of exactly size bytes to write with pq_send* and end with
 * pq_endtypsend: allocated once, at its size (pq_begintypsend's buffer
 * doubles as it grows, up to twice what was counted against a budget).
 */
void
gnb_sized_bytea_begin(StringInfo buf, Size size)
{
	if (size > MaxAllocSize - VARHDRSZ - 1)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a gibbs_nb node message of %zu bytes is too large", size)));
	buf->maxlen = (int) (VARHDRSZ + size + 1);
	buf->data = palloc_extended(buf->maxlen, MCXT_ALLOC_HUGE);
	buf->len = VARHDRSZ;
	buf->cursor = 0;
	buf->data[buf->len] = '\0';
}

static void
send_name(StringInfo buf, const char *name)
{
	int			len = (int) strlen(name);

	pq_sendint32(buf, len);
	pq_sendbytes(buf, name, len);
}

bytea *
gnb_node_setup_encode(const GnbNodeSetup *s)
{
	StringInfoData buf;
	const int32 K = s->n_classes;
	const int32 V = s->n_words;
	const gnb_params *p = &s->sampler;
	double		size;

	/* its size, written below: within one value, in one allocation */
	size = 8 + 8 + 5 * 4 + 3 * 8 + 8 + 3 * 4 + 2 * 4 +
		12.0 + strlen(s->id_column) + strlen(s->tokens_column) + strlen(s->label_column) + 8 +
		1 + (s->extra_word_counts ? 8.0 * V * K + 8.0 * K : 0.0) + 8.0 * V + 8 + 4 + 8 +
		12.0 * s->n_warm;
	for (int32 w = 0; w < V; w++)
		size += 4.0 + strlen(s->tokens[w]);
	if (size > MaxAllocSize - VARHDRSZ - 1)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the setup of gibbs_nb job " INT64_FORMAT "'s nodes would take %.0f bytes",
						s->job_id, size),
				 errdetail("A value holds at most 1 GB: the vocabulary, the clamped counts and a "
						   "warm start's labels must fit in it.")));
	gnb_sized_bytea_begin(&buf, (Size) size);
	pq_sendint32(&buf, SETUP_MAGIC);
	pq_sendint32(&buf, SETUP_VERSION);
	pq_sendint64(&buf, s->job_id);
	pq_sendint32(&buf, (int32) p->sampler);
	pq_sendint32(&buf, p->sweeps);
	pq_sendint32(&buf, p->burn_in);
	pq_sendint32(&buf, p->lag);
	pq_sendint32(&buf, p->chains);
	pq_sendfloat8(&buf, p->gamma_pi);
	pq_sendfloat8(&buf, p->gamma_theta);
	pq_sendfloat8(&buf, p->unlabeled_weight);
	pq_sendint64(&buf, (int64) p->seed);
	pq_sendint32(&buf, (int32) p->init);
	pq_sendint32(&buf, p->sample_gamma_theta);
	pq_sendint32(&buf, p->sample_gamma_pi);
	pq_sendint32(&buf, K);
	pq_sendint32(&buf, V);
	send_name(&buf, s->id_column);
	send_name(&buf, s->tokens_column);
	send_name(&buf, s->label_column);
	pq_sendint64(&buf, s->max_job_memory);
	for (int32 w = 0; w < V; w++)
	{
		int			len = (int) strlen(s->tokens[w]);

		pq_sendint32(&buf, len);
		pq_sendbytes(&buf, s->tokens[w], len);
	}
	pq_sendbyte(&buf, s->extra_word_counts != NULL);
	if (s->extra_word_counts)
	{
		for (int64 i = 0; i < (int64) V * K; i++)
			pq_sendfloat8(&buf, s->extra_word_counts[i]);
		for (int32 k = 0; k < K; k++)
			pq_sendfloat8(&buf, s->extra_doc_counts[k]);
	}
	for (int32 w = 0; w < V; w++)
		pq_sendint64(&buf, s->all_unlabeled_count[w]);
	pq_sendint64(&buf, s->all_n_unlabeled);
	pq_sendint32(&buf, s->warm);
	pq_sendint64(&buf, s->n_warm);
	for (int64 i = 0; i < s->n_warm; i++)
	{
		pq_sendint64(&buf, (int64) s->warm_keys[i]);
		pq_sendint32(&buf, s->warm_labels[i]);
	}
	Assert(buf.len == VARHDRSZ + (int) size);
	return pq_endtypsend(&buf);
}

static void
bad_setup(const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
			 errmsg("invalid gibbs_nb node setup"),
			 errdetail("%s", detail)));
}

/* n more bytes must be left in the value */
static void
need(StringInfo msg, double n)
{
	if (n > (double) (msg->len - msg->cursor))
		bad_setup("It is shorter than its lengths say.");
}

static void
get_name(StringInfo msg, char *dst)
{
	int			len;

	need(msg, 4);
	len = pq_getmsgint(msg, 4);
	if (len < 0 || len >= NAMEDATALEN)
		bad_setup("A name is longer than an identifier may be.");
	need(msg, len);
	memcpy(dst, pq_getmsgbytes(msg, len), len);
	dst[len] = '\0';
	if ((int) strlen(dst) != len)
		bad_setup("A name holds a zero byte.");
}

void
gnb_node_setup_decode(bytea *value, GnbNodeSetup *s)
{
	StringInfoData msg;
	gnb_params *p = &s->sampler;
	int32		K,
				V;

	memset(s, 0, sizeof(*s));
	gnb_bytea_reader(&msg, value);
	need(&msg, 8);
	if (pq_getmsgint(&msg, 4) != SETUP_MAGIC || pq_getmsgint(&msg, 4) != SETUP_VERSION)
		bad_setup("It is not a node setup of this version of gibbs_nb.");
	need(&msg, 8 + 5 * 4 + 3 * 8 + 8 + 3 * 4 + 2 * 4);
	s->job_id = pq_getmsgint64(&msg);
	p->sampler = (gnb_sampler_kind) pq_getmsgint(&msg, 4);
	p->sweeps = pq_getmsgint(&msg, 4);
	p->burn_in = pq_getmsgint(&msg, 4);
	p->lag = pq_getmsgint(&msg, 4);
	p->chains = pq_getmsgint(&msg, 4);
	p->gamma_pi = pq_getmsgfloat8(&msg);
	p->gamma_theta = pq_getmsgfloat8(&msg);
	p->unlabeled_weight = pq_getmsgfloat8(&msg);
	p->seed = (uint64) pq_getmsgint64(&msg);
	p->init = (gnb_init_kind) pq_getmsgint(&msg, 4);
	p->sample_gamma_theta = pq_getmsgint(&msg, 4);
	p->sample_gamma_pi = pq_getmsgint(&msg, 4);
	p->no_trace = 1;
	K = s->n_classes = pq_getmsgint(&msg, 4);
	V = s->n_words = pq_getmsgint(&msg, 4);
	if (p->sampler != GNB_SAMPLER_BLOCKED)
		bad_setup("Only the blocked sampler's chains have nodes.");
	if (K < 2 || K > GNB_MAX_CLASSES || V < 0 || V >= PG_INT32_MAX)
		bad_setup("Its numbers of classes or words are out of range.");
	get_name(&msg, s->id_column);
	get_name(&msg, s->tokens_column);
	get_name(&msg, s->label_column);
	need(&msg, 8);
	s->max_job_memory = pq_getmsgint64(&msg);

	/* every array's least size is in the value before it is allocated */
	need(&msg, 4.0 * V + 1 + 8.0 * V + 8);
	s->tokens = palloc_extended(sizeof(char *) * ((Size) V + 1), MCXT_ALLOC_HUGE);
	for (int32 w = 0; w < V; w++)
	{
		int			len;
		char	   *t;

		/* the tokens before may have taken what the lengths were counted on */
		need(&msg, 4);
		len = pq_getmsgint(&msg, 4);
		if (len < 0)
			bad_setup("A token has a negative length.");
		need(&msg, len);
		t = palloc(len + 1);
		memcpy(t, pq_getmsgbytes(&msg, len), len);
		t[len] = '\0';
		if ((int) strlen(t) != len)
			bad_setup("A token holds a zero byte.");
		/* the vocabulary in byte order, each token once: nodes merge with it */
		if (w > 0 && strcmp(s->tokens[w - 1], t) >= 0)
			bad_setup("Its tokens are not in byte order.");
		s->tokens[w] = t;
	}
	need(&msg, 1);
	if (pq_getmsgbyte(&msg))
	{
		need(&msg, 8.0 * V * K + 8.0 * K);
		s->extra_word_counts = palloc_extended(sizeof(double) * ((Size) V * K + 1),
											   MCXT_ALLOC_HUGE);
		s->extra_doc_counts = palloc(sizeof(double) * K);
		for (int64 i = 0; i < (int64) V * K; i++)
			s->extra_word_counts[i] = pq_getmsgfloat8(&msg);
		for (int32 k = 0; k < K; k++)
			s->extra_doc_counts[k] = pq_getmsgfloat8(&msg);
	}
	need(&msg, 8.0 * V + 8);
	s->all_unlabeled_count = palloc_extended(sizeof(int64) * ((Size) V + 1), MCXT_ALLOC_HUGE);
	for (int32 w = 0; w < V; w++)
		s->all_unlabeled_count[w] = pq_getmsgint64(&msg);
	s->all_n_unlabeled = pq_getmsgint64(&msg);
	if (s->all_n_unlabeled < 0)
		bad_setup("Its number of unlabelled documents is negative.");
	need(&msg, 4 + 8);
	s->warm = pq_getmsgint(&msg, 4);
	s->n_warm = pq_getmsgint64(&msg);
	if ((s->warm != 0 && s->warm != 1) || s->n_warm < 0 || (s->n_warm > 0 && !s->warm) ||
		s->n_warm > s->all_n_unlabeled)
		bad_setup("Its warm start is out of range.");
	need(&msg, 12.0 * s->n_warm);
	s->warm_keys = palloc_extended(sizeof(uint64) * ((Size) s->n_warm + 1), MCXT_ALLOC_HUGE);
	s->warm_labels = palloc_extended(sizeof(int32) * ((Size) s->n_warm + 1), MCXT_ALLOC_HUGE);
	for (int64 i = 0; i < s->n_warm; i++)
	{
		s->warm_keys[i] = (uint64) pq_getmsgint64(&msg);
		s->warm_labels[i] = pq_getmsgint(&msg, 4);
		if (s->warm_labels[i] < 0 || s->warm_labels[i] >= K)
			bad_setup("A warm start's label is out of range.");
		/* searched by the nodes: each key once, in order */
		if (i > 0 && s->warm_keys[i] <= s->warm_keys[i - 1])
			bad_setup("Its warm start's keys are not in order.");
	}
	if (msg.cursor != msg.len)
		bad_setup("It is longer than its lengths say.");
}

/*
 * The labels-only model a node scores its documents by
 * (gibbs_nb.blocked_node_scores): K and V as int4, then pi (K) and theta-hat
 * class-major (K x V) as float8s, in network order.  gnb_node_model_check
 * refuses (22P03) a value that is not one of K classes and V words, before
 * anything is allocated by it; gnb_node_model_read then reads pi and theta
 * into the caller's arrays.
 */
void
gnb_node_model_check(bytea *value, int32 K, int32 V)
{
	StringInfoData msg;

	gnb_bytea_reader(&msg, value);
	if (msg.len < 8 || (int32) pq_getmsgint(&msg, 4) != K || (int32) pq_getmsgint(&msg, 4) != V ||
		(double) msg.len != 8.0 + 8.0 * K + 8.0 * K * V)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
				 errmsg("invalid gibbs_nb node model: not one of %d classes and %d words", K, V)));
}

void
gnb_node_model_read(bytea *value, int32 K, int32 V, double *pi, double *theta)
{
	StringInfoData msg;

	gnb_node_model_check(value, K, V);
	gnb_bytea_reader(&msg, value);
	msg.cursor = 8;
	for (int32 k = 0; k < K; k++)
		pi[k] = pq_getmsgfloat8(&msg);
	for (int64 i = 0; i < (int64) K * V; i++)
	{
		if ((i & 65535) == 0)
			CHECK_FOR_INTERRUPTS();
		theta[i] = pq_getmsgfloat8(&msg);
	}
}

/*
 * n exact sums (gnb_exact_sum) as a node's answer: their words and whether
 * each is a number, 20 bytes a sum.
 */
bytea *
gnb_exact_sums_encode(const gnb_exact_sum *sums, int32 n)
{
	StringInfoData buf;

	gnb_sized_bytea_begin(&buf, (Size) n * GNB_EXACT_SUM_BYTES);
	for (int32 i = 0; i < n; i++)
	{
		pq_sendint64(&buf, (int64) sums[i].lo);
		pq_sendint64(&buf, (int64) sums[i].hi);
		pq_sendint32(&buf, sums[i].invalid ? 1 : 0);
	}
	return pq_endtypsend(&buf);
}

/*
 * A node's n exact sums (gnb_exact_sums_encode) merged into sums; false if
 * the value is not n of them.
 */
bool
gnb_exact_sums_merge(bytea *value, gnb_exact_sum *sums, int32 n)
{
	StringInfoData msg;

	gnb_bytea_reader(&msg, value);
	if ((int64) msg.len != (int64) n * GNB_EXACT_SUM_BYTES)
		return false;
	for (int32 i = 0; i < n; i++)
	{
		gnb_exact_sum part;
		int32		invalid;

		part.lo = (uint64) pq_getmsgint64(&msg);
		part.hi = (uint64) pq_getmsgint64(&msg);
		invalid = (int32) pq_getmsgint(&msg, 4);
		if (invalid != 0 && invalid != 1)
			return false;
		part.invalid = invalid;
		gnb_exact_merge(&sums[i], &part);
	}
	return true;
}

typedef struct KeyDoc
{
	uint64		key;
	int32		doc;
} KeyDoc;

static int
cmp_key_doc(const void *a, const void *b)
{
	uint64		x = ((const KeyDoc *) a)->key;
	uint64		y = ((const KeyDoc *) b)->key;

	return x < y ? -1 : x > y;
}

/*
 * msg made to read value's bytes from the start, in place (pq_getmsg*: an
 * error past the end).
 */
void
gnb_bytea_reader(StringInfo msg, const bytea *value)
{
	msg->data = VARDATA_ANY(value);
	msg->len = VARSIZE_ANY_EXHDR(value);
	msg->maxlen = msg->len;
	msg->cursor = 0;
}

/*
 * D documents by their keys (doc_key): the keys increasing and the document
 * of each, allocated in the current memory context (the job's worker maps
 * the nodes' estimates and a warm start's labels by them, a node its
 * documents' labels).
 */
void
gnb_documents_by_key(const uint64 *doc_key, int32 D, uint64 **sorted_keys, int32 **doc_of_key)
{
	KeyDoc	   *keys = palloc_extended(sizeof(KeyDoc) * ((Size) D + 1), MCXT_ALLOC_HUGE);

	for (int32 j = 0; j < D; j++)
	{
		keys[j].key = doc_key[j];
		keys[j].doc = j;
	}
	qsort(keys, D, sizeof(KeyDoc), cmp_key_doc);
	*sorted_keys = palloc_extended(sizeof(uint64) * ((Size) D + 1), MCXT_ALLOC_HUGE);
	*doc_of_key = palloc_extended(sizeof(int32) * ((Size) D + 1), MCXT_ALLOC_HUGE);
	for (int32 i = 0; i < D; i++)
	{
		(*sorted_keys)[i] = keys[i].key;
		(*doc_of_key)[i] = keys[i].doc;
	}
	pfree(keys);
}
