/*
 * corpus_builder.c
 *	  The corpus as a job's reading builds it: the vocabulary (an
 *	  open-addressing word table over the tokens' copied text), the labels
 *	  seen, the growing arrays of documents and pairs, each growth within the
 *	  job's memory budget, and at the end the word ids renumbered in byte
 *	  order of the tokens.
 */
#include "gibbs_nb.h"

#include "worker/worker.h"
#include "worker/corpus_builder.h"
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
/* The job being read: its memory budget is checked as the corpus grows. */
static const GnbJobParams *reading_job;

/*
 * An array of n elements grown to new_n: repalloc, so that a large array
 * is grown in place where the allocator can (glibc moves the pages of an
 * mmap'd block by mremap), rather than copied from an old array into a new
 * one with both held.  The budget check still counts both.
 */
void *
corpus_grow(MemoryContext cxt, void *ptr, Size elem, int64 new_n)
{
	gnb_check_job_memory(reading_job, (double) MemoryContextMemAllocated(cxt, true),
						 (double) elem * new_n, "reading the source");
	return repalloc_huge(ptr, elem * new_n);
}

/* Id of a label, adding it to the labels if new. */
int32
corpus_intern_label(CorpusBuilder *b, const char *str, int len)
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

			b->label_values = corpus_grow(b->cxt, b->label_values, sizeof(char *), cap);
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
corpus_alloc_word_table(CorpusBuilder *b, uint64 n)
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
void
corpus_resize_word_table(CorpusBuilder *b, uint64 new_cap)
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
	slots = corpus_alloc_word_table(b, new_cap);
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
	corpus_resize_word_table(b, ((uint64) b->slots_mask + 1) * 2);
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

WordSlot *
corpus_word_slot(CorpusBuilder *b, const char *str, int len, bool *found)
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
corpus_widen_counts(CorpusBuilder *b, int64 n)
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
 * block as corpus_widen_counts does: grown, then widened from the last back.
 */
void
corpus_widen_labeled_counts(CorpusBuilder *b)
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
void
corpus_add_token(void *arg, const char *str, int len, int32 times)
{
	CorpusBuilder *b = arg;
	bool		found;
	WordSlot   *slot = corpus_word_slot(b, str, len, &found);
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
			corpus_widen_counts(b, b->pairs_cap);
		}
		b->count[slot->pos] += times;
		return;
	}
	if (b->n_pairs == b->pairs_cap)
	{
		int64		cap = b->pairs_cap * 2;

		b->word = corpus_grow(b->cxt, b->word, sizeof(int32), cap);
		if (b->count_wide)
			b->count = corpus_grow(b->cxt, b->count, sizeof(int32), cap);
		else
			b->count16 = corpus_grow(b->cxt, b->count16, sizeof(uint16), cap);
		b->pairs_cap = cap;
	}
	if (!b->count_wide && times > PG_UINT16_MAX)
		corpus_widen_counts(b, b->pairs_cap);
	slot->last_doc = doc;
	slot->pos = (int32) b->n_pairs;
	b->word[b->n_pairs] = slot->id;
	if (b->count_wide)
		b->count[b->n_pairs] = times;
	else
		b->count16[b->n_pairs] = (uint16) times;
	b->n_pairs++;
}

int
corpus_cmp_cstring_ptr(const void *a, const void *b)
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

void
corpus_grow_docs(CorpusBuilder *b)
{
	int32		cap = b->docs_cap * 2;

	b->doc_start = corpus_grow(b->cxt, b->doc_start, sizeof(int64), cap + 1);
	b->label = corpus_grow(b->cxt, b->label, sizeof(int32), cap);
	b->ids = corpus_grow(b->cxt, b->ids, sizeof(Datum), cap);
	b->docs_cap = cap;
}

/*
 * An empty corpus under construction, its arrays at their first sizes, for
 * the job params (whose budget every growth keeps within), in cxt.
 */
void
corpus_builder_init(CorpusBuilder *b, const GnbJobParams *params, MemoryContext cxt)
{
	memset(b, 0, sizeof(*b));
	reading_job = params;
	b->cxt = cxt;
	b->scratch = AllocSetContextCreate(cxt, "gibbs_nb read", ALLOCSET_DEFAULT_SIZES);
	b->text_cxt = AllocSetContextCreate(b->scratch, "gibbs_nb tokens", ALLOCSET_DEFAULT_SIZES);
	b->slots_mask = 4096 - 1;
	b->slots = corpus_alloc_word_table(b, 4096);
	b->labels = vocab_create(b->scratch, 16, NULL);
	b->labels_cap = 16;
	b->label_values = MemoryContextAlloc(cxt, sizeof(char *) * b->labels_cap);
	b->docs_cap = 1024;
	b->doc_start = MemoryContextAlloc(cxt, sizeof(int64) * (b->docs_cap + 1));
	b->label = MemoryContextAlloc(cxt, sizeof(int32) * b->docs_cap);
	b->ids = MemoryContextAlloc(cxt, sizeof(Datum) * b->docs_cap);
	b->ids_cxt = cxt;
	b->labeled_cap = 1024;
	b->labeled_ids = MemoryContextAlloc(cxt, sizeof(Datum) * b->labeled_cap);
	b->labeled_value = MemoryContextAlloc(cxt, sizeof(int32) * b->labeled_cap);
	b->holdout_cap = 16;
	b->holdout_ids = MemoryContextAlloc(cxt, sizeof(Datum) * b->holdout_cap);
	b->holdout_tokens = MemoryContextAlloc(cxt, sizeof(Datum) * b->holdout_cap);
	b->holdout_labels = MemoryContextAlloc(cxt, sizeof(char *) * b->holdout_cap);
	b->pairs_cap = 16384;
	b->word = MemoryContextAlloc(cxt, sizeof(int32) * b->pairs_cap);
	b->count16 = MemoryContextAlloc(cxt, sizeof(uint16) * b->pairs_cap);
	get_typlenbyval(params->source.id_type, &b->id_typlen, &b->id_typbyval);
}

/*
 * Word ids in byte order of the tokens, whatever order they came in: the
 * vocabulary as the text[] a version stores (corpus->tokens), the pairs as
 * the sampler takes them, renumbered, in arrays of their exact size, and
 * corpus->n_tokens of the unlabelled documents.  Returns each first-seen
 * word id's new one (in scratch memory).  The word table is gone after.
 */
int32 *
corpus_renumber_words(CorpusBuilder *b, const GnbJobParams *params, GnbCorpus *corpus)
{
	MemoryContext cxt = b->cxt;
	WordSortKey *keys;
	int32		n_keys;
	int32	   *new_id;

	/*
	 * Word ids in byte order of the tokens, whatever order they came in; the
	 * pairs as the sampler takes them, in arrays of their exact size.
	 */
	gnb_check_job_memory(params, (double) MemoryContextMemAllocated(cxt, true),
						 (double) (sizeof(int32) + sizeof(char *)) *
						 ((double) b->n_words + 1), "reading the source");

	/*
	 * The sort keys are made in the word table's own memory, which it no
	 * longer needs: a key is smaller than a slot, so the n-th key, written
	 * once slot i >= n is read, ends before slot i + 1 begins.
	 */
	StaticAssertStmt(sizeof(WordSortKey) <= sizeof(WordSlot), "a sort key must fit in a slot");
	keys = (WordSortKey *) b->slots;
	n_keys = 0;
	for (uint64 i = 0; i <= b->slots_mask; i++)
	{
		WordSlot	slot = b->slots[i];

		if (slot.str == NULL)
			continue;
		keys[n_keys].key = sort_key(slot.str, slot.len);
		keys[n_keys].str = slot.str;
		keys[n_keys].id = slot.id;
		n_keys++;
	}
	Assert(n_keys == b->n_words);
	b->slots = NULL;
	/* the table's room past the keys goes back (a large block shrinks in place) */
	keys = repalloc_huge(keys, sizeof(WordSortKey) * ((Size) n_keys + 1));
	sort_word_keys(keys, n_keys);
	new_id = MemoryContextAllocExtended(b->scratch, sizeof(int32) * ((Size) b->n_words + 1),
										MCXT_ALLOC_HUGE);
	for (int32 i = 0; i < b->n_words; i++)
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
							 (double) b->text_bytes + 8.0 * b->n_words + 1024.0, "reading the source");
		corpus->tokens = gnb_text_array(strs, n_keys);
		MemoryContextSwitchTo(old);
		pfree(strs);
		MemoryContextDelete(b->text_cxt);
		b->text_cxt = NULL;
	}
	b->word = repalloc_huge(b->word, sizeof(int32) * ((Size) b->n_pairs + 1));
	if (b->count_wide)
		b->count = repalloc_huge(b->count, sizeof(int32) * ((Size) b->n_pairs + 1));
	else
		corpus_widen_counts(b, b->n_pairs);
	corpus->n_tokens = 0;
	for (int64 p = 0; p < b->n_pairs; p++)
	{
		b->word[p] = new_id[b->word[p]];
		/* the checked documents' tokens are among the labelled ones */
		if (p < b->doc_start[b->n_docs])
			corpus->n_tokens += b->count[p];
	}
	return new_id;
}
