/*
 * dump_size.c
 *	  Whether a model's stored rows fit in a backup: a version whose packed
 *	  row would be longer than PostgreSQL can write as text is refused before
 *	  anything of it is stored.
 *
 * pg_dump writes the extension's tables with COPY ... TO STDOUT (or as
 * INSERT statements with --inserts), and the server builds each row's text
 * in one buffer of at most 1 GB (MaxAllocSize); COPY FROM reads each line
 * into one such buffer again at restore.  A longer row makes every pg_dump of
 * the database fail ("Cannot enlarge string buffer"), for every role's data,
 * not only the model's owner's.  A model's largest row by far is its
 * gibbs_nb.packed row: the vocabulary and log theta-hat (vocabulary x
 * classes); a gibbs_nb.document_labels row holds one document's id, which
 * may be as long as text allows, and its label probabilities.  Escaping makes text longer than the bytes: a backslash in a text[] element
 * is written \\ by array_out and each of those doubled again by COPY, so a
 * vocabulary of backslashes of 300 MB (a few MB compressed on disk) would be
 * 1.2 GB of text.  The other rows are bounded by the limits on what they
 * hold: classes (GNB_MAX_CLASSES of at most GNB_LABEL_MAX bytes), names, the
 * tokenizer (GNB_TOKENIZER_MAX); a theta-hat row holds a subset of the
 * packed row, a labels-table row a document's label besides what its
 * document_labels row holds.
 *
 * (With --inserts a restore also needs each value under 512 MB as a literal,
 * the SQL lexer's buffer growing by doubling up to 1 GB: not bounded here, and
 * said in docs/operations.md.)
 *
 * The bound counts each byte as the longest it becomes in either form, in
 * the database's encoding (a dump to another client encoding, pg_dump -E,
 * may be longer by what the conversion adds).  It is checked once the source
 * is read, before sampling, when the strings are known but most numbers are
 * not: a number not yet known counts as the longest a finite float8 can be
 * (pg_dump sets extra_float_digits to 3: the shortest exact form), about a
 * quarter more than a typical estimate takes; a labelled document's label
 * probabilities are 0 and 1, one character each.
 */
#include "gibbs_nb.h"

#include "store/store.h"

#include "miscadmin.h"
#include "utils/array.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "counts/tokens.h"

/* a finite float8 as text, shortest exact form: -1.2345678901234567e-308 */
#define FLOAT8_TEXT_MAX 24
/* an int8 as text: -9223372036854775808 */
#define INT8_TEXT_MAX 20
/* the packed row's other columns: names, numbers, braces */
#define PACKED_FIXED_TEXT (16 * 1024)
#define PACKED_HINT "Train with fewer distinct tokens: a tokenizer that drops rare ones, or a sample of the documents."

/*
 * The longest these bytes are in a dump, as a text column or (element) a
 * text[] element: as COPY escapes it (\ doubled; \b \f \n \r \t \v as
 * two characters) or an INSERT's literal does (' doubled), with the
 * literal's quotes; an element as array_out writes it first (quoted, with \
 * and " escaped) and with the comma after it.  (A document's id is a column
 * of its own.)
 */
static uint64
dump_bytes(const char *str, int len, bool element)
{
	uint64		n = element ? 3 : 2;

	for (int i = 0; i < len; i++)
	{
		switch (str[i])
		{
			case '\\':
				n += element ? 4 : 2;
				break;
			case '"':
				n += element ? 3 : 1;
				break;
			case '\'':
			case '\b':
			case '\f':
			case '\n':
			case '\r':
			case '\t':
			case '\v':
				n += 2;
				break;
			default:
				n += 1;
				break;
		}
	}
	return n;
}

static uint64
element_dump_bytes(const char *str, int len)
{
	return dump_bytes(str, len, true);
}

/* element_dump_bytes as a gnb_token_fn: adds to the uint64 at arg */
static void
add_token_dump_bytes(void *arg, const char *str, int len, int32 count)
{
	*(uint64 *) arg += element_dump_bytes(str, len);
}

/*
 * Refuse a version one of whose rows would be longer than a row may be
 * (hint: what would make it shorter).
 */
static void
check_row(uint64 bytes, int64 n_words, int32 n_classes, int64 n_documents, const char *hint)
{
	if (bytes > GNB_DUMP_ROW_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the model would be too large to back up: its stored row could be " UINT64_FORMAT " bytes as text, more than the " UINT64_FORMAT " a row may be",
						bytes, GNB_DUMP_ROW_MAX),
				 errdetail("pg_dump writes a row as one piece of text; a longer row makes every backup of the database fail.  The model has " INT64_FORMAT " tokens and %d classes, for " INT64_FORMAT " documents.",
						   n_words, n_classes, n_documents),
				 errhint("%s", hint)));
}

/*
 * The bytes an id whose text (under the pinned formats) is `text` takes in
 * a dump of its document's row: the longest is gnb_check_corpus_dumpable's
 * longest_id_bytes.
 */
uint64
gnb_id_dump_bytes(const char *text)
{
	return dump_bytes(text, strlen(text), false);
}

/* The labelled documents whose ids the corpus keeps (GnbCorpus.labeled_in_source). */
static int64
kept_labeled(const GnbCorpus *corpus)
{
	return corpus->labeled_in_source ? 0 : corpus->n_labeled;
}

/* The held-out documents whose ids the corpus keeps and publish stores. */
static int64
kept_holdout(const GnbJobParams *params, const GnbCorpus *corpus)
{
	return params->holdout > 0.0 && !corpus->labeled_in_source ? corpus->n_holdout : 0;
}

/*
 * How many documents' labels publish stores from the corpus's ids:
 * doc_labels' count (publish.c); those of the documents nodes hold
 * (GnbCorpus.n_held), and then of the labelled and held-out ones, are not
 * among them.
 */
int64
gnb_published_labels(const GnbJobParams *params, const GnbCorpus *corpus)
{
	return kept_labeled(corpus) + corpus->n_docs + kept_holdout(params, corpus);
}

/*
 * The i-th of the documents' ids publish stores, in its order (doc_labels,
 * publish.c): the labelled documents', the unlabelled ones', the held-out
 * ones'.
 */
Datum
gnb_published_id(const GnbCorpus *corpus, int64 i)
{
	int64		n_labeled = kept_labeled(corpus);

	if (i < n_labeled)
		return corpus->labeled_ids[i];
	if (i < n_labeled + corpus->n_docs)
		return corpus->ids[i - n_labeled];
	return corpus->holdout_ids[i - n_labeled - corpus->n_docs];
}

/*
 * The longest of the documents' ids as publish writes them (every
 * document's, the held-out ones' included, each in a document_labels row),
 * as dump text: called once the source is read, inside its transaction (the
 * ids' output functions may read the catalogs).
 */
uint64
gnb_corpus_longest_id_dump_bytes(const GnbJobParams *params, const GnbCorpus *corpus)
{
	int64		n_labels = gnb_published_labels(params, corpus);
	uint64		longest = 0;
	MemoryContext scratch;
	MemoryContext old;
	Oid			output;
	bool		varlena;
	int			level;

	scratch = AllocSetContextCreate(CurrentMemoryContext, "gibbs_nb dump size",
									ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(scratch);
	level = gnb_pin_id_text_format();	/* as publish writes them */
	getTypeOutputInfo(params->source.id_type, &output, &varlena);
	for (int64 i = 0; i < n_labels; i++)
	{
		char	   *text = OidOutputFunctionCall(output, gnb_published_id(corpus, i));

		longest = Max(longest, dump_bytes(text, strlen(text), false));
		if ((i & 1023) == 1023)
		{
			CHECK_FOR_INTERRUPTS();
			MemoryContextReset(scratch);
		}
	}
	AtEOXact_GUC(true, level);
	MemoryContextSwitchTo(old);
	MemoryContextDelete(scratch);
	/* and those of the documents nodes hold, made as they were read */
	return Max(longest, corpus->held_id_dump_bytes);
}

/*
 * Whether the version a job would publish from this corpus fits in a dump
 * (see the file's comment); raises 54000 if not.  longest_id_bytes is
 * gnb_corpus_longest_id_dump_bytes.  Checked before sampling, after the
 * job's memory (which, at the default gibbs_nb.max_job_memory, binds first
 * for a model whose size is its vocabulary times its classes), so that a
 * job that could never be stored does not sample.
 */
void
gnb_check_corpus_dumpable(const GnbJobParams *params, const GnbCorpus *corpus,
						  uint64 longest_id_bytes)
{
	int32		K = corpus->n_classes;
	int64		V = corpus->n_words;
	/* every document's row, whether from the corpus or from the source */
	int64		n_labels = (int64) corpus->n_labeled + corpus->n_docs + corpus->n_held +
		(params->holdout > 0.0 ? corpus->n_holdout : 0);
	uint64		bytes = PACKED_FIXED_TEXT;

	for (int32 k = 0; k < K; k++)
		bytes += element_dump_bytes(corpus->classes[k], strlen(corpus->classes[k]));
	/* log pi-hat, log theta-hat; the words' counts */
	bytes += (uint64) (K + V * K) * (FLOAT8_TEXT_MAX + 1);
	bytes += (uint64) V * (INT8_TEXT_MAX + 1);
	gnb_each_token(PointerGetDatum(corpus->tokens), false, add_token_dump_bytes, &bytes);
	check_row(bytes, V, K, n_labels, PACKED_HINT);
	/* a document's row: its id and probabilities (the owner is a role's name) */
	check_row(PACKED_FIXED_TEXT + longest_id_bytes + (uint64) K * (FLOAT8_TEXT_MAX + 1),
			  V, K, n_labels, "Give the documents shorter ids.");
}

/* The same for an imported model (which stores no documents' labels). */
void
gnb_check_image_dumpable(const GnbModelImage *img)
{
	int32		K = img->n_classes;
	int64		V = img->n_words;
	uint64		bytes = PACKED_FIXED_TEXT;

	for (int32 k = 0; k < K; k++)
		bytes += element_dump_bytes(img->class_str[k], img->class_len[k]);
	for (int64 w = 0; w < V; w++)
		bytes += element_dump_bytes(img->word_str[w], img->word_len[w]);
	bytes += (uint64) (K + V * K) * (FLOAT8_TEXT_MAX + 1);
	bytes += (uint64) V * (INT8_TEXT_MAX + 1);
	check_row(bytes, V, K, 0, PACKED_HINT);
}
