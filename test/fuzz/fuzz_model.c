/*
 * fuzz_model.c
 *	  libFuzzer target: any bytes as a gibbs_nb_import value.
 *
 * src/models/model_format.c is linked in unchanged (with shim.c for the backend).
 * Each input is parsed as it is and again sealed with its checksum (see
 * LLVMFuzzerTestOneInput).  gnb_model_image_parse must fail with 22P03,
 * 22021 or XX001 (XX001 only for an unsealed input) and nothing else, or
 * return a model whose promises hold: 2..1000 classes, classes and tokens
 * valid UTF-8 without NUL, strictly increasing in byte order, every log
 * pi-hat and log theta-hat finite and at most 0, counts not negative; every
 * string is read in full (AddressSanitizer sees any read outside the value).
 * The format is canonical, so writing the parse back must give the input's
 * bytes exactly, and that parses again.  Any other outcome aborts
 * (shim_fail): libFuzzer reports it as a crash.
 */
#include "gibbs_nb.h"
#include "models/models.h"
#include "shim.h"

#include <math.h>

#include "mb/pg_wchar.h"
#include "port/pg_crc32c.h"

extern int	LLVMFuzzerTestOneInput(const uint8 *data, size_t size);

typedef struct ModelRun
{
	const char *data;
	size_t		size;
	GnbModelImage img;
	StringInfoData out;
	GnbModelImage again;
} ModelRun;

static void
parse_input(void *arg)
{
	ModelRun   *run = arg;

	gnb_model_image_parse(run->data, run->size, &run->img);
}

static void
write_back(void *arg)
{
	ModelRun   *run = arg;

	initStringInfo(&run->out);
	gnb_model_image_write(&run->img, &run->out);
}

static void
parse_again(void *arg)
{
	ModelRun   *run = arg;

	gnb_model_image_parse(run->out.data, run->out.len, &run->again);
}

/* Valid UTF-8, no NUL, read in full. */
static void
check_string(const char *s, int32 len, const char *what)
{
	if (len < 0 || pg_encoding_verifymbstr(PG_UTF8, s, len) != len || memchr(s, '\0', len))
		shim_fail("parse: a %s that is not valid text was accepted", what);
}

static int
byte_order(const char *a, int32 alen, const char *b, int32 blen)
{
	int			c = memcmp(a, b, Min(alen, blen));

	return c != 0 ? c : (alen > blen) - (alen < blen);
}

static void
check_image(const GnbModelImage *img)
{
	int64		K = img->n_classes;
	int64		V = img->n_words;

	if (K < 2 || K > GNB_MAX_CLASSES || V < 0)
		shim_fail("parse: " INT64_FORMAT " classes, " INT64_FORMAT " words accepted", K, V);
	for (int64 k = 0; k < K; k++)
	{
		check_string(img->class_str[k], img->class_len[k], "class");
		if (k > 0 && byte_order(img->class_str[k - 1], img->class_len[k - 1],
								img->class_str[k], img->class_len[k]) >= 0)
			shim_fail("parse: classes out of order accepted");
		if (!(img->log_pi[k] <= 0) || !isfinite(img->log_pi[k]))
			shim_fail("parse: a log pi of %g accepted", img->log_pi[k]);
	}
	for (int64 w = 0; w < V; w++)
	{
		check_string(img->word_str[w], img->word_len[w], "token");
		if (w > 0 && byte_order(img->word_str[w - 1], img->word_len[w - 1],
								img->word_str[w], img->word_len[w]) >= 0)
			shim_fail("parse: tokens out of order accepted");
		if (img->word_counts && img->word_counts[w] < 0)
			shim_fail("parse: a negative count accepted");
	}
	for (int64 i = 0; i < V * K; i++)
		if (!(img->log_theta[i] <= 0) || !isfinite(img->log_theta[i]))
			shim_fail("parse: a log theta of %g accepted", img->log_theta[i]);
	check_string(img->sampler, strlen(img->sampler), "sampler");
	check_string(img->model_name, strlen(img->model_name), "model name");
	check_string(img->source, strlen(img->source), "source");
	check_string(img->tokenizer, strlen(img->tokenizer), "tokenizer");
	if (strlen(img->model_name) > GNB_MODEL_NAME_MAX || strlen(img->tokens_column) >= NAMEDATALEN ||
		strlen(img->label_column) >= NAMEDATALEN || strlen(img->id_column) >= NAMEDATALEN)
		shim_fail("parse: a name too long accepted");
}

/*
 * One value through the parser: refused with an expected SQLSTATE (returns
 * false), or accepted, its promises checked, written back to the same bytes,
 * and parsed again.
 */
static bool
run_value(const char *data, size_t size, bool sealed)
{
	ModelRun	run = {0};

	run.data = data;
	run.size = size;
	if (!shim_try(parse_input, &run))
	{
		if (shim_sqlerrcode != ERRCODE_INVALID_BINARY_REPRESENTATION &&
			shim_sqlerrcode != ERRCODE_CHARACTER_NOT_IN_REPERTOIRE &&
			shim_sqlerrcode != ERRCODE_DATA_CORRUPTED)
			shim_fail("parse: unexpected error %s: %s", shim_sqlstate(shim_sqlerrcode),
					  shim_errmsg);
		if (sealed && shim_sqlerrcode == ERRCODE_DATA_CORRUPTED)
			shim_fail("parse: a value with its right checksum refused as corrupted: %s",
					  shim_errmsg);
		shim_free_all();
		return false;
	}
	check_image(&run.img);
	if (!shim_try(write_back, &run))
		shim_fail("write: error %s: %s", shim_sqlstate(shim_sqlerrcode), shim_errmsg);
	if ((size_t) run.out.len != size || memcmp(run.out.data, data, size) != 0)
		shim_fail("write: the parse written back is not the input (%d bytes for %zu)",
				  run.out.len, size);
	if (!shim_try(parse_again, &run))
		shim_fail("parse: rejects what it wrote: %s", shim_errmsg);
	shim_free_all();
	return true;
}

/*
 * The input as it is (nearly always refused by its checksum: XX001), then
 * sealed, its CRC-32C appended as gibbs_nb_export appends it, so that the
 * fuzzer reaches every field's checks; the seeds are values without their
 * checksum.
 */
int
LLVMFuzzerTestOneInput(const uint8 *data, size_t size)
{
	char	   *sealed = malloc(size + sizeof(uint32));
	pg_crc32c	crc;

	(void) run_value((const char *) data, size, false);
	INIT_CRC32C(crc);
	COMP_CRC32C(crc, data, size);
	FIN_CRC32C(crc);
	memcpy(sealed, data, size);
	for (int i = 0; i < 4; i++)
		sealed[size + i] = (char) ((crc >> (8 * i)) & 0xFF);
	(void) run_value(sealed, size + sizeof(uint32), true);
	free(sealed);
	return 0;
}
