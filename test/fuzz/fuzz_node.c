/*
 * fuzz_node.c
 *	  libFuzzer target: the setup and the calls that gibbs_nb.blocked_node
 *	  takes from its caller, then the node's answers.
 *
 * Any role may call gibbs_nb.blocked_node (the job's worker calls it as the
 * job's role, on whatever server holds the relation), on a relation of its
 * own: the setup and every call are its bytes.  This target feeds them to
 * what the node does with them after reading its part: the setup's decoder
 * (src/worker/node_setup.c, unchanged, with shim.c for pqformat), the
 * core's parameter check, gnb_node_begin on a small part of unlabelled
 * documents, each call through gnb_node_call_decode and gnb_node_run, as
 * node.c does (the first refused call ends the node, as there), and a
 * labels-only model through gnb_node_model_check and _read, the part's
 * documents scored by it (gibbs_nb.blocked_node_scores).
 *
 * The first byte chooses how the rest is read: as raw bytes (a setup's
 * length and bytes, then each call's length and bytes), or as fields that
 * gnb_node_setup_encode and gnb_node_call_encode make valid messages of,
 * with any numbers in them (NaN, infinities, negative counts, calls out of
 * order), so that the fuzzer gets past the decoders to the node itself.
 *
 * What must hold: the setup decoder accepts or refuses with 22P03 (and its
 * encoder's value decodes to the very setup it was made of, bit for bit); a
 * node never writes outside its arrays (AddressSanitizer); after every call,
 * from the first on, each document's label is a class; the start holds the
 * part's documents and tokens; an answer names only entries the chain has,
 * each once, and encodes and decodes to itself; a model is refused with
 * 22P03 or read whole, and scores every document a class.  Any other
 * outcome aborts (shim_fail).
 */
#include "gibbs_nb.h"

#include "worker/nodes.h"
#include "gnb_label_check.h"
#include "shim.h"

#include "libpq/pqformat.h"

#include <math.h>

extern int	LLVMFuzzerTestOneInput(const uint8 *data, size_t size);

#define PART_DOCS	5			/* the node's documents, when it has words */
#define MAX_CALLS	24

/* The input, read from the front; zeros once it is used up. */
typedef struct Input
{
	const uint8 *p;
	size_t		left;
} Input;

static uint64
take(Input *in, int bytes)
{
	uint64		x = 0;

	for (int i = 0; i < bytes && in->left > 0; i++, in->p++, in->left--)
		x |= (uint64) in->p[0] << (8 * i);
	return x;
}

/*
 * A double: mostly small numbers a sampler sees, sometimes any bits (NaN,
 * infinities, huge, negative).
 */
static double
take_double(Input *in)
{
	uint8		how = (uint8) take(in, 1);
	uint64		bits;
	double		d;

	if (how < 192)
		return ((int) how - 96) / 8.0;
	bits = take(in, 8);
	memcpy(&d, &bits, sizeof(d));
	return d;
}

typedef struct NodeRun
{
	bytea	   *value;
	GnbNodeSetup made;			/* fields: the setup the value was made of */
	GnbNodeSetup setup;			/* the value decoded */
} NodeRun;

static void
decode_setup(void *arg)
{
	NodeRun    *run = arg;

	gnb_node_setup_decode(run->value, &run->setup);
}

static bytea *
bytes_value(const uint8 *p, size_t n)
{
	bytea	   *v = palloc(VARHDRSZ + n);

	SET_VARSIZE(v, VARHDRSZ + n);
	memcpy(VARDATA(v), p, n);
	return v;
}

/* A setup made of the input's fields, encoded as the job's worker does. */
static bytea *
fields_setup(Input *in, GnbNodeSetup *made)
{
	GnbNodeSetup s;
	gnb_params *p = &s.sampler;
	int32		K,
				V;

	memset(&s, 0, sizeof(s));
	p->no_trace = 1;			/* as the decoder sets it */
	s.job_id = (int64) take(in, 2);
	p->sampler = GNB_SAMPLER_BLOCKED;
	p->sweeps = (int32) (take(in, 1) % 10) - 1;
	p->burn_in = (int32) (take(in, 1) % 10) - 1;
	p->lag = (int32) (take(in, 1) % 4);
	p->chains = 1 + (int32) (take(in, 1) % 3);
	p->gamma_pi = take_double(in);
	p->gamma_theta = take_double(in);
	p->unlabeled_weight = take_double(in);
	p->seed = take(in, 8);
	p->init = (gnb_init_kind) (take(in, 1) % 4);
	p->sample_gamma_theta = (int) (take(in, 1) % 3);
	p->sample_gamma_pi = (int) (take(in, 1) % 3);
	K = s.n_classes = 2 + (int32) (take(in, 1) % 4);
	V = s.n_words = (int32) (take(in, 1) % 12);
	strcpy(s.id_column, "id");
	strcpy(s.tokens_column, "tokens");
	strcpy(s.label_column, "label");
	s.max_job_memory = 1 << 20;
	s.tokens = palloc(sizeof(char *) * (V + 1));
	for (int32 w = 0; w < V; w++)
		s.tokens[w] = psprintf("w%02d", w);
	if (take(in, 1) & 1)
	{
		s.extra_word_counts = palloc(sizeof(double) * (V * K + 1));
		s.extra_doc_counts = palloc(sizeof(double) * K);
		for (int32 i = 0; i < V * K; i++)
			s.extra_word_counts[i] = take_double(in);
		for (int32 k = 0; k < K; k++)
			s.extra_doc_counts[k] = take_double(in);
	}
	/* enough of each word for the part, unless the input says otherwise */
	s.all_unlabeled_count = palloc(sizeof(int64) * (V + 1));
	for (int32 w = 0; w < V; w++)
		s.all_unlabeled_count[w] = 8 + (int64) (int8) take(in, 1);
	s.all_n_unlabeled = PART_DOCS + (int64) (int8) take(in, 1);
	s.warm = (int32) (take(in, 1) % 2);
	s.n_warm = s.warm ? (int64) (take(in, 1) % (PART_DOCS + 1)) : 0;
	if (s.n_warm > s.all_n_unlabeled)
		s.n_warm = 0;
	if (s.all_n_unlabeled < 0)
		s.warm = 0;
	s.warm_keys = palloc(sizeof(uint64) * (s.n_warm + 1));
	s.warm_labels = palloc(sizeof(int32) * (s.n_warm + 1));
	for (int64 i = 0; i < s.n_warm; i++)
	{
		/* the part's keys are 101, 202, ...: some hit, some do not */
		s.warm_keys[i] = 101 * (uint64) (i + 1) + (take(in, 1) & 1);
		s.warm_labels[i] = (int32) (take(in, 1) % K);
	}
	*made = s;
	return gnb_node_setup_encode(&s);
}

/* n items at a and b the same bits (a and b may be anything when n is 0) */
static bool
same_bits(const void *a, const void *b, size_t bytes)
{
	return bytes == 0 || (a != NULL && b != NULL && memcmp(a, b, bytes) == 0);
}

/* What the encoder was given is what the decoder gives back. */
static void
check_round_trip(const GnbNodeSetup *m, const GnbNodeSetup *d)
{
	const gnb_params *a = &m->sampler;
	const gnb_params *b = &d->sampler;
	const int64 VK = (int64) m->n_words * m->n_classes;

	if (d->job_id != m->job_id || b->sampler != a->sampler || b->sweeps != a->sweeps ||
		b->burn_in != a->burn_in || b->lag != a->lag || b->chains != a->chains ||
		!same_bits(&b->gamma_pi, &a->gamma_pi, sizeof(double)) ||
		!same_bits(&b->gamma_theta, &a->gamma_theta, sizeof(double)) ||
		!same_bits(&b->unlabeled_weight, &a->unlabeled_weight, sizeof(double)) ||
		b->seed != a->seed || b->init != a->init ||
		b->sample_gamma_theta != a->sample_gamma_theta ||
		b->sample_gamma_pi != a->sample_gamma_pi || b->no_trace != a->no_trace ||
		b->gamma_grid != NULL || d->n_classes != m->n_classes || d->n_words != m->n_words ||
		strcmp(d->id_column, m->id_column) != 0 ||
		strcmp(d->tokens_column, m->tokens_column) != 0 ||
		strcmp(d->label_column, m->label_column) != 0 ||
		d->max_job_memory != m->max_job_memory)
		shim_fail("setup: its parameters decode to others");
	for (int32 w = 0; w < m->n_words; w++)
		if (strcmp(d->tokens[w], m->tokens[w]) != 0)
			shim_fail("setup: token %d decodes to \"%s\", not \"%s\"", w, d->tokens[w],
					  m->tokens[w]);
	if ((d->extra_word_counts == NULL) != (m->extra_word_counts == NULL) ||
		(m->extra_word_counts &&
		 (!same_bits(d->extra_word_counts, m->extra_word_counts, sizeof(double) * VK) ||
		  !same_bits(d->extra_doc_counts, m->extra_doc_counts, sizeof(double) * m->n_classes))))
		shim_fail("setup: its clamped counts decode to others");
	if (!same_bits(d->all_unlabeled_count, m->all_unlabeled_count, sizeof(int64) * m->n_words) ||
		d->all_n_unlabeled != m->all_n_unlabeled || d->warm != m->warm ||
		d->n_warm != m->n_warm ||
		!same_bits(d->warm_keys, m->warm_keys, sizeof(uint64) * m->n_warm) ||
		!same_bits(d->warm_labels, m->warm_labels, sizeof(int32) * m->n_warm))
		shim_fail("setup: its summary or warm start decodes to another");
}

/*
 * The node's part: PART_DOCS unlabelled documents of a few words each (none
 * if the vocabulary is empty), keyed 101, 202, ..., as gnb_read_part would
 * give them; the warm start's labels found by key as node.c finds them.
 */
static void
make_part(const GnbNodeSetup *s, gnb_corpus *core, int64 *held_tokens)
{
	const int32 V = s->n_words;
	const int32 D = V > 0 ? PART_DOCS : 0;
	int64	   *doc_start = palloc(sizeof(int64) * (D + 1));
	int32	   *word = palloc(sizeof(int32) * (3 * D + 1));
	int32	   *count = palloc(sizeof(int32) * (3 * D + 1));
	int32	   *label = palloc(sizeof(int32) * (D + 1));
	uint64	   *key = palloc(sizeof(uint64) * (D + 1));
	int32	   *init = palloc(sizeof(int32) * (D + 1));
	int64		n = 0;

	*held_tokens = 0;
	doc_start[0] = 0;
	for (int32 d = 0; d < D; d++)
	{
		/* distinct words in increasing order, as a read part has them */
		int32		first = (3 * d) % V;
		int32		len = Min(1 + d % 3, V - first);

		for (int32 t = 0; t < len; t++, n++)
		{
			word[n] = first + t;
			count[n] = 1 + (d + t) % 2;
			*held_tokens += count[n];
		}
		doc_start[d + 1] = n;
		label[d] = -1;
		key[d] = 101 * (uint64) (d + 1);
		if (s->warm)
		{
			int64		at = gnb_key_position(s->warm_keys, s->n_warm, key[d]);

			init[d] = at >= 0 ? s->warm_labels[at] : -1;
		}
	}
	memset(core, 0, sizeof(*core));
	core->n_docs = D;
	core->n_words = V;
	core->n_classes = s->n_classes;
	core->doc_start = doc_start;
	core->word = word;
	core->count = count;
	core->label = label;
	core->doc_key = key;
	core->extra_word_counts = s->extra_word_counts;
	core->extra_doc_counts = s->extra_doc_counts;
	core->all_unlabeled_count = s->all_unlabeled_count;
	core->all_n_unlabeled = s->all_n_unlabeled;
	core->init_label = s->warm ? init : NULL;
}

/* A call made of the input's fields, encoded as the chain does. */
static uint8 *
fields_call(Input *in, const GnbNodeSetup *s, int64 theta_length, size_t *len)
{
	const int32 K = s->n_classes;
	const int32 V = s->n_words;
	gnb_node_call call;
	double	   *log_theta = palloc(sizeof(double) * (theta_length + 1));
	double	   *log_pi = palloc(sizeof(double) * (K + 1));
	double	   *N = palloc(sizeof(double) * ((int64) V * K + 1));
	double	   *Nk = palloc(sizeof(double) * K);
	double	   *C = palloc(sizeof(double) * K);
	uint8	   *out;

	memset(&call, 0, sizeof(call));
	call.what = 1 + (int32) (take(in, 1) % 4);	/* 4: a kind nobody knows */
	call.chain = (int32) (take(in, 1) % 3);
	call.sweep = (int32) (take(in, 1) % 12);
	call.kept = (int32) (take(in, 1) % 2);
	call.g_theta = take_double(in);
	call.g_pi = take_double(in);
	for (int64 i = 0; i < theta_length; i++)
		log_theta[i] = take_double(in);
	for (int32 k = 0; k <= K; k++)
		log_pi[k] = take_double(in);
	for (int64 i = 0; i < (int64) V * K; i++)
		N[i] = take_double(in);
	for (int32 k = 0; k < K; k++)
	{
		Nk[k] = take_double(in);
		C[k] = take_double(in);
	}
	call.log_theta = log_theta;
	call.log_pi = log_pi;
	call.N = N;
	call.Nk = Nk;
	call.C = C;
	*len = gnb_node_call_size(&call, theta_length, K, V);
	out = palloc(*len);
	gnb_node_call_encode(&call, theta_length, K, V, out);
	return out;
}

typedef struct ModelRun
{
	bytea	   *value;
	int32		K;
	int32		V;
	double	   *pi;
	double	   *theta;
} ModelRun;

static void
check_model(void *arg)
{
	ModelRun   *m = arg;

	gnb_node_model_check(m->value, m->K, m->V);
}

static void
read_model(void *arg)
{
	ModelRun   *m = arg;

	gnb_node_model_read(m->value, m->K, m->V, m->pi, m->theta);
}

/*
 * gibbs_nb.blocked_node_scores: a labels-only model (the input's bytes, or
 * one of the node's shape or nearly, made of the input's numbers) checked,
 * read and each of the part's documents scored by it, as node.c does.
 */
static void
score_part(Input *in, bool fields, const GnbNodeSetup *s, const gnb_corpus *core)
{
	ModelRun	m;
	const int32 K = s->n_classes;
	const int32 V = s->n_words;
	double	   *scratch = palloc(sizeof(double) * K);
	double	   *prob = palloc(sizeof(double) * K);
	double	   *sent = NULL;		/* fields: pi then theta, as sent */
	bool		sane = true;		/* every number sent finite and positive */

	m.K = K;
	m.V = V;
	if (!fields)
	{
		size_t		len = (size_t) take(in, 2);

		len = Min(len, in->left);
		m.value = bytes_value(in->p, len);
		in->p += len;
		in->left -= len;
	}
	else
	{
		/* a class or a word more or fewer, now and then */
		uint8		shape = (uint8) take(in, 1);
		int32		k_sent = K + (shape % 8 == 1) - (shape % 8 == 2);
		int32		v_sent = V + (shape % 8 == 3) - (shape % 8 == 4 && V > 0);
		int64		n = (int64) k_sent * (1 + v_sent);
		StringInfoData buf;

		sent = palloc(sizeof(double) * (n + 1));
		initStringInfo(&buf);
		appendStringInfoSpaces(&buf, VARHDRSZ);
		pq_sendint32(&buf, k_sent);
		pq_sendint32(&buf, v_sent);
		for (int64 i = 0; i < n; i++)
		{
			sent[i] = take_double(in);
			sane &= isfinite(sent[i]) && sent[i] > 0.0;
			pq_sendfloat8(&buf, sent[i]);
		}
		m.value = pq_endtypsend(&buf);
	}
	if (!shim_try(check_model, &m))
	{
		if (shim_sqlerrcode != ERRCODE_INVALID_BINARY_REPRESENTATION)
			shim_fail("scores: SQLSTATE %s (%s)", shim_sqlstate(shim_sqlerrcode), shim_errmsg);
		return;
	}
	/* at their exact sizes: a read past either is AddressSanitizer's */
	m.pi = palloc(sizeof(double) * K);
	m.theta = palloc(sizeof(double) * Max((int64) K * V, 1));
	if (!shim_try(read_model, &m))
		shim_fail("scores: a model that passed its check was refused: %s", shim_errmsg);
	if (sent && (memcmp(m.pi, sent, sizeof(double) * K) != 0 ||
				 memcmp(m.theta, sent + K, sizeof(double) * K * V) != 0))
		shim_fail("scores: the model read is not the one sent");
	for (int32 d = 0; d < core->n_docs; d++)
	{
		int32		label = gnb_labels_only_doc(m.theta, m.pi, core->extra_word_counts, K, V,
												core->word + core->doc_start[d],
												core->count + core->doc_start[d],
												core->doc_start[d + 1] - core->doc_start[d],
												scratch, prob);
		double		total = 0.0;

		if (label < 0 || label >= K)
			shim_fail("scores: document %d scored class %d of %d", d, label, K);
		/* a model of finite positive numbers: probabilities, the label the likeliest */
		if (!sent || !sane)
			continue;
		for (int32 k = 0; k < K; k++)
		{
			if (!(prob[k] >= 0.0 && prob[k] <= 1.0) || prob[label] < prob[k])
				shim_fail("scores: document %d: class %d has probability %g, its label %d %g",
						  d, k, prob[k], label, prob[label]);
			total += prob[k];
		}
		if (fabs(total - 1.0) > 1e-12 * K)
			shim_fail("scores: document %d: probabilities summing to %.17g", d, total);
	}
}

/* What every answer must be, and its bytes decoded again. */
static void
check_answer(const gnb_count_changes *ch, int32 K, int64 max_entries)
{
	size_t		size = gnb_count_changes_size(ch, K);
	uint8	   *bytes = palloc(size);
	int64	   *entry = palloc(sizeof(int64) * (max_entries + 1));
	int64	   *delta = palloc(sizeof(int64) * (max_entries + 1));
	int64	   *docs = palloc(sizeof(int64) * K);
	int64	   *tokens = palloc(sizeof(int64) * K);
	uint8	   *seen = palloc0(max_entries + 1);
	gnb_count_changes back;
	const char *err;

	if (ch->n_entries < 0 || ch->n_entries > max_entries)
		shim_fail("an answer of %lld entries, of %lld the chain has",
				  (long long) ch->n_entries, (long long) max_entries);
	for (int64 e = 0; e < ch->n_entries; e++)
	{
		if (ch->entry[e] < 0 || ch->entry[e] >= max_entries)
			shim_fail("an answer names entry %lld of %lld", (long long) ch->entry[e],
					  (long long) max_entries);
		if (seen[ch->entry[e]]++)
			shim_fail("an answer names entry %lld twice", (long long) ch->entry[e]);
	}
	gnb_count_changes_encode(ch, K, bytes);
	if ((err = gnb_count_changes_decode(bytes, size, K, max_entries, entry, delta, docs,
										tokens, &back)) != NULL)
		shim_fail("an answer does not decode: %s", err);
	if (back.n_entries != ch->n_entries || back.changed != ch->changed ||
		back.locked != ch->locked || back.held_docs != ch->held_docs ||
		back.held_tokens != ch->held_tokens ||
		memcmp(back.entry, ch->entry, sizeof(int64) * ch->n_entries) != 0 ||
		memcmp(back.delta, ch->delta, sizeof(int64) * ch->n_entries) != 0 ||
		memcmp(back.docs, ch->docs, sizeof(int64) * K) != 0 ||
		memcmp(back.tokens, ch->tokens, sizeof(int64) * K) != 0)
		shim_fail("an answer decodes to another");
}

/*
 * gnb_node_fold of a chain the input picks (0 to 3), its classes as they
 * are or reversed: refused unless it is the chain that just ended and the
 * next to fold; else a distance that is a sum of absolute differences
 */
static void
fold_chain(Input *in, gnb_node *node, int32 K)
{
	int32	   *perm = palloc(sizeof(int32) * K);
	bool		reversed = take(in, 1) & 1;
	gnb_exact_sum distance = {0};

	for (int32 k = 0; k < K; k++)
		perm[k] = reversed ? K - 1 - k : k;
	if (gnb_node_fold(node, (int32) (take(in, 1) % 4), perm, &distance) == NULL &&
		!distance.invalid && gnb_exact_value(&distance) < 0.0)
		shim_fail("a fold's distance is negative: %g", gnb_exact_value(&distance));
}

static void
run_node(Input *in, bool fields, const GnbNodeSetup *s)
{
	gnb_corpus	core;
	gnb_params	params = s->sampler;
	gnb_node   *node;
	int64		theta_length;
	int64		held_tokens;
	int64		n_active = 0;

	make_part(s, &core, &held_tokens);
	if (gnb_check(&core, &params) != NULL)
		return;
	node = gnb_node_begin(&core, &params, &gnb_default_hooks);
	theta_length = gnb_node_theta_length(node);
	/* an answer's entries: the active words' (some in the corpus's summary) by class */
	for (int32 w = 0; w < s->n_words; w++)
		n_active += s->all_unlabeled_count[w] > 0;
	/* the node's documents scored by a labels-only model, whenever asked */
	if (take(in, 1) & 1)
		score_part(in, fields, s, &core);
	for (int calls = 0; calls < MAX_CALLS && in->left > 0; calls++)
	{
		const uint8 *bytes;
		size_t		len;
		gnb_node_call call;
		const gnb_count_changes *ch;
		const double *prob;
		const int32 *last;

		if (fields)
			bytes = fields_call(in, s, theta_length, &len);
		else
		{
			len = (size_t) take(in, 2);
			len = Min(len, in->left);
			bytes = in->p;
			in->p += len;
			in->left -= len;
		}
		/* node.c: a call refused ends the node */
		if (gnb_node_call_decode(node, bytes, len, &call) != NULL)
			break;
		ch = gnb_node_run(node, &call);
		if (call.what == GNB_NODE_START)
		{
			if (ch->held_docs != core.n_docs || ch->held_tokens != held_tokens)
				shim_fail("a node holds %lld documents and %lld tokens, not %d and %lld",
						  (long long) ch->held_docs, (long long) ch->held_tokens,
						  core.n_docs, (long long) held_tokens);
		}
		check_answer(ch, s->n_classes, n_active * s->n_classes);
		gnb_node_estimates(node, &prob, &last);
		/* every label a class, from the first call on (a node starts them at 0) */
		for (int32 d = 0; d < core.n_docs; d++)
			if (last[d] < 0 || last[d] >= s->n_classes)
				shim_fail("document %d has label %d of %d classes", d, last[d], s->n_classes);
		/* a chain folded whenever asked, aligned as is or reversed (node.c checks the permutation) */
		if (take(in, 1) & 1)
			fold_chain(in, node, s->n_classes);
	}
	/* the chains combined whenever asked: refused unless every chain before was folded */
	{
		gnb_exact_sum *mass = palloc0(sizeof(gnb_exact_sum) * 2 * s->n_classes);
		const double *prob;
		const int32 *last;

		if (gnb_node_combine_end(node, (int32) (take(in, 1) % 4), mass) == NULL)
		{
			gnb_node_combined(node, &prob, &last);
			if (prob == NULL || last == NULL)
				shim_fail("a node combined its chains but has no means");
		}
	}
	gnb_node_end(node);
}

int
LLVMFuzzerTestOneInput(const uint8 *data, size_t size)
{
	Input		in = {data, size};
	bool		fields;
	NodeRun		run;

	if (size < 1)
		return 0;
	fields = take(&in, 1) & 1;
	if (fields)
		run.value = fields_setup(&in, &run.made);
	else
	{
		size_t		len = (size_t) take(&in, 2);

		len = Min(len, in.left);
		run.value = bytes_value(in.p, len);
		in.p += len;
		in.left -= len;
	}
	if (!shim_try(decode_setup, &run))
	{
		if (shim_sqlerrcode != ERRCODE_INVALID_BINARY_REPRESENTATION)
			shim_fail("setup: SQLSTATE %s (%s)", shim_sqlstate(shim_sqlerrcode), shim_errmsg);
		/* what the encoder wrote decodes, unless its count of documents is negative */
		if (fields && run.made.all_n_unlabeled >= 0)
			shim_fail("setup: its own encoding refused: %s", shim_errmsg);
	}
	else
	{
		if (fields)
			check_round_trip(&run.made, &run.setup);
		run_node(&in, fields, &run.setup);
	}
	shim_free_all();
	return 0;
}
