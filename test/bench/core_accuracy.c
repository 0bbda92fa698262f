/*
 * core_accuracy.c
 *	  Hidden-label accuracy of the sampler core on a TSV of
 *	  id<TAB>label<TAB>folder<TAB>body (SpamAssassin's, or fetch-fortunes.sh's),
 *	  without a server: tokenizes as the benchmarks do (lower case, runs of
 *	  [a-z0-9']), keeps the labels of the ids with id % keep_mod == 1, hides
 *	  the others, trains, runs the label check, and prints the share of hidden
 *	  labels the argmax of the label probabilities gets right, next to Naive
 *	  Bayes on the kept labels alone (its own vocabulary), the warnings,
 *	  locked documents and changes per chain.
 *
 *	  core_accuracy FILE.tsv sampler lambda keep_mod sweeps burn_in seed
 *		[gamma_theta gamma_pi]
 *
 *	  lambda: a number; "ratio" (labelled / unlabelled documents); or "auto",
 *	  the server's default (the labels-only model unless the check finds the
 *	  model clearly better).  INIT=random: the uniform start; CHAINS=n.
 *
 * Not part of the suite.  Build and run:
 *   cc -O2 -Isrc/core -o core_accuracy test/bench/core_accuracy.c \
 *	   src/core/gnb_*.c -lm
 *   zcat test/data/spamassassin-sample.tsv.gz > sample.tsv
 *   ./core_accuracy sample.tsv collapsed auto 2 200 50 1
 */
#include "gnb_label_check.h"

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

/* the classes, numbered as first seen */
static char *class_names[64];
static int	n_class_names;

static int
class_id(const char *name)
{
	for (int k = 0; k < n_class_names; k++)
		if (strcmp(class_names[k], name) == 0)
			return k;
	if (n_class_names == 64)
	{
		fprintf(stderr, "more than 64 classes\n");
		exit(2);
	}
	class_names[n_class_names] = strdup(name);
	return n_class_names++;
}

/*
 * The baseline: multinomial Naive Bayes trained on the labelled documents
 * alone, as gibbs_nb_train makes it of them (posterior-mean theta and pi,
 * the same gammas, their words for its vocabulary; unknown words ignored),
 * its accuracy on the hidden ones.
 */
static double
labels_only_accuracy(const gnb_corpus *c, const int32_t *truth, double g, double gp)
{
	const int	K = c->n_classes;
	double	   *n = calloc((size_t) c->n_words * K + 1, sizeof(double));
	char	   *known = calloc((size_t) c->n_words + 1, 1);
	double		nk[64] = {0},
				ck[64] = {0};
	long		right = 0,
				hidden = 0;
	int32_t		vocabulary = 0;

	for (int32_t j = 0; j < c->n_docs; j++)
		if (c->label[j] >= 0)
		{
			ck[c->label[j]] += 1;
			for (int64_t q = c->doc_start[j]; q < c->doc_start[j + 1]; q++)
			{
				n[(int64_t) c->word[q] * K + c->label[j]] += c->count[q];
				nk[c->label[j]] += c->count[q];
				if (!known[c->word[q]])
					vocabulary++;
				known[c->word[q]] = 1;
			}
		}
	for (int32_t j = 0; j < c->n_docs; j++)
		if (c->label[j] < 0)
		{
			double		s[64];
			int			best = 0;

			for (int k = 0; k < K; k++)
				s[k] = log(ck[k] + gp);
			for (int64_t q = c->doc_start[j]; q < c->doc_start[j + 1]; q++)
				if (known[c->word[q]])
					for (int k = 0; k < K; k++)
						s[k] += c->count[q] * (log(n[(int64_t) c->word[q] * K + k] + g) -
											   log(nk[k] + vocabulary * g));
			for (int k = 1; k < K; k++)
				if (s[k] > s[best])
					best = k;
			hidden++;
			right += best == truth[j];
		}
	free(n);
	free(known);
	return hidden ? (double) right / hidden : NAN;
}

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
		truth[D] = class_id(lab);
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
	c.n_classes = n_class_names;
	c.doc_start = doc_start;
	c.word = word;
	c.count = count;
	c.label = label;
	p.sampler = strcmp(argv[2], "paper") == 0 ? GNB_SAMPLER_PAPER : GNB_SAMPLER_COLLAPSED;
	p.unlabeled_weight = strcmp(argv[3], "auto") == 0 ? 1.0 : atof(argv[3]);
	if (strcmp(argv[3], "ratio") == 0)
	{
		/* the unlabelled documents weigh as much, in all, as the labelled */
		int32_t		nl = 0;

		for (int32_t j = 0; j < D; j++)
			nl += label[j] >= 0;
		p.unlabeled_weight = nl < D - nl ? (double) nl / (D - nl) : 1.0;
	}
	p.sweeps = atoi(argv[5]);
	p.burn_in = atoi(argv[6]);
	p.seed = strtoull(argv[7], NULL, 10);
	p.lag = 1;
	p.chains = 1;
	p.gamma_theta = argc > 8 ? atof(argv[8]) : 1.0;
	p.gamma_pi = argc > 9 ? atof(argv[9]) : 1.0;
	p.no_trace = 1;
	if (getenv("INIT") && strcmp(getenv("INIT"), "random") == 0)
		p.init = GNB_INIT_RANDOM;
	if (getenv("CHAINS"))
		p.chains = atoi(getenv("CHAINS"));
	if (gnb_check(&c, &p))
	{
		fprintf(stderr, "%s\n", gnb_check(&c, &p));
		return 2;
	}
	gnb_train(&c, &p, NULL, &r);
	{
		gnb_label_check lc;

		gnb_check_labels(&c, &p, &r, NULL, NULL, &lc);
		/* the default unlabeled_weight: the labels alone unless clearly better */
		printf("check n %d model %.4f labels %.4f margin %.4f worse %d drift %d->%d ",
			   lc.n, lc.model_agreement, lc.labels_agreement, lc.margin, lc.worse,
			   lc.drift_from, lc.drift_to);
		if (strcmp(argv[3], "auto") == 0 && lc.n > 0 && !gnb_check_labels_better(&lc))
		{
			gnb_labels_only_model(&c, &p, &r, NULL);
			printf("fallback ");
		}
	}
	for (int32_t j = 0; j < D; j++)
		if (label[j] < 0)
		{
			int			guess = 0;

			for (int k = 1; k < c.n_classes; k++)
				if (r.label_prob[(int64_t) j * c.n_classes + k] >
					r.label_prob[(int64_t) j * c.n_classes + guess])
					guess = k;
			hidden++;
			right += guess == truth[j];
		}
	printf("docs %d words %d classes %d hidden %ld accuracy %.4f labels-only %.4f warnings %d "
		   "agreement %.4f locked",
		   D, v.n, c.n_classes, hidden, (double) right / hidden,
		   labels_only_accuracy(&c, truth, p.gamma_theta, p.gamma_pi),
		   r.warnings, r.chain_agreement);
	for (int32_t ch = 0; ch < p.chains; ch++)
		printf(" %d", r.locked[ch]);
	printf(" changed");
	for (int32_t ch = 0; ch < p.chains; ch++)
		printf(" %d", r.changed_after_burn_in[ch]);
	printf("\n");
	gnb_result_free(&r, NULL);
	return 0;
}
