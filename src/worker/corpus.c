/*
 * corpus.c
 *	  Read the source into the sampler's input, in one short transaction.
 *
 * Runs in the worker, as the caller, with one snapshot for three queries:
 * every row's id and label (tokens are not read), the labelled rows' class x
 * word counts through gibbs_nb_class_counts (which the planner may run in
 * parallel workers; labelled documents enter the samplers only through their
 * counts, so they are not kept one by one), and the unlabelled documents with
 * their tokens, as compressed sparse rows of word ids and counts.  With
 * holdout, the labelled rows gnb_holdout_condition selects are left out of
 * the first two, and a fourth query reads them as they are (ids, tokens,
 * labels), for the published version to score: training never sees them.  Labels
 * become class ids in byte order of the labels, tokens word ids in byte
 * order of the tokens, and rows are read in id order when the id type has
 * one: the same seed and data give the same model whatever the scan order
 * or parallel plan.
 */
#include "gibbs_nb.h"

#include "worker/worker.h"
#include "store/store.h"
#include "security/security.h"
#include "counts/counts.h"
#include "counts/tokens.h"

#include "access/detoast.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/typcache.h"
#include "access/detoast.h"

#include <math.h>
#include <sys/mman.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif


/*
 * A slot of the reading's word table: open addressing, linear probing.  A
 * token's first 8 bytes decide most comparisons without touching its text,
 * and the slot also says where the current document's pair of the word is,
 * so that a token already seen costs one probe of one cache line.
 */
typedef struct WordSlot
{
	uint64		first;			/* first 8 bytes, zero padded (token_key) */
	char	   *str;			/* the token, NUL-terminated; NULL: empty */
	int32		len;
	int32		id;				/* word id, in order of first sight */
	int32		last_doc;		/* last document it was seen in, or -1 */
	int32		pos;			/* its pair in that document */
} WordSlot;

/* The word table's fill at most (a power of 2 over 4 = 75%) */
#define WORD_TABLE_FILL(cap) ((cap) / 4 * 3)

/* Tokens' text is copied into blocks of this size (or of the token's). */
#define TOKEN_BLOCK_SIZE ((Size) 256 * 1024)

/* Growable arrays of the corpus under construction. */
typedef struct CorpusBuilder
{
	MemoryContext cxt;			/* the corpus */
	MemoryContext scratch;		/* what reading needs only while it reads */
	/* the tokens' text, in scratch: gone once corpus->tokens holds it */
	MemoryContext text_cxt;
	/* the vocabulary: word table and tokens' text in scratch (corpus->tokens at the end) */
	WordSlot   *slots;
	uint32		slots_mask;		/* capacity - 1 */
	int32		n_words;
	char	   *text_next;		/* free space of the current text block (text_cxt) */
	Size		text_left;
	double		text_bytes;		/* of all tokens */
	vocab_hash *labels;
	int32		n_label_values;
	char	  **label_values;	/* first-seen label id -> text */
	int32		labels_cap;
	/* documents */
	int32		n_docs;
	int32		docs_cap;
	int64	   *doc_start;
	int32	   *label;
	Datum	   *ids;
	/*
	 * (word, count) pairs.  Counts are 16-bit while they fit (a word
	 * repeated 65,536 times in one document is rare): reading's peak holds
	 * the pairs beside the word table, and they are widened to the
	 * sampler's int32 at the end, once the table is gone, or at once when
	 * one does not fit (count_wide).
	 */
	int64		n_pairs;
	int64		pairs_cap;
	int32	   *word;
	uint16	   *count16;
	int32	   *count;
	bool		count_wide;
	int64		n_tokens;
	int32		n_skipped;
	/*
	 * The document add_token adds to: an unlabelled document's index, or
	 * -2 - i for the i-th checked one (a word slot's last_doc starts at -1).
	 */
	int32		token_doc;
	/*
	 * Labelled documents read with their tokens for the label check (see
	 * GnbCorpus): their pairs follow the unlabelled documents', from
	 * checked_start[0] on; the label id of each.
	 */
	int32		n_checked;
	int32		checked_cap;
	int64	   *checked_start;
	int32	   *checked_value;
	/* labelled documents: ids and first-seen label ids */
	int32		n_labeled;
	int32		labeled_cap;
	Datum	   *labeled_ids;
	int32	   *labeled_value;
	/*
	 * their counts, once read: n_count_words x n_label_values, by first-seen
	 * word id (the counts' words are the vocabulary's first) and label id,
	 * in scratch memory; labeled_tokens their sum.  32-bit while every one
	 * fits (labeled_counts32): they are held while the documents are read,
	 * reading's peak; widened to doubles in place if one does not.
	 */
	uint32	   *labeled_counts32;
	double	   *labeled_counts;
	int32		n_count_words;
	int32		n_count_values;
	int64		labeled_tokens;
	/* held-out documents: ids, tokens (copies) and labels */
	int32		n_holdout;
	int32		n_holdout_skipped;	/* held out, but without tokens */
	int32		holdout_cap;
	Datum	   *holdout_ids;
	Datum	   *holdout_tokens;
	char	  **holdout_labels;
	int16		id_typlen;
	bool		id_typbyval;
} CorpusBuilder;

/* The job being read: its memory budget is checked as the corpus grows. */
static const GnbJobParams *reading_job;

/*
 * An array of n elements grown to new_n: repalloc, so that a large array
 * is grown in place where the allocator can (glibc moves the pages of an
 * mmap'd block by mremap), rather than copied from an old array into a new
 * one with both held.  The budget check still counts both.
 */
static void *
grow(MemoryContext cxt, void *ptr, Size elem, int64 new_n)
{
	gnb_check_job_memory(reading_job, (double) MemoryContextMemAllocated(cxt, true),
						 (double) elem * new_n, "reading the source");
	return repalloc_huge(ptr, elem * new_n);
}

/* Id of a label, adding it to the labels if new. */
static int32
intern_label(CorpusBuilder *b, const char *str, int len)
{
	TokenKey	key;
	bool		found;
	VocabEntry *entry;

	gnb_check_label_length(len);
	key = token_key(str, len);
	entry = vocab_insert(b->labels, key, &found);

	if (!found)
	{
		char	   *copy;

		gnb_check_job_memory(reading_job, (double) MemoryContextMemAllocated(b->cxt, true),
							 (double) len + 1, "reading the source");
		copy = MemoryContextAlloc(b->cxt, len + 1);

		memcpy(copy, str, len);
		copy[len] = '\0';
		entry->key.str = copy;
		if (b->n_label_values >= GNB_MAX_CLASSES)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("the label column has more than %d distinct values",
							GNB_MAX_CLASSES)));
		if (b->n_label_values == b->labels_cap)
		{
			int32		cap = b->labels_cap * 2;

			b->label_values = grow(b->cxt, b->label_values, sizeof(char *), cap);
			b->labels_cap = cap;
		}
		entry->id = b->n_label_values;
		b->label_values[b->n_label_values++] = copy;
	}
	return entry->id;
}

/*
 * A word table of n empty slots, in the reading's scratch memory: Linux is
 * asked for transparent huge pages over it (where it has them only on
 * request) before it is first written, as vocab_index.c does for the
 * prediction's table, so that a lookup costs a cache miss but not also a TLB
 * miss.  Only a hint.
 */
static WordSlot *
alloc_word_table(CorpusBuilder *b, uint64 n)
{
	Size		size = sizeof(WordSlot) * n;
	char	   *p = MemoryContextAllocExtended(b->scratch, size, MCXT_ALLOC_HUGE);

#ifdef MADV_HUGEPAGE
	{
		uintptr_t	start = TYPEALIGN(2 * 1024 * 1024, (uintptr_t) p);
		uintptr_t	end = TYPEALIGN_DOWN(2 * 1024 * 1024, (uintptr_t) p + size);

		if (end > start)
			(void) madvise((void *) start, end - start, MADV_HUGEPAGE);
	}
#endif
	memset(p, 0, size);
	return (WordSlot *) p;
}

/* The word table with capacity new_cap: every word moves to its new slot. */
static void
resize_word_table(CorpusBuilder *b, uint64 new_cap)
{
	uint64		cap = (uint64) b->slots_mask + 1;
	uint32		new_mask;
	WordSlot   *slots;

	if (new_cap > (uint64) PG_UINT32_MAX + 1)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the vocabulary is too large")));
	new_mask = (uint32) (new_cap - 1);
	gnb_check_job_memory(reading_job, (double) MemoryContextMemAllocated(b->cxt, true),
						 (double) sizeof(WordSlot) * new_cap, "reading the source");
	slots = alloc_word_table(b, new_cap);
	for (uint64 i = 0; i < cap; i++)
	{
		WordSlot   *from = &b->slots[i];
		uint32		at;

		if (from->str == NULL)
			continue;
		at = token_hash(from->str, from->len, from->first) & new_mask;
		while (slots[at].str != NULL)
			at = (at + 1) & new_mask;
		slots[at] = *from;
	}
	pfree(b->slots);
	b->slots = slots;
	b->slots_mask = new_mask;
}

static void
grow_word_table(CorpusBuilder *b)
{
	resize_word_table(b, ((uint64) b->slots_mask + 1) * 2);
}

/* A copy of a token, NUL-terminated, in the corpus's blocks of text. */
static char *
copy_token(CorpusBuilder *b, const char *str, int len)
{
	char	   *copy;

	if (b->text_left < (Size) len + 1)
	{
		Size		size = Max(TOKEN_BLOCK_SIZE, (Size) len + 1);

		gnb_check_job_memory(reading_job, (double) MemoryContextMemAllocated(b->cxt, true),
							 (double) size, "reading the source");
		b->text_next = MemoryContextAlloc(b->text_cxt, size);
		b->text_left = size;
	}
	copy = b->text_next;
	b->text_bytes += len;
	memcpy(copy, str, len);
	copy[len] = '\0';
	b->text_next += len + 1;
	b->text_left -= len + 1;
	return copy;
}

/*
 * The slot of a word, adding it to the vocabulary if new (*found says
 * which).  Tokens hold no NUL byte (text cannot), so a token of fewer than 8
 * bytes is decided by its first word and length alone.
 */
static inline WordSlot *
word_slot_hashed(CorpusBuilder *b, const char *str, int len, uint64 first, uint32 hash,
				 bool *found)
{
	uint32		at = hash & b->slots_mask;
	WordSlot   *slot;

	for (;;)
	{
		slot = &b->slots[at];
		if (slot->str == NULL)
			break;
		if (slot->first == first && slot->len == len &&
			(len <= 8 || memcmp(slot->str + 8, str + 8, len - 8) == 0))
		{
			*found = true;
			return slot;
		}
		at = (at + 1) & b->slots_mask;
	}

	*found = false;
	if (b->n_words == PG_INT32_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the vocabulary has more than %d tokens", PG_INT32_MAX)));
	if ((uint64) b->n_words + 1 > WORD_TABLE_FILL((uint64) b->slots_mask + 1))
	{
		grow_word_table(b);
		return word_slot_hashed(b, str, len, first, hash, found);
	}
	slot->first = first;
	slot->str = copy_token(b, str, len);
	slot->len = len;
	slot->id = b->n_words++;
	slot->last_doc = -1;
	slot->pos = 0;
	return slot;
}

static WordSlot *
word_slot(CorpusBuilder *b, const char *str, int len, bool *found)
{
	uint64		first = first_word(str, len);

	return word_slot_hashed(b, str, len, first, token_hash(str, len, first), found);
}

/*
 * The pairs' counts as int32, capacity n >= n_pairs, made from the 16-bit
 * ones in their own block: grown (a large block by mremap, not copied),
 * then widened from the last count back, so that each count is read before
 * the wider ones written after it reach its bytes.  Never both arrays: at
 * 16x SpamAssassin they are 27 and 54 MB.
 */
static void
widen_counts(CorpusBuilder *b, int64 n)
{
	uint16	   *c16;

	gnb_check_job_memory(reading_job, (double) MemoryContextMemAllocated(b->cxt, true),
						 (double) sizeof(uint16) * (n + 1), "reading the source");
	c16 = repalloc_huge(b->count16, sizeof(int32) * ((Size) n + 1));
	b->count = (int32 *) c16;
	for (int64 p = b->n_pairs - 1; p >= 0; p--)
	{
		int32		v = c16[p];

		b->count[p] = v;
	}
	b->count16 = NULL;
	b->count_wide = true;
}

/*
 * The labelled counts as doubles, made from the 32-bit ones in their own
 * block as widen_counts does: grown, then widened from the last back.
 */
static void
widen_labeled_counts(CorpusBuilder *b)
{
	int64		n = (int64) b->n_count_words * b->n_count_values;
	uint32	   *c32;

	gnb_check_job_memory(reading_job, (double) MemoryContextMemAllocated(b->cxt, true),
						 (double) sizeof(uint32) * (n + 1), "the labelled documents' counts");
	c32 = repalloc_huge(b->labeled_counts32, sizeof(double) * ((Size) n + 1));
	b->labeled_counts = (double *) c32;
	for (int64 i = n - 1; i >= 0; i--)
	{
		double		v = c32[i];

		b->labeled_counts[i] = v;
	}
	b->labeled_counts32 = NULL;
}

/* `times` occurrences of a token in the current document (a gnb_token_fn). */
static void
add_token(void *arg, const char *str, int len, int32 times)
{
	CorpusBuilder *b = arg;
	bool		found;
	WordSlot   *slot = word_slot(b, str, len, &found);
	int32		doc = b->token_doc;

	/*
	 * A checked document's words are all in the labelled counts (one
	 * snapshot): a new one means the data is not what was counted.
	 */
	if (!found && doc < -1)
		elog(ERROR, "the labelled documents changed while they were read");

	b->n_tokens += times;
	if (slot->last_doc == doc)
	{
		if (!b->count_wide)
		{
			uint32		c = (uint32) b->count16[slot->pos] + (uint32) times;

			if (c <= PG_UINT16_MAX)
			{
				b->count16[slot->pos] = (uint16) c;
				return;
			}
			widen_counts(b, b->pairs_cap);
		}
		b->count[slot->pos] += times;
		return;
	}
	if (b->n_pairs == b->pairs_cap)
	{
		int64		cap = b->pairs_cap * 2;

		b->word = grow(b->cxt, b->word, sizeof(int32), cap);
		if (b->count_wide)
			b->count = grow(b->cxt, b->count, sizeof(int32), cap);
		else
			b->count16 = grow(b->cxt, b->count16, sizeof(uint16), cap);
		b->pairs_cap = cap;
	}
	if (!b->count_wide && times > PG_UINT16_MAX)
		widen_counts(b, b->pairs_cap);
	slot->last_doc = doc;
	slot->pos = (int32) b->n_pairs;
	b->word[b->n_pairs] = slot->id;
	if (b->count_wide)
		b->count[b->n_pairs] = times;
	else
		b->count16[b->n_pairs] = (uint16) times;
	b->n_pairs++;
}

static int
cmp_cstring_ptr(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

/*
 * A word to sort by its token's bytes: the first 8 of them big-endian (a
 * token never holds a NUL, text cannot, so the zero padding sorts a prefix
 * first, as strcmp does), the rest compared only on a tie.
 */
typedef struct WordSortKey
{
	uint64		key;
	const char *str;
	int32		id;
} WordSortKey;

/* The first 8 bytes of a token as a big-endian number, zero padded. */
static uint64
sort_key(const char *str, int len)
{
	uint64		key = 0;

	for (int i = 0; i < 8; i++)
		key = (key << 8) | (i < len ? (unsigned char) str[i] : 0);
	return key;
}

static inline int
cmp_word_key(const WordSortKey *a, const WordSortKey *b)
{
	if (a->key != b->key)
		return a->key < b->key ? -1 : 1;
	/* the same first 8 bytes: both are at least 8 bytes long */
	return strcmp(a->str + 8, b->str + 8);
}

#define ST_SORT sort_word_keys
#define ST_ELEMENT_TYPE WordSortKey
#define ST_COMPARE(a, b) cmp_word_key(a, b)
#define ST_SCOPE static
#define ST_DECLARE
#define ST_DEFINE
#include "lib/sort_template.h"

static void
grow_docs(CorpusBuilder *b)
{
	int32		cap = b->docs_cap * 2;

	b->doc_start = grow(b->cxt, b->doc_start, sizeof(int64), cap + 1);
	b->label = grow(b->cxt, b->label, sizeof(int32), cap);
	b->ids = grow(b->cxt, b->ids, sizeof(Datum), cap);
	b->docs_cap = cap;
}

static void
null_id_error(const GnbJobParams *params)
{
	ereport(ERROR,
			(errcode(ERRCODE_NOT_NULL_VIOLATION),
			 errmsg("id column \"%s\" of %s has NULL values",
					params->source.id_column, params->source_display)));
}

/*
 * Run a read-only query, calling fn for every row as the executor produces
 * it: no batch of rows is ever held, and what fn allocates (detoasted
 * values) is freed after each row, so that what reading holds beyond the
 * corpus is one row, however large the rows (a view may make each of them a
 * 1 GB value).  The query's columns must have the types in `types` (ncols of
 * them): fn takes their values as such.
 */
typedef void (*row_fn) (CorpusBuilder *b, const GnbJobParams *params, Datum *values,
						bool *nulls);

typedef struct RowReceiver
{
	DestReceiver pub;
	CorpusBuilder *b;
	const GnbJobParams *params;
	int			ncols;
	const Oid  *types;
	row_fn		fn;
	MemoryContext row_cxt;
} RowReceiver;

static void
row_receiver_startup(DestReceiver *self, int operation, TupleDesc desc)
{
	RowReceiver *r = (RowReceiver *) self;

	for (int c = 0; c < r->ncols; c++)
		gnb_check_result_column(desc, c + 1, r->types[c], c == 0 ? "id" : "tokens or label");
}

static bool
row_receiver_receive(TupleTableSlot *slot, DestReceiver *self)
{
	RowReceiver *r = (RowReceiver *) self;
	MemoryContext old;

	slot_getallattrs(slot);
	old = MemoryContextSwitchTo(r->row_cxt);
	r->fn(r->b, r->params, slot->tts_values, slot->tts_isnull);
	MemoryContextSwitchTo(old);
	MemoryContextReset(r->row_cxt);
	CHECK_FOR_INTERRUPTS();
	return true;
}

static void
row_receiver_noop(DestReceiver *self)
{
}

static void
for_each_row(CorpusBuilder *b, const GnbJobParams *params, const char *sql,
			 int ncols, const Oid *types, row_fn fn)
{
	RowReceiver r;
	SPIExecuteOptions options;
	int			rc;

	memset(&r, 0, sizeof(r));
	r.pub.receiveSlot = row_receiver_receive;
	r.pub.rStartup = row_receiver_startup;
	r.pub.rShutdown = row_receiver_noop;
	r.pub.rDestroy = row_receiver_noop;
	r.pub.mydest = DestNone;
	r.b = b;
	r.params = params;
	r.ncols = ncols;
	r.types = types;
	r.fn = fn;
	r.row_cxt = AllocSetContextCreate(CurrentMemoryContext, "gibbs_nb read row",
									  ALLOCSET_DEFAULT_SIZES);
	memset(&options, 0, sizeof(options));
	options.read_only = true;
	options.dest = &r.pub;
	/* a receiver that is not SPI's makes a SELECT return SPI_OK_UTILITY */
	rc = SPI_execute_extended(sql, &options);
	if (rc < 0)
		elog(ERROR, "gibbs_nb: reading the source failed (%s): %s", SPI_result_code_string(rc), sql);
	MemoryContextDelete(r.row_cxt);
}

/*
 * Before a value of the row is detoasted (or, computed by a view, used):
 * its size must fit the job's budget on top of what the corpus holds.
 */
static void
check_value_size(CorpusBuilder *b, const GnbJobParams *params, Datum value)
{
	gnb_check_job_memory(params, (double) MemoryContextMemAllocated(b->cxt, true),
						 (double) toast_raw_datum_size(value), "reading the source");
}

/* A row of the ids query: (id, label, tokens IS NULL, held out). */
static void
add_labeled_row(CorpusBuilder *b, const GnbJobParams *params, Datum *values, bool *nulls)
{
	bool		id_null = nulls[0],
				label_null = nulls[1];
	Datum		id = values[0];
	Datum		label = values[1];
	bool		no_tokens = DatumGetBool(values[2]);
	bool		held_out = DatumGetBool(values[3]);
	text	   *t;
	MemoryContext old;

	if (id_null)
		null_id_error(params);
	if (no_tokens)
	{
		b->n_skipped++;
		if (held_out)
			b->n_holdout_skipped++;
		return;
	}
	if (label_null || held_out)
		return;					/* read with its tokens */
	if (b->n_labeled == b->labeled_cap)
	{
		int32		cap = b->labeled_cap * 2;

		b->labeled_ids = grow(b->cxt, b->labeled_ids, sizeof(Datum), cap);
		b->labeled_value = grow(b->cxt, b->labeled_value, sizeof(int32), cap);
		b->labeled_cap = cap;
	}
	check_value_size(b, params, label);
	t = DatumGetTextPP(label);
	b->labeled_value[b->n_labeled] = intern_label(b, VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
	if (b->id_typlen == -1)
		check_value_size(b, params, id);
	old = MemoryContextSwitchTo(b->cxt);
	b->labeled_ids[b->n_labeled] = datumCopy(id, b->id_typbyval, b->id_typlen);
	MemoryContextSwitchTo(old);
	b->n_labeled++;
}

/* A row of the documents query: (id, tokens), an unlabelled document. */
static void
add_document_row(CorpusBuilder *b, const GnbJobParams *params, Datum *values, bool *nulls)
{
	bool		id_null = nulls[0],
				tokens_null = nulls[1];
	Datum		id = values[0];
	Datum		tokens = values[1];
	MemoryContext old;

	if (id_null)
		null_id_error(params);
	if (tokens_null)
	{
		b->n_skipped++;
		return;
	}
	if (b->n_docs == PG_INT32_MAX - 1)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many documents")));
	if (b->n_docs == b->docs_cap)
		grow_docs(b);
	b->doc_start[b->n_docs] = b->n_pairs;
	check_value_size(b, params, tokens);
	b->token_doc = b->n_docs;
	gnb_each_token(tokens, params->source.tokens_base == TSVECTOROID, add_token, b);
	b->label[b->n_docs] = -1;
	if (b->id_typlen == -1)
		check_value_size(b, params, id);
	old = MemoryContextSwitchTo(b->cxt);
	b->ids[b->n_docs] = datumCopy(id, b->id_typbyval, b->id_typlen);
	MemoryContextSwitchTo(old);
	b->n_docs++;
}

/*
 * A row of the checked query: (id, label, tokens), a labelled document
 * whose words are already counted.  Its pairs go after the unlabelled
 * documents'; the sampler never sees them.
 */
static void
add_checked_row(CorpusBuilder *b, const GnbJobParams *params, Datum *values, bool *nulls)
{
	text	   *t;

	if (nulls[1] || nulls[2])
		elog(ERROR, "the labelled documents changed while they were read");
	if (b->n_checked == b->checked_cap)
		elog(ERROR, "the labelled documents changed while they were read");
	check_value_size(b, params, values[1]);
	t = DatumGetTextPP(values[1]);
	b->checked_value[b->n_checked] = intern_label(b, VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
	if (b->checked_value[b->n_checked] >= b->n_count_values)
		elog(ERROR, "the labelled documents changed while they were read");
	b->checked_start[b->n_checked] = b->n_pairs;
	check_value_size(b, params, values[2]);
	b->token_doc = -2 - b->n_checked;
	gnb_each_token(values[2], params->source.tokens_base == TSVECTOROID, add_token, b);
	b->n_checked++;
	b->checked_start[b->n_checked] = b->n_pairs;
}

/*
 * A row of the held-out query: (id, tokens, label).  The document is kept as
 * it is, for the published version to score; its words do not enter the
 * vocabulary.
 */
static void
add_holdout_row(CorpusBuilder *b, const GnbJobParams *params, Datum *values, bool *nulls)
{
	bool		id_null = nulls[0],
				tokens_null = nulls[1],
				label_null = nulls[2];
	Datum		id = values[0];
	Datum		tokens = values[1];
	Datum		label = values[2];
	MemoryContext old;

	if (id_null)
		null_id_error(params);
	if (tokens_null || label_null)
		elog(ERROR, "the held-out documents changed while they were read");
	if (b->n_holdout == b->holdout_cap)
	{
		int32		cap = b->holdout_cap * 2;

		b->holdout_ids = grow(b->cxt, b->holdout_ids, sizeof(Datum), cap);
		b->holdout_tokens = grow(b->cxt, b->holdout_tokens, sizeof(Datum), cap);
		b->holdout_labels = grow(b->cxt, b->holdout_labels, sizeof(char *), cap);
		b->holdout_cap = cap;
	}
	check_value_size(b, params, tokens);
	check_value_size(b, params, label);
	gnb_check_label_length((int) (toast_raw_datum_size(label) - VARHDRSZ));
	if (b->id_typlen == -1)
		check_value_size(b, params, id);
	old = MemoryContextSwitchTo(b->cxt);
	b->holdout_ids[b->n_holdout] = datumCopy(id, b->id_typbyval, b->id_typlen);
	b->holdout_tokens[b->n_holdout] = PointerGetDatum(PG_DETOAST_DATUM_COPY(tokens));
	b->holdout_labels[b->n_holdout] = TextDatumGetCString(label);
	MemoryContextSwitchTo(old);
	b->n_holdout++;
}

/*
 * The condition that holds out a labelled row, as SQL over the source's
 * columns, or NULL without holdout: the row's id as text, hashed with the
 * seed (hashtextextended, collation "C": the bytes, whatever the id's
 * collation), has its low 53 bits below holdout x 2^53.  The
 * same rows for the same seed and data, whatever the scan order; a user can
 * select them with the same expression.
 */
char *
gnb_holdout_condition(const GnbJobParams *params)
{
	const GnbSourceDesc *src = &params->source;
	int64		threshold;

	if (params->holdout <= 0.0 || src->label_attnum == 0)
		return NULL;
	threshold = (int64) floor(params->holdout * 9007199254740992.0);
	return psprintf("(%s IS NOT NULL AND (pg_catalog.hashtextextended(%s::pg_catalog.text COLLATE pg_catalog.\"C\", "
					"(" INT64_FORMAT ")::pg_catalog.int8) OPERATOR(pg_catalog.&) "
					"9007199254740991::pg_catalog.int8) OPERATOR(pg_catalog.<) "
					"(" INT64_FORMAT ")::pg_catalog.int8)",
					quote_identifier(src->label_column), quote_identifier(src->id_column),
					(int64) params->sampler.seed, threshold);
}

/*
 * The labelled documents' class x word counts, by gibbs_nb_class_counts: the
 * planner may count them in parallel workers.  Returns the value, parsed.
 * The aggregate is called as gibbs_nb.labelled_counts, in the extension's
 * own schema, where no other role can create an overload that makes the
 * call ambiguous (the extension's schema, often public, is not such a
 * place), with arguments of exactly its argument types (a domain over
 * text[] is cast to text[]), so that no aggregate another role created, in
 * any schema, can match better.
 */
static void
read_labeled_counts(CorpusBuilder *b, const GnbJobParams *params, const char *source_sql,
					const char *held_out, MemoryContext parse_cxt, GnbParsedCounts *pc)
{
	const GnbSourceDesc *src = &params->source;
	char	   *sql;
	bool		isnull;
	MemoryContext old;
	bytea	   *value;
	int64		budget_kb;
	char		budget[32];
	int			nestlevel;

	sql = psprintf("SELECT gibbs_nb.labelled_counts(%s::pg_catalog.text, %s::pg_catalog.%s) "
				   "FROM %s WHERE %s IS NOT NULL%s%s",
				   quote_identifier(src->label_column),
				   quote_identifier(src->tokens_column),
				   src->tokens_base == TSVECTOROID ? "tsvector" : "text[]",
				   source_sql,
				   quote_identifier(src->label_column),
				   held_out ? " AND NOT " : "", held_out ? held_out : "");
	/*
	 * The aggregate's state, in this process and in each parallel worker
	 * (which inherit the setting), is bounded by what is left of the job's
	 * budget: without it, millions of distinct tokens would build a state of
	 * gigabytes before anything here could check the value.  Superuser-only,
	 * so nothing in the caller's source can raise it; the query's own GUC
	 * level restores it.
	 */
	budget_kb = (params->max_job_memory - (int64) MemoryContextMemAllocated(b->cxt, true)) / 1024;
	snprintf(budget, sizeof(budget), INT64_FORMAT "kB", Max(budget_kb, 1));
	nestlevel = NewGUCNestLevel();
	(void) set_config_option("gibbs_nb.class_counts_budget", budget,
							 PGC_SUSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);

	/*
	 * Parallel workers count, the leader only combines their states: a
	 * leader that also counts holds its own state beside each worker's as
	 * it combines them, twice the memory of counting in one process (at 1x
	 * SpamAssassin, 26 MB against 13 MB).  With no worker launched the
	 * leader counts all the same.
	 */
	(void) set_config_option("parallel_leader_participation", "off",
							 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	/* no row limit: a limit turns parallel execution off (ExecutePlan) */
	if (SPI_execute(sql, true, 0) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not count the labelled documents of %s", source_sql);
	AtEOXact_GUC(true, nestlevel);
	gnb_check_result_column(SPI_tuptable->tupdesc, 1, BYTEAOID, "class counts");
	value = (bytea *) DatumGetPointer(SPI_getbinval(SPI_tuptable->vals[0],
													SPI_tuptable->tupdesc, 1, &isnull));
	if (isnull)
		elog(ERROR, "gibbs_nb_class_counts returned NULL");
	check_value_size(b, params, PointerGetDatum(value));
	/*
	 * Parsed where it is, into parse_cxt: the caller takes what it needs
	 * and frees both, with SPI's result, before the documents are read.  A
	 * token or class twice is checked by the caller as it interns them.
	 */
	old = MemoryContextSwitchTo(parse_cxt);
	value = DatumGetByteaPP(PointerGetDatum(value));
	gnb_counts_parse(value, pc, false);
	MemoryContextSwitchTo(old);
}

static void
counts_twice(const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
			 errmsg("invalid gibbs_nb_class_counts value: a %s occurs twice", what)));
}

/*
 * Read the source of a job.  Runs as the caller, with one snapshot for all
 * its queries, in a transaction that holds the source's lock (see
 * gnb_lock_source, which gives source_sql); SPI must not be connected.
 * Everything the corpus holds is allocated in cxt.
 */
void
gnb_read_corpus(const GnbJobParams *params, const char *source_sql, MemoryContext cxt,
				GnbCorpus *corpus)
{
	const GnbSourceDesc *src = &params->source;
	CorpusBuilder b;
	TypeCacheEntry *idtype = lookup_type_cache(src->id_type, TYPECACHE_LT_OPR);
	const char *order = OidIsValid(idtype->lt_opr) ? " ORDER BY 1" : "";
	bool		has_label = src->label_attnum != 0;
	const char *id = quote_identifier(src->id_column);
	const char *tokens = quote_identifier(src->tokens_column);
	Oid			labeled_types[4] = {src->id_type, TEXTOID, BOOLOID, BOOLOID};
	Oid			document_types[2] = {src->id_type, src->tokens_type};
	Oid			holdout_types[3] = {src->id_type, src->tokens_type, TEXTOID};
	Oid			checked_types[3] = {src->id_type, TEXTOID, src->tokens_type};
	char	   *held_out = gnb_holdout_condition(params);
	GnbParsedCounts counts;
	GnbCountsIter cells;
	int32		cls,
				word;
	int64		n;
	int32	   *class_of_value = NULL;
	int32	   *count_class = NULL;
	int32	   *new_id;
	WordSortKey *keys;
	int32		n_keys;
	int32		K;

	memset(&b, 0, sizeof(b));
	memset(&counts, 0, sizeof(counts));
	reading_job = params;
	b.cxt = cxt;
	b.scratch = AllocSetContextCreate(cxt, "gibbs_nb read", ALLOCSET_DEFAULT_SIZES);
	b.text_cxt = AllocSetContextCreate(b.scratch, "gibbs_nb tokens", ALLOCSET_DEFAULT_SIZES);
	b.slots_mask = 4096 - 1;
	b.slots = alloc_word_table(&b, 4096);
	b.labels = vocab_create(b.scratch, 16, NULL);
	b.labels_cap = 16;
	b.label_values = MemoryContextAlloc(cxt, sizeof(char *) * b.labels_cap);
	b.docs_cap = 1024;
	b.doc_start = MemoryContextAlloc(cxt, sizeof(int64) * (b.docs_cap + 1));
	b.label = MemoryContextAlloc(cxt, sizeof(int32) * b.docs_cap);
	b.ids = MemoryContextAlloc(cxt, sizeof(Datum) * b.docs_cap);
	b.labeled_cap = 1024;
	b.labeled_ids = MemoryContextAlloc(cxt, sizeof(Datum) * b.labeled_cap);
	b.labeled_value = MemoryContextAlloc(cxt, sizeof(int32) * b.labeled_cap);
	b.holdout_cap = 16;
	b.holdout_ids = MemoryContextAlloc(cxt, sizeof(Datum) * b.holdout_cap);
	b.holdout_tokens = MemoryContextAlloc(cxt, sizeof(Datum) * b.holdout_cap);
	b.holdout_labels = MemoryContextAlloc(cxt, sizeof(char *) * b.holdout_cap);
	b.pairs_cap = 16384;
	b.word = MemoryContextAlloc(cxt, sizeof(int32) * b.pairs_cap);
	b.count16 = MemoryContextAlloc(cxt, sizeof(uint16) * b.pairs_cap);
	get_typlenbyval(src->id_type, &b.id_typlen, &b.id_typbyval);

	SPI_connect();
	if (has_label)
	{
		const char *label = quote_identifier(src->label_column);

		/* 1. every row's id and label, without reading its tokens */
		for_each_row(&b, params,
					 psprintf("SELECT %s, %s::pg_catalog.text, %s IS NULL, %s FROM %s%s",
							  id, label, tokens, held_out ? held_out : "false", source_sql, order),
					 4, labeled_types, add_labeled_row);
		/* 2. the labelled documents' counts, by the parallel aggregate */
		if (b.n_labeled > 0)
		{
			bool		found;
			bool	   *class_seen;
			MemoryContext parse_cxt = AllocSetContextCreate(b.scratch, "gibbs_nb counts",
															ALLOCSET_DEFAULT_SIZES);
			int32		n_values = b.n_label_values;

			read_labeled_counts(&b, params, source_sql, held_out, parse_cxt, &counts);
			/*
			 * The word table at its size for them at once, not doubled step
			 * by step with the old table beside the new each time
			 */
			{
				uint64		cap = (uint64) b.slots_mask + 1;

				while ((uint64) counts.n_words > WORD_TABLE_FILL(cap))
					cap *= 2;
				if (cap > (uint64) b.slots_mask + 1)
					resize_word_table(&b, cap);
			}
			/*
			 * The counts' words are the first in the vocabulary, ids 0 ..
			 * n_words - 1 in their order: none twice
			 */
			for (int32 i = 0; i < counts.n_words; i++)
			{
				(void) word_slot(&b, counts.word_str[i], counts.word_len[i], &found);
				if (found)
					counts_twice("token");
			}
			/* the counts' classes are labels seen by the ids query: one snapshot */
			count_class = MemoryContextAlloc(parse_cxt, sizeof(int32) * (counts.n_classes + 1));
			class_seen = MemoryContextAllocZero(parse_cxt, sizeof(bool) * (n_values + 1));
			for (int32 c = 0; c < counts.n_classes; c++)
			{
				VocabEntry *e = vocab_lookup(b.labels, token_key(counts.class_str[c],
																 counts.class_len[c]));

				if (e == NULL)
					elog(ERROR, "gibbs_nb_class_counts saw a label the ids query did not");
				if (class_seen[e->id])
					counts_twice("class");
				class_seen[e->id] = true;
				count_class[c] = e->id;
			}
			/* the counts by word and label, the value and its parse gone */
			gnb_check_job_memory(params, (double) MemoryContextMemAllocated(cxt, true),
								 (double) sizeof(uint32) * ((double) counts.n_words * n_values + 1),
								 "the labelled documents' counts");
			b.labeled_counts32 = MemoryContextAllocExtended(b.scratch,
															sizeof(uint32) * ((Size) counts.n_words * n_values + 1),
															MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
			Assert(b.n_words == counts.n_words);
			b.n_count_words = counts.n_words;
			b.n_count_values = n_values;
			gnb_counts_iter_init(&cells, &counts);
			while (gnb_counts_next(&cells, &cls, &word, &n))
			{
				int64		at = (int64) word * n_values + count_class[cls];

				if (b.labeled_counts32 != NULL &&
					(uint64) n > (uint64) PG_UINT32_MAX - b.labeled_counts32[at])
					widen_labeled_counts(&b);
				if (b.labeled_counts32 != NULL)
					b.labeled_counts32[at] += (uint32) n;
				else
					b.labeled_counts[at] += n;
				b.labeled_tokens += n;
			}
			MemoryContextDelete(parse_cxt);

			/*
			 * The counting query's states and plan are gone, its result
			 * read: give their memory back to the system before the
			 * documents' arrays grow, which glibc maps apart from its heap
			 * once they are large.
			 */
			SPI_freetuptable(SPI_tuptable);
#ifdef __GLIBC__
			(void) malloc_trim(0);
#endif
		}
		/* 3. the unlabelled documents, with their tokens */
		for_each_row(&b, params,
					 psprintf("SELECT %s, %s FROM %s WHERE %s IS NULL AND %s IS NOT NULL%s",
							  id, tokens, source_sql, label, tokens, order),
					 2, document_types, add_document_row);
		b.doc_start[b.n_docs] = b.n_pairs;

		/*
		 * 3b. with both kinds, up to GNB_CHECKED_DOCS labelled documents with
		 * their tokens, for the label check: all of them, or those first by
		 * a hash of their id keyed by the seed (as holdout chooses), the id
		 * breaking ties where it has an order: the same ones for the same
		 * seed and data, whatever order the ids follow
		 */
		if (b.n_labeled > 0 && b.n_docs > 0)
		{
			int32		n = Min(b.n_labeled, GNB_CHECKED_DOCS);

			b.checked_start = MemoryContextAlloc(cxt, sizeof(int64) * (n + 1));
			b.checked_value = MemoryContextAlloc(cxt, sizeof(int32) * (n + 1));
			b.checked_start[0] = b.n_pairs;
			b.checked_cap = n;
			/* all of them: in any order (the check's counts do not depend on it) */
			if (n == b.n_labeled)
				for_each_row(&b, params,
							 psprintf("SELECT %s, %s::pg_catalog.text, %s FROM %s "
									  "WHERE %s IS NOT NULL AND %s IS NOT NULL AND NOT (%s)",
									  id, label, tokens, source_sql, label, tokens,
									  held_out ? held_out : "false"),
							 3, checked_types, add_checked_row);
			else
				for_each_row(&b, params,
							 psprintf("SELECT %s, %s::pg_catalog.text, %s FROM %s "
									  "WHERE %s IS NOT NULL AND %s IS NOT NULL AND NOT (%s) "
									  "ORDER BY pg_catalog.hashtextextended(%s::pg_catalog.text "
									  "COLLATE pg_catalog.\"C\", (" INT64_FORMAT ")::pg_catalog.int8)%s "
									  "LIMIT %d",
									  id, label, tokens, source_sql, label, tokens,
									  held_out ? held_out : "false", id,
									  (int64) params->sampler.seed, *order ? ", 1" : "", n),
							 3, checked_types, add_checked_row);
		}
		/* 4. the held-out documents, with their tokens and labels */
		if (held_out)
			for_each_row(&b, params,
						 psprintf("SELECT %s, %s, %s::pg_catalog.text FROM %s WHERE %s AND %s IS NOT NULL%s",
								  id, tokens, label, source_sql, held_out, tokens, order),
						 3, holdout_types, add_holdout_row);
	}
	else
		for_each_row(&b, params,
					 psprintf("SELECT %s, %s FROM %s%s", id, tokens, source_sql, order),
					 2, document_types, add_document_row);
	SPI_finish();
	if (!has_label)
		b.doc_start[b.n_docs] = b.n_pairs;

	/*
	 * Classes: the distinct labels in byte order (a fixed order that does not
	 * depend on the database's collation), or 1..n_classes without labels.
	 */
	gnb_check_label_values(b.n_label_values, params->n_classes, source_sql);
	if (b.n_label_values == 0)
	{
		K = params->n_classes;
		corpus->classes = MemoryContextAlloc(cxt, sizeof(char *) * K);
		for (int32 k = 0; k < K; k++)
			corpus->classes[k] = MemoryContextStrdup(cxt, psprintf("%d", k + 1));
	}
	else
	{
		K = b.n_label_values;
		corpus->classes = MemoryContextAlloc(cxt, sizeof(char *) * K);
		memcpy(corpus->classes, b.label_values, sizeof(char *) * K);
		qsort(corpus->classes, K, sizeof(char *), cmp_cstring_ptr);
		class_of_value = MemoryContextAlloc(cxt, sizeof(int32) * K);
		for (int32 v = 0; v < K; v++)
			for (int32 k = 0; k < K; k++)
				if (corpus->classes[k] == b.label_values[v])
					class_of_value[v] = k;
	}
	corpus->n_classes = K;

	/*
	 * Word ids in byte order of the tokens, whatever order they came in; the
	 * pairs as the sampler takes them, in arrays of their exact size.
	 */
	gnb_check_job_memory(params, (double) MemoryContextMemAllocated(cxt, true),
						 (double) (sizeof(int32) + sizeof(char *)) *
						 ((double) b.n_words + 1), "reading the source");

	/*
	 * The sort keys are made in the word table's own memory, which it no
	 * longer needs: a key is smaller than a slot, so the n-th key, written
	 * once slot i >= n is read, ends before slot i + 1 begins.
	 */
	StaticAssertStmt(sizeof(WordSortKey) <= sizeof(WordSlot), "a sort key must fit in a slot");
	keys = (WordSortKey *) b.slots;
	n_keys = 0;
	for (uint64 i = 0; i <= b.slots_mask; i++)
	{
		WordSlot	slot = b.slots[i];

		if (slot.str == NULL)
			continue;
		keys[n_keys].key = sort_key(slot.str, slot.len);
		keys[n_keys].str = slot.str;
		keys[n_keys].id = slot.id;
		n_keys++;
	}
	Assert(n_keys == b.n_words);
	b.slots = NULL;
	/* the table's room past the keys goes back (a large block shrinks in place) */
	keys = repalloc_huge(keys, sizeof(WordSortKey) * ((Size) n_keys + 1));
	sort_word_keys(keys, n_keys);
	new_id = MemoryContextAllocExtended(b.scratch, sizeof(int32) * ((Size) b.n_words + 1),
										MCXT_ALLOC_HUGE);
	for (int32 i = 0; i < b.n_words; i++)
		new_id[keys[i].id] = i;

	/*
	 * The vocabulary as the text[] a version stores, in the corpus.  The
	 * keys are only their strings now, in order, in the keys' own memory (the
	 * i-th string written where key i or an earlier one was), which shrinks
	 * to them; the tokens' text, copied as it was read, goes with them, and
	 * both before the pairs are widened.
	 */
	{
		MemoryContext old = MemoryContextSwitchTo(cxt);
		char	  **strs = (char **) keys;

		StaticAssertStmt(sizeof(char *) <= sizeof(WordSortKey), "a string must fit in a key");
		for (int32 i = 0; i < n_keys; i++)
			strs[i] = (char *) keys[i].str;
		strs = repalloc_huge(strs, sizeof(char *) * ((Size) n_keys + 1));
		gnb_check_job_memory(params, (double) MemoryContextMemAllocated(cxt, true),
							 (double) b.text_bytes + 8.0 * b.n_words + 1024.0, "reading the source");
		corpus->tokens = gnb_text_array(strs, n_keys);
		MemoryContextSwitchTo(old);
		pfree(strs);
		MemoryContextDelete(b.text_cxt);
		b.text_cxt = NULL;
	}
	b.word = repalloc_huge(b.word, sizeof(int32) * ((Size) b.n_pairs + 1));
	if (b.count_wide)
		b.count = repalloc_huge(b.count, sizeof(int32) * ((Size) b.n_pairs + 1));
	else
		widen_counts(&b, b.n_pairs);
	corpus->n_tokens = 0;
	for (int64 p = 0; p < b.n_pairs; p++)
	{
		b.word[p] = new_id[b.word[p]];
		/* the checked documents' tokens are among the labelled ones */
		if (p < b.doc_start[b.n_docs])
			corpus->n_tokens += b.count[p];
	}

	/* the labelled documents, as ids, classes and counts */
	corpus->n_labeled = b.n_labeled;
	corpus->labeled_ids = b.labeled_ids;
	corpus->labeled_class = MemoryContextAlloc(cxt, sizeof(int32) * (b.n_labeled + 1));
	corpus->labeled_doc_counts = MemoryContextAllocZero(cxt, sizeof(double) * K);
	/* the labelled documents' V x K counts: only when there are any */
	corpus->labeled_word_counts = NULL;
	corpus->word_counts = NULL;
	if (b.n_labeled > 0)
	{
		gnb_check_job_memory(params, (double) MemoryContextMemAllocated(cxt, true),
							 (double) sizeof(double) * ((double) b.n_words * K + 1),
							 "the labelled documents' counts");
		corpus->labeled_word_counts = MemoryContextAllocExtended(cxt, sizeof(double) * ((Size) b.n_words * K + 1),
																 MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	}
	for (int32 i = 0; i < b.n_labeled; i++)
	{
		corpus->labeled_class[i] = class_of_value[b.labeled_value[i]];
		corpus->labeled_doc_counts[corpus->labeled_class[i]] += 1;
	}
	for (int32 w = 0; w < b.n_count_words; w++)
		for (int32 v = 0; v < b.n_count_values; v++)
			corpus->labeled_word_counts[(int64) new_id[w] * K + class_of_value[v]] +=
				b.labeled_counts32 ? (double) b.labeled_counts32[(int64) w * b.n_count_values + v] :
				b.labeled_counts[(int64) w * b.n_count_values + v];
	corpus->n_tokens += b.labeled_tokens;
	corpus->n_checked = b.n_checked;
	corpus->checked_start = b.checked_start;
	corpus->checked_class = b.checked_value;
	for (int32 i = 0; i < b.n_checked; i++)
		corpus->checked_class[i] = class_of_value[b.checked_value[i]];

	corpus->n_docs = b.n_docs;
	corpus->n_words = b.n_words;
	corpus->doc_start = b.doc_start;
	corpus->word = b.word;
	corpus->count = b.count;
	corpus->label = b.label;
	corpus->ids = b.ids;
	corpus->n_skipped = b.n_skipped;
	corpus->n_holdout = b.n_holdout;
	corpus->n_holdout_skipped = b.n_holdout_skipped;
	corpus->holdout_ids = b.holdout_ids;
	corpus->holdout_tokens = b.holdout_tokens;
	corpus->holdout_labels = b.holdout_labels;
	/* the word table, the counts' value, the renumbering */
	MemoryContextDelete(b.scratch);
}

/*
 * Once the sampler is done with the documents: each word's occurrences in
 * the training documents, labelled or not, as the int8[] the packed row
 * stores, made in the corpus's memory; then the documents' pairs and the
 * labelled counts, which nothing after sampling reads, are freed, so that
 * publishing does not hold them beside the arrays it builds.
 */
void
gnb_corpus_word_counts(GnbCorpus *corpus)
{
	MemoryContext old = MemoryContextSwitchTo(GetMemoryChunkContext(corpus->doc_start));
	int32		V = corpus->n_words;
	int32		K = corpus->n_classes;
	int64		n_pairs = corpus->doc_start[corpus->n_docs];
	int64	   *counts;

	corpus->word_counts = gnb_fixed_array(INT8OID, sizeof(int64), V, (void **) &counts);
	MemoryContextSwitchTo(old);
	if (corpus->labeled_word_counts != NULL)
	{
		for (int32 w = 0; w < V; w++)
			for (int32 k = 0; k < K; k++)
				counts[w] += (int64) corpus->labeled_word_counts[(int64) w * K + k];
		pfree(corpus->labeled_word_counts);
		corpus->labeled_word_counts = NULL;
	}
	for (int64 p = 0; p < n_pairs; p++)
		counts[corpus->word[p]] += corpus->count[p];
	pfree(corpus->word);
	pfree(corpus->count);
	corpus->word = NULL;
	corpus->count = NULL;
}
