/*
 * model_format.c
 *	  The exported model: one self-describing bytea that gibbs_nb_export
 *	  writes and gibbs_nb_import reads (docs/reference.md, "gibbs_nb_export,
 *	  gibbs_nb_import").
 *
 * Layout, all integers unsigned little-endian, all floats IEEE 754 binary64
 * little-endian (so log pi-hat and log theta-hat cross over bit for bit, and
 * an imported model predicts exactly as the exported one did):
 *
 *	 "GNBMODEL"  u32 format (2)  u32 K  u32 V  u32 flags (bit 0: word counts)
 *	 string sampler  i32 sweeps  i32 burn_in  i32 lag  i32 chains
 *	 f64 gamma_pi  f64 gamma_theta  f64 unlabeled_weight  i64 seed
 *	 i32 n_documents  i32 n_labeled  i32 n_skipped  i64 n_tokens
 *	 f64 log_likelihood  f64 r_hat (NaN: none)  i32 n_classes (0: from labels)
 *	 string model_name  i32 version  string source  string tokens_column
 *	 string label_column ("" none)  string id_column  string tokenizer ("" unknown)
 *	 string init ("labels" or "random")  u32 unlabeled_weight_chosen (0 or 1)
 *	 K x string class (strictly increasing byte order)
 *	 K x f64 log pi-hat
 *	 V x string token (strictly increasing byte order)
 *	 V x K x f64 log theta-hat (word-major)
 *	 [V x i64 word count]
 *	 u32 CRC-32C of every byte before it
 *
 * A string is u32 length then its bytes (valid in the database encoding, no
 * NUL).  The value must end exactly after the checksum.  The checksum
 * (PostgreSQL's pg_crc32c, the Castagnoli polynomial WAL records use) is
 * checked before anything else is read: a value that was cut short or had a
 * bit changed on its way (a file, a copy between clusters) is refused, 22P03
 * where the magic or the format says it is no value of this format, XX001
 * (data corrupted) anywhere else, rather than imported with another class
 * name or other probabilities.  Format 1 (no checksum) was never released.
 *
 * The parser reads any bytes a role can pass: every length and count is
 * checked against the bytes that remain before anything is allocated for it,
 * and every error is 22P03 (malformed) or 22021 (a string not valid in the
 * database's encoding), never a crash.  It uses no catalog and no SPI, so the
 * fuzz target (test/fuzz/fuzz_model.c) runs it as is.
 */
#include "gibbs_nb.h"

#include "models/models.h"

#include <math.h>

#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "port/pg_crc32c.h"

#define FORMAT_MAGIC "GNBMODEL"
#define FORMAT_MAGIC_LEN 8

/* Longest string parameter (names are at most NAMEDATALEN - 1 bytes; the
 * source is a qualified, quoted name). */
#define MAX_PARAM_STRING 1024

typedef struct Reader
{
	const char *p;
	const char *end;
} Reader;

/* how far from one a sum of probabilities may be */
#define NORMALISED_TOLERANCE 1e-6

/*
 * The least log probability a value may hold.  A positive double's log is
 * at least -745, so no trained model comes near it; below it, a document's
 * score (a sum of counts times log thetas) could reach -inf in every class,
 * and its probabilities NaN, though each class's thetas summed to one
 * (exp of -1e308 is 0).
 */
#define LOG_PROB_FLOOR (-1e6)

pg_noreturn static void malformed(const char *what);

static void
malformed(const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
			 errmsg("malformed gibbs_nb model value: %s", what)));
}

/*
 * The class priors sum to one, and so does each class's distribution over
 * the words (a trained model's to within 1e-12): a value whose did not was
 * served, and predicted NaN.
 */
static void
check_normalised(const GnbModelImage *img)
{
	int32		K = img->n_classes;
	double	   *sums = palloc0(sizeof(double) * K);
	double		pi_sum = 0.0;

	for (int32 k = 0; k < K; k++)
		pi_sum += exp(img->log_pi[k]);
	if (!(fabs(pi_sum - 1.0) <= NORMALISED_TOLERANCE))
		malformed("the class priors do not sum to one");
	for (int64 w = 0; w < img->n_words; w++)
	{
		const double *row = img->log_theta + w * K;

		if ((w & 0xFFFF) == 0)
			CHECK_FOR_INTERRUPTS();
		for (int32 k = 0; k < K; k++)
			sums[k] += exp(row[k]);
	}
	for (int32 k = 0; k < K; k++)
		if (!(fabs(sums[k] - 1.0) <= NORMALISED_TOLERANCE))
			malformed("a class's word probabilities do not sum to one");
	pfree(sums);
}

static void
need(Reader *r, uint64 n, const char *what)
{
	if ((uint64) (r->end - r->p) < n)
		malformed(what);
}

static uint32
get_u32(Reader *r, const char *what)
{
	const unsigned char *b;

	need(r, 4, what);
	b = (const unsigned char *) r->p;
	r->p += 4;
	return (uint32) b[0] | (uint32) b[1] << 8 | (uint32) b[2] << 16 | (uint32) b[3] << 24;
}

static uint64
get_u64(Reader *r, const char *what)
{
	uint64		lo = get_u32(r, what);
	uint64		hi = get_u32(r, what);

	return lo | hi << 32;
}

static int32
get_i32(Reader *r, const char *what)
{
	return (int32) get_u32(r, what);
}

static double
get_f64(Reader *r, const char *what)
{
	uint64		bits = get_u64(r, what);
	double		d;

	memcpy(&d, &bits, sizeof(d));
	return d;
}

/* A string of at most max bytes, checked: valid text, no NUL. */
static void
get_string(Reader *r, uint64 max, const char **str, int32 *len, const char *what)
{
	uint32		n = get_u32(r, what);

	if (n > max)
		malformed(what);
	need(r, n, what);
	*str = r->p;
	*len = (int32) n;
	r->p += n;
	/* raises 22021, naming the bad byte, for invalid text or NUL */
	(void) pg_verifymbstr(*str, (int) n, false);
}

static char *
get_cstring(Reader *r, uint64 max, const char *what)
{
	const char *s;
	int32		len;

	get_string(r, max, &s, &len, what);
	return pnstrdup(s, len);
}

/* Byte order, a prefix first: the order training gives classes and tokens. */
static int
byte_order(const char *a, int32 alen, const char *b, int32 blen)
{
	int			c = memcmp(a, b, Min(alen, blen));

	if (c != 0)
		return c;
	return alen < blen ? -1 : alen > blen ? 1 : 0;
}

/*
 * The value's last 4 bytes are the CRC-32C of the others (the caller checked
 * there are 4 after the magic and the format): XX001 if not.
 */
static void
check_checksum(const char *data, Size size)
{
	pg_crc32c	crc;
	Reader		tail = {data + size - sizeof(uint32), data + size};
	uint32		stated = get_u32(&tail, "too short");

	INIT_CRC32C(crc);
	COMP_CRC32C(crc, data, size - sizeof(uint32));
	FIN_CRC32C(crc);
	if (crc != stated)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("gibbs_nb model value is corrupted: its checksum does not match"),
				 errdetail("The CRC-32C of its first %zu bytes is %08X; the value says %08X.",
						   (size_t) (size - sizeof(uint32)), crc, stated),
				 errhint("The value was changed or cut short since it was exported: export it again.")));
}

/*
 * Parse value into img (pointers into value for the strings; the numbers
 * copied).  Any malformed value is an error, 22P03 or 22021; one whose
 * checksum does not match, XX001.
 */
void
gnb_model_image_parse(const char *data, Size size, GnbModelImage *img)
{
	Reader		r = {data, data + size};
	uint32		format;
	uint32		flags;
	uint64		K;
	uint64		V;
	uint64		per_word;

	memset(img, 0, sizeof(*img));
	need(&r, FORMAT_MAGIC_LEN, "too short");
	if (memcmp(r.p, FORMAT_MAGIC, FORMAT_MAGIC_LEN) != 0)
		malformed("it does not start with \"" FORMAT_MAGIC "\"");
	r.p += FORMAT_MAGIC_LEN;
	format = get_u32(&r, "too short");
	if (format != GNB_MODEL_FORMAT)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
				 errmsg("gibbs_nb model value of format %u, this gibbs_nb reads format %d",
						format, GNB_MODEL_FORMAT)));
	/* the checksum before any field: the rest is read only from a whole value */
	need(&r, sizeof(uint32), "too short");
	check_checksum(data, size);
	r.end -= sizeof(uint32);
	K = get_u32(&r, "too short");
	V = get_u32(&r, "too short");
	flags = get_u32(&r, "too short");
	if (K < 2 || K > GNB_MAX_CLASSES)
		malformed("the number of classes is not in 2..1000");
	if (flags & ~(uint32) GNB_MODEL_HAS_COUNTS)
		malformed("unknown flags");

	img->sampler = get_cstring(&r, MAX_PARAM_STRING, "sampler");
	if (gnb_sampler_from_name(img->sampler) < 0)
		malformed("unknown sampler");
	img->sweeps = get_i32(&r, "parameters");
	img->burn_in = get_i32(&r, "parameters");
	img->lag = get_i32(&r, "parameters");
	img->chains = get_i32(&r, "parameters");
	img->gamma_pi = get_f64(&r, "parameters");
	img->gamma_theta = get_f64(&r, "parameters");
	img->unlabeled_weight = get_f64(&r, "parameters");
	img->seed = (int64) get_u64(&r, "parameters");
	img->n_documents = get_i32(&r, "parameters");
	img->n_labeled = get_i32(&r, "parameters");
	img->n_skipped = get_i32(&r, "parameters");
	img->n_tokens = (int64) get_u64(&r, "parameters");
	img->log_likelihood = get_f64(&r, "parameters");
	img->r_hat = get_f64(&r, "parameters");
	img->n_classes_arg = get_i32(&r, "parameters");
	if (img->sweeps < 1 || img->burn_in < 0 || img->burn_in >= img->sweeps || img->lag < 1 ||
		img->chains < 1 || img->chains > 64 ||
		!(img->gamma_pi > 0 && isfinite(img->gamma_pi)) ||
		!(img->gamma_theta > 0 && isfinite(img->gamma_theta)) ||
		!(img->unlabeled_weight >= 0 && img->unlabeled_weight <= 1) ||
		img->n_documents < 0 || img->n_labeled < 0 || img->n_labeled > img->n_documents ||
		img->n_skipped < 0 || img->n_tokens < 0 || isinf(img->log_likelihood) ||
		isinf(img->r_hat) ||
		(img->n_classes_arg != 0 && (uint64) img->n_classes_arg != K))
		malformed("a parameter is out of range");
	img->model_name = get_cstring(&r, MAX_PARAM_STRING, "model name");
	if (strlen(img->model_name) > GNB_MODEL_NAME_MAX)
		malformed("model name too long");
	img->version = get_i32(&r, "version");
	img->source = get_cstring(&r, MAX_PARAM_STRING, "source");
	img->tokens_column = get_cstring(&r, MAX_PARAM_STRING, "tokens column");
	img->label_column = get_cstring(&r, MAX_PARAM_STRING, "label column");
	img->id_column = get_cstring(&r, MAX_PARAM_STRING, "id column");
	/* an expression: bounded (see GNB_IMPORTED_TOKENIZER_MAX) */
	img->tokenizer = get_cstring(&r, GNB_IMPORTED_TOKENIZER_MAX, "tokenizer");
	img->init = get_cstring(&r, MAX_PARAM_STRING, "init");
	if (strcmp(img->init, "labels") != 0 && strcmp(img->init, "random") != 0)
		malformed("unknown init");
	{
		uint32		chosen = get_u32(&r, "parameters");

		if (chosen > 1)
			malformed("a parameter is out of range");
		img->unlabeled_weight_chosen = chosen == 1;
	}
	if (strlen(img->tokens_column) >= NAMEDATALEN || strlen(img->label_column) >= NAMEDATALEN ||
		strlen(img->id_column) >= NAMEDATALEN)
		malformed("column name too long");

	/* the classes: each at least its length word and a log pi-hat */
	need(&r, K * (4 + 8), "classes");
	img->n_classes = (int32) K;
	img->class_str = palloc(sizeof(char *) * K);
	img->class_len = palloc(sizeof(int32) * K);
	for (uint64 k = 0; k < K; k++)
	{
		get_string(&r, (uint64) (r.end - r.p), &img->class_str[k], &img->class_len[k], "class");
		gnb_check_label_length(img->class_len[k]);
		if (k > 0 && byte_order(img->class_str[k - 1], img->class_len[k - 1],
								img->class_str[k], img->class_len[k]) >= 0)
			malformed("classes are not distinct and in byte order");
	}
	need(&r, K * 8, "log pi");
	img->log_pi = palloc(sizeof(double) * K);
	for (uint64 k = 0; k < K; k++)
	{
		img->log_pi[k] = get_f64(&r, "log pi");
		if (!(img->log_pi[k] <= 0.0 && img->log_pi[k] >= LOG_PROB_FLOOR))
			malformed("a log pi is not a finite log probability");
	}

	/* the vocabulary: each word takes its length word, K log thetas, a count */
	per_word = 4 + 8 * K + ((flags & GNB_MODEL_HAS_COUNTS) ? 8 : 0);
	if (V > (uint64) (r.end - r.p) / per_word)
		malformed("the vocabulary is larger than the value");
	img->n_words = (int32) V;
	img->word_str = palloc_extended(sizeof(char *) * (V + 1), MCXT_ALLOC_HUGE);
	img->word_len = palloc_extended(sizeof(int32) * (V + 1), MCXT_ALLOC_HUGE);
	for (uint64 w = 0; w < V; w++)
	{
		CHECK_FOR_INTERRUPTS();
		get_string(&r, (uint64) (r.end - r.p), &img->word_str[w], &img->word_len[w], "token");
		if (w > 0 && byte_order(img->word_str[w - 1], img->word_len[w - 1],
								img->word_str[w], img->word_len[w]) >= 0)
			malformed("tokens are not distinct and in byte order");
	}
	need(&r, V * K * 8, "log theta");
	img->log_theta = palloc_extended(sizeof(double) * (V * K + 1), MCXT_ALLOC_HUGE);
	for (uint64 i = 0; i < V * K; i++)
	{
		img->log_theta[i] = get_f64(&r, "log theta");
		if (!(img->log_theta[i] <= 0.0 && img->log_theta[i] >= LOG_PROB_FLOOR))
			malformed("a log theta is not a finite log probability");
	}
	check_normalised(img);
	if (flags & GNB_MODEL_HAS_COUNTS)
	{
		need(&r, V * 8, "word counts");
		img->word_counts = palloc_extended(sizeof(int64) * (V + 1), MCXT_ALLOC_HUGE);
		for (uint64 w = 0; w < V; w++)
		{
			img->word_counts[w] = (int64) get_u64(&r, "word counts");
			if (img->word_counts[w] < 0)
				malformed("a word count is negative");
		}
	}
	if (r.p != r.end)
		malformed("bytes between the last field and the checksum");
}

/* ---------- writing ---------- */

static void
put_u32(StringInfo s, uint32 v)
{
	unsigned char b[4] = {v & 0xFF, (v >> 8) & 0xFF, (v >> 16) & 0xFF, (v >> 24) & 0xFF};

	appendBinaryStringInfo(s, (const char *) b, 4);
}

static void
put_u64(StringInfo s, uint64 v)
{
	put_u32(s, (uint32) v);
	put_u32(s, (uint32) (v >> 32));
}

static void
put_f64(StringInfo s, double d)
{
	uint64		bits;

	memcpy(&bits, &d, sizeof(bits));
	put_u64(s, bits);
}

static void
put_string(StringInfo s, const char *str, int32 len)
{
	put_u32(s, (uint32) len);
	appendBinaryStringInfo(s, str, len);
}

static void
put_cstring(StringInfo s, const char *str)
{
	put_string(s, str, (int32) strlen(str));
}

/*
 * Append img as the format above to s (initialised by the caller, which may
 * have put a header of its own before it: the checksum covers only what is
 * written here).
 */
void
gnb_model_image_write(const GnbModelImage *img, StringInfo s)
{
	int64		K = img->n_classes;
	int64		V = img->n_words;
	int			start = s->len;

	appendBinaryStringInfo(s, FORMAT_MAGIC, FORMAT_MAGIC_LEN);
	put_u32(s, GNB_MODEL_FORMAT);
	put_u32(s, (uint32) K);
	put_u32(s, (uint32) V);
	put_u32(s, img->word_counts ? GNB_MODEL_HAS_COUNTS : 0);
	put_cstring(s, img->sampler);
	put_u32(s, (uint32) img->sweeps);
	put_u32(s, (uint32) img->burn_in);
	put_u32(s, (uint32) img->lag);
	put_u32(s, (uint32) img->chains);
	put_f64(s, img->gamma_pi);
	put_f64(s, img->gamma_theta);
	put_f64(s, img->unlabeled_weight);
	put_u64(s, (uint64) img->seed);
	put_u32(s, (uint32) img->n_documents);
	put_u32(s, (uint32) img->n_labeled);
	put_u32(s, (uint32) img->n_skipped);
	put_u64(s, (uint64) img->n_tokens);
	put_f64(s, img->log_likelihood);
	put_f64(s, img->r_hat);
	put_u32(s, (uint32) img->n_classes_arg);
	put_cstring(s, img->model_name);
	put_u32(s, (uint32) img->version);
	put_cstring(s, img->source);
	put_cstring(s, img->tokens_column);
	put_cstring(s, img->label_column);
	put_cstring(s, img->id_column);
	put_cstring(s, img->tokenizer);
	put_cstring(s, img->init);
	put_u32(s, img->unlabeled_weight_chosen ? 1 : 0);
	for (int64 k = 0; k < K; k++)
		put_string(s, img->class_str[k], img->class_len[k]);
	for (int64 k = 0; k < K; k++)
		put_f64(s, img->log_pi[k]);
	for (int64 w = 0; w < V; w++)
		put_string(s, img->word_str[w], img->word_len[w]);
	for (int64 i = 0; i < V * K; i++)
		put_f64(s, img->log_theta[i]);
	if (img->word_counts)
		for (int64 w = 0; w < V; w++)
			put_u64(s, (uint64) img->word_counts[w]);
	/* last, the checksum of all of it */
	{
		pg_crc32c	crc;

		INIT_CRC32C(crc);
		COMP_CRC32C(crc, s->data + start, s->len - start);
		FIN_CRC32C(crc);
		put_u32(s, crc);
	}
}
