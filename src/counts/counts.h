/*
 * counts/counts.h
 *	  The count aggregate (gibbs_nb_class_counts): what the rest of the
 *	  extension reads of its value, parsed and validated.
 */
#ifndef GNB_COUNTS_COUNTS_H
#define GNB_COUNTS_COUNTS_H

#include "gibbs_nb.h"

/* class_counts.c: a gibbs_nb_class_counts value, parsed and validated */
typedef struct GnbParsedCounts
{
	int32		n_classes;
	int32		n_words;
	int64		n_cells;
	const char **class_str;
	int32	   *class_len;
	const char **word_str;
	int32	   *word_len;
	bool		sorted;			/* the sorted format (2), not the plain one (1) */
	const char *words;			/* the first word */
	const char *cells;			/* plain: n_cells x (int32 class, int32 word, int64
								 * count); sorted: the first word's record */
	Size		size;			/* of the value's data, its header excluded */
} GnbParsedCounts;

/* A reader of a parsed value's cells, in order (gnb_counts_next). */
typedef struct GnbCountsIter
{
	const GnbParsedCounts *pc;
	int64		i;				/* cells read */
	const char *p;				/* sorted: the next cell or word record */
	int32		word;			/* sorted: the current word */
	uint64		left;			/* sorted: its cells not read yet */
} GnbCountsIter;

extern void gnb_counts_parse(bytea *value, GnbParsedCounts *pc, bool check_distinct);
extern void gnb_counts_iter_init(GnbCountsIter *it, const GnbParsedCounts *pc);
extern bool gnb_counts_next(GnbCountsIter *it, int32 *cls, int32 *word, int64 *count);

#endif							/* GNB_COUNTS_COUNTS_H */
