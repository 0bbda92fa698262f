/*
 * corpus.c
 *	  Read the source once into the sampler's compressed sparse rows.
 *
 * Runs in the worker, as the caller, inside one short transaction.  Tokens
 * become integer word ids through a simplehash vocabulary; each document
 * becomes its distinct words with their counts; labels become class ids in
 * sorted class order.  Rows are read in id order when the id type has one, so
 * that the same seed and data give the same model whatever the scan order.
 */
#include "gibbs_nb.h"
#include "tokens.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/typcache.h"


/* Rows fetched per SPI round trip. */
#define FETCH_ROWS 2000

/* Growable arrays of the corpus under construction. */
typedef struct CorpusBuilder
{
	MemoryContext cxt;
	vocab_hash *vocab;
	vocab_hash *labels;
	int32		n_words;
	int32		n_label_values;
	char	  **tokens;			/* word id -> token */
	char	  **label_values;	/* first-seen label id -> text */
	int32		words_cap;
	int32		labels_cap;
	/* per-word scratch to merge repeats within a document */
	int32	   *seen_in_doc;
	int32	   *pos_in_doc;
	/* documents */
	int32		n_docs;
	int32		docs_cap;
	int64	   *doc_start;
	int32	   *label;
	Datum	   *ids;
	/* (word, count) pairs */
	int64		n_pairs;
	int64		pairs_cap;
	int32	   *word;
	int32	   *count;
	int64		n_tokens;
	int32		n_skipped;
	int16		id_typlen;
	bool		id_typbyval;
} CorpusBuilder;

static void *
grow(MemoryContext cxt, void *ptr, Size elem, int64 old_n, int64 new_n)
{
	void	   *p = MemoryContextAllocExtended(cxt, elem * new_n, MCXT_ALLOC_HUGE);

	if (ptr)
	{
		memcpy(p, ptr, elem * old_n);
		pfree(ptr);
	}
	return p;
}

/* Id of a token (or label), adding it to the table if new. */
static int32
intern(CorpusBuilder *b, vocab_hash *table, const char *str, int len, bool is_label)
{
	TokenKey	key = {str, len};
	bool		found;
	VocabEntry *entry = vocab_insert(table, key, &found);

	if (!found)
	{
		char	   *copy = MemoryContextAlloc(b->cxt, len + 1);

		memcpy(copy, str, len);
		copy[len] = '\0';
		entry->key.str = copy;
		if (is_label)
		{
			if (b->n_label_values >= GNB_MAX_CLASSES)
				ereport(ERROR,
						(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						 errmsg("the label column has more than %d distinct values",
								GNB_MAX_CLASSES)));
			if (b->n_label_values == b->labels_cap)
			{
				int32		cap = b->labels_cap * 2;

				b->label_values = grow(b->cxt, b->label_values, sizeof(char *), b->labels_cap, cap);
				b->labels_cap = cap;
			}
			entry->id = b->n_label_values;
			b->label_values[b->n_label_values++] = copy;
		}
		else
		{
			if (b->n_words == PG_INT32_MAX)
				ereport(ERROR,
						(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						 errmsg("the vocabulary has more than %d tokens", PG_INT32_MAX)));
			if (b->n_words == b->words_cap)
			{
				int32		cap = b->words_cap * 2;

				b->tokens = grow(b->cxt, b->tokens, sizeof(char *), b->words_cap, cap);
				b->seen_in_doc = grow(b->cxt, b->seen_in_doc, sizeof(int32), b->words_cap, cap);
				b->pos_in_doc = grow(b->cxt, b->pos_in_doc, sizeof(int32), b->words_cap, cap);
				b->words_cap = cap;
			}
			entry->id = b->n_words;
			b->tokens[b->n_words] = copy;
			b->seen_in_doc[b->n_words] = -1;
			b->n_words++;
		}
	}
	return entry->id;
}

/* `times` occurrences of a token in the current document (a gnb_token_fn). */
static void
add_token(void *arg, const char *str, int len, int32 times)
{
	CorpusBuilder *b = arg;
	int32		w = intern(b, b->vocab, str, len, false);
	int32		doc = b->n_docs;

	b->n_tokens += times;
	if (b->seen_in_doc[w] == doc)
	{
		b->count[b->pos_in_doc[w]] += times;
		return;
	}
	if (b->n_pairs == b->pairs_cap)
	{
		int64		cap = b->pairs_cap * 2;

		b->word = grow(b->cxt, b->word, sizeof(int32), b->pairs_cap, cap);
		b->count = grow(b->cxt, b->count, sizeof(int32), b->pairs_cap, cap);
		b->pairs_cap = cap;
	}
	b->seen_in_doc[w] = doc;
	b->pos_in_doc[w] = (int32) b->n_pairs;
	b->word[b->n_pairs] = w;
	b->count[b->n_pairs] = times;
	b->n_pairs++;
}

static int
cmp_cstring_ptr(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

/*
 * Read the source of a job.  Runs as the caller; SPI must not be connected.
 * Everything the corpus holds is allocated in cxt.
 */
void
gnb_read_corpus(const GnbJobParams *params, MemoryContext cxt, GnbCorpus *corpus)
{
	CorpusBuilder b;
	StringInfoData sql;
	TypeCacheEntry *idtype = lookup_type_cache(params->id_type, TYPECACHE_LT_OPR);
	bool		has_label = params->label_column[0] != '\0';
	MemoryContext batch_cxt;
	MemoryContext old;
	Portal		portal;
	int32	   *class_of_value;

	memset(&b, 0, sizeof(b));
	b.cxt = cxt;
	b.vocab = vocab_create(cxt, 1024, NULL);
	b.labels = vocab_create(cxt, 16, NULL);
	b.words_cap = 1024;
	b.tokens = MemoryContextAlloc(cxt, sizeof(char *) * b.words_cap);
	b.seen_in_doc = MemoryContextAlloc(cxt, sizeof(int32) * b.words_cap);
	b.pos_in_doc = MemoryContextAlloc(cxt, sizeof(int32) * b.words_cap);
	b.labels_cap = 16;
	b.label_values = MemoryContextAlloc(cxt, sizeof(char *) * b.labels_cap);
	b.docs_cap = 1024;
	b.doc_start = MemoryContextAlloc(cxt, sizeof(int64) * (b.docs_cap + 1));
	b.label = MemoryContextAlloc(cxt, sizeof(int32) * b.docs_cap);
	b.ids = MemoryContextAlloc(cxt, sizeof(Datum) * b.docs_cap);
	b.pairs_cap = 16384;
	b.word = MemoryContextAlloc(cxt, sizeof(int32) * b.pairs_cap);
	b.count = MemoryContextAlloc(cxt, sizeof(int32) * b.pairs_cap);
	get_typlenbyval(params->id_type, &b.id_typlen, &b.id_typbyval);

	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT %s, %s, %s::pg_catalog.text FROM %s",
					 quote_identifier(params->id_column),
					 quote_identifier(params->tokens_column),
					 has_label ? quote_identifier(params->label_column) : "NULL",
					 params->source_name);
	if (OidIsValid(idtype->lt_opr))
		appendStringInfo(&sql, " ORDER BY 1");

	batch_cxt = AllocSetContextCreate(CurrentMemoryContext, "gibbs_nb read batch",
									  ALLOCSET_DEFAULT_SIZES);
	SPI_connect();
	portal = SPI_cursor_open_with_args(NULL, sql.data, 0, NULL, NULL, NULL, true,
									   CURSOR_OPT_NO_SCROLL);
	for (;;)
	{
		SPI_cursor_fetch(portal, true, FETCH_ROWS);
		if (SPI_processed == 0)
			break;
		old = MemoryContextSwitchTo(batch_cxt);
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			HeapTuple	tuple = SPI_tuptable->vals[r];
			TupleDesc	desc = SPI_tuptable->tupdesc;
			bool		id_null,
						tokens_null,
						label_null;
			Datum		id = SPI_getbinval(tuple, desc, 1, &id_null);
			Datum		tokens = SPI_getbinval(tuple, desc, 2, &tokens_null);
			Datum		label = SPI_getbinval(tuple, desc, 3, &label_null);

			if (id_null)
				ereport(ERROR,
						(errcode(ERRCODE_NOT_NULL_VIOLATION),
						 errmsg("id column \"%s\" of %s has NULL values",
								params->id_column, params->source_name)));
			if (tokens_null)
			{
				b.n_skipped++;
				continue;
			}
			if (b.n_docs == PG_INT32_MAX - 1)
				ereport(ERROR,
						(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						 errmsg("too many documents")));
			if (b.n_docs == b.docs_cap)
			{
				int32		cap = b.docs_cap * 2;

				b.doc_start = grow(cxt, b.doc_start, sizeof(int64), b.docs_cap + 1, cap + 1);
				b.label = grow(cxt, b.label, sizeof(int32), b.docs_cap, cap);
				b.ids = grow(cxt, b.ids, sizeof(Datum), b.docs_cap, cap);
				b.docs_cap = cap;
			}
			b.doc_start[b.n_docs] = b.n_pairs;
			gnb_each_token(tokens, params->tokens_are_tsvector, add_token, &b);
			if (label_null)
				b.label[b.n_docs] = -1;
			else
			{
				text	   *t = DatumGetTextPP(label);

				b.label[b.n_docs] = intern(&b, b.labels, VARDATA_ANY(t),
										   VARSIZE_ANY_EXHDR(t), true);
			}
			MemoryContextSwitchTo(cxt);
			b.ids[b.n_docs] = datumCopy(id, b.id_typbyval, b.id_typlen);
			MemoryContextSwitchTo(batch_cxt);
			b.n_docs++;
		}
		MemoryContextSwitchTo(old);
		MemoryContextReset(batch_cxt);
		SPI_freetuptable(SPI_tuptable);
		CHECK_FOR_INTERRUPTS();
	}
	SPI_cursor_close(portal);
	SPI_finish();
	MemoryContextDelete(batch_cxt);
	b.doc_start[b.n_docs] = b.n_pairs;

	/*
	 * Classes: the distinct labels in byte order (a fixed order that does not
	 * depend on the database's collation), or 1..n_classes without labels.
	 */
	if (b.n_label_values == 0)
	{
		if (params->n_classes == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s has no labelled rows and n_classes was not given",
							params->source_name)));
		corpus->n_classes = params->n_classes;
		corpus->classes = MemoryContextAlloc(cxt, sizeof(char *) * corpus->n_classes);
		for (int32 k = 0; k < corpus->n_classes; k++)
			corpus->classes[k] = MemoryContextStrdup(cxt, psprintf("%d", k + 1));
		class_of_value = NULL;
	}
	else
	{
		if (params->n_classes != 0 && params->n_classes != b.n_label_values)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("n_classes is %d but the label column has %d distinct values",
							params->n_classes, b.n_label_values)));
		if (b.n_label_values < 2)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("the label column has only one distinct value"),
					 errhint("A model needs at least 2 classes.")));
		corpus->n_classes = b.n_label_values;
		corpus->classes = MemoryContextAlloc(cxt, sizeof(char *) * corpus->n_classes);
		memcpy(corpus->classes, b.label_values, sizeof(char *) * corpus->n_classes);
		qsort(corpus->classes, corpus->n_classes, sizeof(char *), cmp_cstring_ptr);
		class_of_value = MemoryContextAlloc(cxt, sizeof(int32) * b.n_label_values);
		for (int32 v = 0; v < b.n_label_values; v++)
			for (int32 k = 0; k < corpus->n_classes; k++)
				if (corpus->classes[k] == b.label_values[v])
					class_of_value[v] = k;
	}

	corpus->n_labeled = 0;
	for (int32 j = 0; j < b.n_docs; j++)
		if (b.label[j] >= 0)
		{
			b.label[j] = class_of_value[b.label[j]];
			corpus->n_labeled++;
		}

	corpus->n_docs = b.n_docs;
	corpus->n_words = b.n_words;
	corpus->doc_start = b.doc_start;
	corpus->word = b.word;
	corpus->count = b.count;
	corpus->label = b.label;
	corpus->ids = b.ids;
	corpus->tokens = b.tokens;
	corpus->n_skipped = b.n_skipped;
	corpus->n_tokens = b.n_tokens;
	pfree(b.seen_in_doc);
	pfree(b.pos_in_doc);
	vocab_destroy(b.vocab);
	vocab_destroy(b.labels);
}
