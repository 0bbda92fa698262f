/*
 * gnb_node_wire.c
 *	  A blocked chain's calls to its nodes and their answers as bytes
 *	  (gnb_nodes.h), for nodes in other processes or on other servers.
 *
 * Every number little-endian, written byte by byte, so that the bytes mean
 * the same on any machine; doubles by their IEEE bits, so that a node sees
 * exactly the chain's theta and the chain exactly the node's counts (the
 * model is the same bit for bit however the documents are held).
 *
 *   call:   "GNBC" what chain sweep kept (int32 each) g_theta g_pi (double)
 *           n_theta, log theta; n_pi, log pi; n_N, N; n_K, Nk, C
 *           (counts int64, n_theta + n_pi + n_N + 2 n_K doubles)
 *   answer: "GNBA" changed locked held_docs held_tokens (int64) docs tokens
 *           (K int64 each) n, then n pairs (entry, delta) (int64)
 */
#include "gnb_internal.h"

#include <string.h>

#define CALL_MAGIC		UINT32_C(0x43424E47)	/* "GNBC" */
#define ANSWER_MAGIC	UINT32_C(0x41424E47)	/* "GNBA" */
/* the call's fixed part: magic, four int32, two doubles */
#define CALL_HEADER		(4 + 4 * 4 + 2 * 8)

static uint8_t *
put_u64(uint8_t *p, uint64_t x)
{
	for (int i = 0; i < 8; i++)
		*p++ = (uint8_t) (x >> (8 * i));
	return p;
}

static uint8_t *
put_u32(uint8_t *p, uint32_t x)
{
	for (int i = 0; i < 4; i++)
		*p++ = (uint8_t) (x >> (8 * i));
	return p;
}

static uint8_t *
put_double(uint8_t *p, double x)
{
	uint64_t	bits;

	memcpy(&bits, &x, sizeof(bits));
	return put_u64(p, bits);
}

static uint8_t *
put_doubles(uint8_t *p, const double *x, int64_t n)
{
	p = put_u64(p, (uint64_t) n);
	for (int64_t i = 0; i < n; i++)
		p = put_double(p, x[i]);
	return p;
}

static uint64_t
get_u64(const uint8_t *p)
{
	uint64_t	x = 0;

	for (int i = 0; i < 8; i++)
		x |= (uint64_t) p[i] << (8 * i);
	return x;
}

static uint32_t
get_u32(const uint8_t *p)
{
	uint32_t	x = 0;

	for (int i = 0; i < 4; i++)
		x |= (uint32_t) p[i] << (8 * i);
	return x;
}

static double
get_double(const uint8_t *p)
{
	uint64_t	bits = get_u64(p);
	double		x;

	memcpy(&x, &bits, sizeof(x));
	return x;
}

/* What a call of this kind carries: doubles of theta, pi, N, and K-vectors. */
static void
call_lengths(int32_t what, int64_t theta_length, int32_t K, int32_t V, int64_t *n_theta,
			 int64_t *n_pi, int64_t *n_N, int64_t *n_K)
{
	*n_theta = what == GNB_NODE_LABELS ? theta_length : 0;
	*n_pi = what == GNB_NODE_LABELS ? K + 1 : 0;
	*n_N = what == GNB_NODE_END ? (int64_t) V * K : 0;
	*n_K = what == GNB_NODE_END ? K : 0;
}

size_t
gnb_node_call_size(const gnb_node_call *call, int64_t theta_length, int32_t K, int32_t V)
{
	int64_t		n_theta,
				n_pi,
				n_N,
				n_K;

	call_lengths(call->what, theta_length, K, V, &n_theta, &n_pi, &n_N, &n_K);
	return CALL_HEADER + 4 * 8 + 8 * (size_t) (n_theta + n_pi + n_N + 2 * n_K);
}

void
gnb_node_call_encode(const gnb_node_call *call, int64_t theta_length, int32_t K, int32_t V,
					 uint8_t *out)
{
	int64_t		n_theta,
				n_pi,
				n_N,
				n_K;
	uint8_t    *p = out;

	call_lengths(call->what, theta_length, K, V, &n_theta, &n_pi, &n_N, &n_K);
	p = put_u32(p, CALL_MAGIC);
	p = put_u32(p, (uint32_t) call->what);
	p = put_u32(p, (uint32_t) call->chain);
	p = put_u32(p, (uint32_t) call->sweep);
	p = put_u32(p, (uint32_t) call->kept);
	p = put_double(p, call->g_theta);
	p = put_double(p, call->g_pi);
	p = put_doubles(p, call->log_theta, n_theta);
	p = put_doubles(p, call->log_pi, n_pi);
	p = put_doubles(p, call->N, n_N);
	p = put_u64(p, (uint64_t) n_K);
	for (int64_t k = 0; k < n_K; k++)
		p = put_double(p, call->Nk[k]);
	for (int64_t k = 0; k < n_K; k++)
		p = put_double(p, call->C[k]);
}

/*
 * An array of n doubles at *p, whose count must be `expect`, into dst;
 * *p moves past it.  NULL if the count is another.
 */
static const char *
get_doubles(const uint8_t **p, const uint8_t *end, int64_t expect, double *dst)
{
	uint64_t	n;

	if (end - *p < 8)
		return "a node call is cut short";
	n = get_u64(*p);
	*p += 8;
	if (n != (uint64_t) expect)
		return "a node call's array has the wrong length for the chain";
	if ((uint64_t) (end - *p) / 8 < n)
		return "a node call is cut short";
	for (uint64_t i = 0; i < n; i++, *p += 8)
		dst[i] = get_double(*p);
	return NULL;
}

const char *
gnb_node_call_peek(const uint8_t *in, size_t len, int32_t *what, int32_t *chain, int32_t *sweep)
{
	if (len < CALL_HEADER || get_u32(in) != CALL_MAGIC)
		return "not a gibbs_nb node call";
	*what = (int32_t) get_u32(in + 4);
	*chain = (int32_t) get_u32(in + 8);
	*sweep = (int32_t) get_u32(in + 12);
	return NULL;
}

const char *
gnb_node_call_decode(gnb_node *node, const uint8_t *in, size_t len, gnb_node_call *call)
{
	const uint8_t *p = in;
	const uint8_t *end = in + len;
	int32_t		K,
				V;
	int64_t		theta_length,
				n_theta,
				n_pi,
				n_N,
				n_K;
	const char *err;
	gnb_node_buffers buf;

	gnb_node_shape(node, &K, &V, &theta_length);
	memset(call, 0, sizeof(*call));
	if (len < CALL_HEADER || get_u32(p) != CALL_MAGIC)
		return "not a gibbs_nb node call";
	call->what = (int32_t) get_u32(p + 4);
	call->chain = (int32_t) get_u32(p + 8);
	call->sweep = (int32_t) get_u32(p + 12);
	call->kept = (int32_t) get_u32(p + 16);
	call->g_theta = get_double(p + 20);
	call->g_pi = get_double(p + 28);
	p += CALL_HEADER;
	if (call->what != GNB_NODE_START && call->what != GNB_NODE_LABELS &&
		call->what != GNB_NODE_END)
		return "a node call of an unknown kind";
	if (call->chain < 0 || call->chain > 65535 || call->sweep < 0 ||
		(call->kept != 0 && call->kept != 1))
		return "a node call's chain, sweep or kept flag is out of range";
	call_lengths(call->what, theta_length, K, V, &n_theta, &n_pi, &n_N, &n_K);
	gnb_node_buffers_for(node, call->what, &buf);
	if ((err = get_doubles(&p, end, n_theta, buf.log_theta)) != NULL ||
		(err = get_doubles(&p, end, n_pi, buf.log_pi)) != NULL ||
		(err = get_doubles(&p, end, n_N, buf.N)) != NULL ||
		(err = get_doubles(&p, end, n_K, buf.Nk)) != NULL)
		return err;
	/* C follows Nk without a count of its own */
	if ((uint64_t) (end - p) != 8 * (uint64_t) n_K)
		return "a node call has the wrong length for the chain";
	for (int64_t k = 0; k < n_K; k++, p += 8)
		buf.C[k] = get_double(p);
	call->log_theta = buf.log_theta;
	call->log_pi = buf.log_pi;
	call->N = buf.N;
	call->Nk = buf.Nk;
	call->C = buf.C;
	return NULL;
}

size_t
gnb_count_changes_size(const gnb_count_changes *changes, int32_t K)
{
	return 4 + 4 * 8 + 16 * (size_t) K + 8 + 16 * (size_t) changes->n_entries;
}

void
gnb_count_changes_encode(const gnb_count_changes *changes, int32_t K, uint8_t *out)
{
	uint8_t    *p = out;

	p = put_u32(p, ANSWER_MAGIC);
	p = put_u64(p, (uint64_t) changes->changed);
	p = put_u64(p, (uint64_t) changes->locked);
	p = put_u64(p, (uint64_t) changes->held_docs);
	p = put_u64(p, (uint64_t) changes->held_tokens);
	for (int32_t k = 0; k < K; k++)
		p = put_u64(p, (uint64_t) changes->docs[k]);
	for (int32_t k = 0; k < K; k++)
		p = put_u64(p, (uint64_t) changes->tokens[k]);
	p = put_u64(p, (uint64_t) changes->n_entries);
	for (int64_t e = 0; e < changes->n_entries; e++)
	{
		p = put_u64(p, (uint64_t) changes->entry[e]);
		p = put_u64(p, (uint64_t) changes->delta[e]);
	}
}

const char *
gnb_count_changes_decode(const uint8_t *in, size_t len, int32_t K, int64_t max_entries,
						 int64_t *entry, int64_t *delta, int64_t *docs, int64_t *tokens,
						 gnb_count_changes *changes)
{
	const size_t fixed = 4 + 4 * 8 + 16 * (size_t) K + 8;
	const uint8_t *p = in;
	uint64_t	n;

	memset(changes, 0, sizeof(*changes));
	if (len < fixed || get_u32(p) != ANSWER_MAGIC)
		return "not a gibbs_nb node answer";
	n = get_u64(in + fixed - 8);
	if (n > (uint64_t) max_entries || (len - fixed) / 16 != n || (len - fixed) % 16 != 0)
		return "a node answer has the wrong length for the chain";
	changes->changed = (int64_t) get_u64(p + 4);
	changes->locked = (int64_t) get_u64(p + 12);
	changes->held_docs = (int64_t) get_u64(p + 20);
	changes->held_tokens = (int64_t) get_u64(p + 28);
	if (changes->changed < 0 || changes->locked < 0 || changes->held_docs < 0 ||
		changes->held_tokens < 0)
		return "a node answer's document counts are negative";
	p += 36;
	for (int32_t k = 0; k < K; k++, p += 8)
		docs[k] = (int64_t) get_u64(p);
	for (int32_t k = 0; k < K; k++, p += 8)
		tokens[k] = (int64_t) get_u64(p);
	p += 8;
	for (uint64_t e = 0; e < n; e++, p += 16)
	{
		entry[e] = (int64_t) get_u64(p);
		delta[e] = (int64_t) get_u64(p + 8);
		if (entry[e] < 0 || entry[e] >= max_entries)
			return "a node answer names an entry the chain does not have";
	}
	changes->n_entries = (int64_t) n;
	changes->entry = entry;
	changes->delta = delta;
	changes->docs = docs;
	changes->tokens = tokens;
	return NULL;
}
