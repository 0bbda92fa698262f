/*
 * core_accuracy.c
 *	  Hidden-label accuracy of the sampler core on a SpamAssassin TSV, without
 *	  a server: reads id<TAB>label<TAB>folder<TAB>body, tokenizes as the
 *	  benchmark does (lower case, runs of [a-z0-9']), keeps the labels of the
 *	  ids with id % keep_mod == 1, hides the others, trains and prints the share
 *	  of hidden labels that the argmax of the estimated label probabilities
 *	  gets right.
 *
 *	  core_accuracy FILE.tsv sampler lambda keep_mod sweeps burn_in seed
 *		[gamma_theta gamma_pi]
 *
 * Not part of the suite.  Build and run (the issue 11 figures):
 *   cc -O2 -Isrc/core -o core_accuracy test/bench/core_accuracy.c \
 *	   src/core/gnb_rng.c src/core/gnb_sampler.c -lm
 *   zcat test/data/spamassassin-sample.tsv.gz > sample.tsv
 *   ./core_accuracy sample.tsv collapsed 0.5 2 200 50 1
 */
#include "gnb_sampler.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* a tiny open-addressing vocabulary */
typedef struct vocab
{
	char	  **key;
	int32_t    *id;
	size_t		cap;
	int32_t		n;
} vocab;

static uint64_t
hash_str(const char *s, size_t len)
{
	uint64_t	h = 1469598103934665603ULL;

	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char) s[i]) * 1099511628211ULL;
	return h;
}

static int32_t
vocab_id(vocab *v, const char *s, size_t len)
{
	size_t		i;

	if ((size_t) v->n * 2 >= v->cap)
	{
		vocab		old = *v;

		v->cap = old.cap ? old.cap * 2 : 1 << 16;
		v->key = calloc(v->cap, sizeof(char *));
		v->id = calloc(v->cap, sizeof(int32_t));
		v->n = 0;
		for (size_t o = 0; o < old.cap; o++)
			if (old.key[o])
			{
				size_t		j = hash_str(old.key[o], strlen(old.key[o])) & (v->cap - 1);

				while (v->key[j])
					j = (j + 1) & (v->cap - 1);
				v->key[j] = old.key[o];
				v->id[j] = old.id[o];
				v->n++;
			}
		free(old.key);
		free(old.id);
	}
	i = hash_str(s, len) & (v->cap - 1);
	while (v->key[i])
	{
		if (strlen(v->key[i]) == len && memcmp(v->key[i], s, len) == 0)
			return v->id[i];
		i = (i + 1) & (v->cap - 1);
	}
	v->key[i] = strndup(s, len);
	v->id[i] = v->n++;
	return v->id[i];
}

static int
is_tok(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '\'';
}

int
main(int argc, char **argv)
{
	FILE	   *f;
	char	   *line = NULL;
	size_t		linecap = 0;
	vocab		v = {0};
	size_t		cap_docs = 8192,
				cap_pos = 1 << 20;
	int64_t    *doc_start = malloc(cap_docs * sizeof(int64_t));
	int32_t    *label = malloc(cap_docs * sizeof(int32_t));
	int32_t    *truth = malloc(cap_docs * sizeof(int32_t));
	int32_t    *word = malloc(cap_pos * sizeof(int32_t));
	int32_t    *count = malloc(cap_pos * sizeof(int32_t));
	int32_t    *seen = NULL;
	size_t		seen_cap = 0;
	int32_t		D = 0;
	int64_t		pos = 0;
	gnb_corpus	c = {0};
	gnb_params	p = {0};
	gnb_result	r;
	int			keep_mod;
	long		right = 0,
				hidden = 0;

	if (argc < 8)
	{
		fprintf(stderr, "usage: %s FILE.tsv paper|collapsed lambda keep_mod sweeps burn_in seed [gamma_theta gamma_pi]\n", argv[0]);
		return 2;
	}
	f = fopen(argv[1], "r");
	if (!f)
	{
		perror(argv[1]);
		return 2;
	}
	keep_mod = atoi(argv[4]);
	while (getline(&line, &linecap, f) > 0)
	{
		char	   *id = strtok(line, "\t");
		char	   *lab = strtok(NULL, "\t");
		char	   *folder = strtok(NULL, "\t");
		char	   *body = strtok(NULL, "\n");
		int64_t		start = pos;

		(void) folder;
		if (!id || !lab || !body)
			continue;
		if ((size_t) D + 2 >= cap_docs)
		{
			cap_docs *= 2;
			doc_start = realloc(doc_start, cap_docs * sizeof(int64_t));
			label = realloc(label, cap_docs * sizeof(int32_t));
			truth = realloc(truth, cap_docs * sizeof(int32_t));
		}
		doc_start[D] = pos;
		truth[D] = strcmp(lab, "spam") == 0;
		label[D] = (atol(id) % keep_mod == 1) ? truth[D] : -1;
		for (char *s = body; *s;)
		{
			char	   *e;
			int32_t		w;

			*s = (char) tolower((unsigned char) *s);
			if (!is_tok((unsigned char) *s))
			{
				s++;
				continue;
			}
			for (e = s; *e && (is_tok((unsigned char) (*e = (char) tolower((unsigned char) *e)))); e++)
				;
			w = vocab_id(&v, s, (size_t) (e - s));
			if ((size_t) v.n > seen_cap)
			{
				size_t		old = seen_cap;

				seen_cap = (size_t) v.n * 2;
				seen = realloc(seen, seen_cap * sizeof(int32_t));
				for (size_t i = old; i < seen_cap; i++)
					seen[i] = -1;
			}
			if (seen[w] >= start && seen[w] < pos && word[seen[w]] == w)
				count[seen[w]]++;
			else
			{
				if ((size_t) pos + 1 >= cap_pos)
				{
					cap_pos *= 2;
					word = realloc(word, cap_pos * sizeof(int32_t));
					count = realloc(count, cap_pos * sizeof(int32_t));
				}
				word[pos] = w;
				count[pos] = 1;
				seen[w] = (int32_t) pos;
				pos++;
			}
			s = e;
		}
		D++;
	}
	doc_start[D] = pos;
	c.n_docs = D;
	c.n_words = v.n;
	c.n_classes = 2;
	c.doc_start = doc_start;
	c.word = word;
	c.count = count;
	c.label = label;
	p.sampler = strcmp(argv[2], "paper") == 0 ? GNB_SAMPLER_PAPER : GNB_SAMPLER_COLLAPSED;
	p.unlabeled_weight = atof(argv[3]);
	p.sweeps = atoi(argv[5]);
	p.burn_in = atoi(argv[6]);
	p.seed = strtoull(argv[7], NULL, 10);
	p.lag = 1;
	p.chains = 1;
	p.gamma_theta = argc > 8 ? atof(argv[8]) : 1.0;
	p.gamma_pi = argc > 9 ? atof(argv[9]) : 1.0;
	p.no_trace = 1;
	if (gnb_check(&c, &p))
	{
		fprintf(stderr, "%s\n", gnb_check(&c, &p));
		return 2;
	}
	gnb_train(&c, &p, NULL, &r);
	for (int32_t j = 0; j < D; j++)
		if (label[j] < 0)
		{
			int			guess = r.label_prob[2 * j + 1] > r.label_prob[2 * j];

			hidden++;
			right += guess == truth[j];
		}
	printf("docs %d words %d hidden %ld accuracy %.4f\n", D, v.n, hidden, (double) right / hidden);
	gnb_result_free(&r, NULL);
	return 0;
}
