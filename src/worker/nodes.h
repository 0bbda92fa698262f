/*
 * worker/nodes.h
 *	  A blocked chain whose documents are held by nodes (core/gnb_nodes.h)
 *	  reached through SQL: each node is a call of gibbs_nb.blocked_node in
 *	  some backend, which reads its part of the source once, keeps it, and
 *	  answers the chain's calls (node.c); the job's worker calls them all
 *	  once a call (nodes.c); what a node needs first travels as a setup
 *	  (node_setup.c).
 */
#ifndef GNB_WORKER_NODES_H
#define GNB_WORKER_NODES_H

#include "gibbs_nb.h"

#include "gnb_nodes.h"

/* What a node needs to know of its job before its first call. */
typedef struct GnbNodeSetup
{
	int64		job_id;
	gnb_params	sampler;		/* its gamma grid NULL */
	int32		n_classes;
	int32		n_words;
	/* the source's columns (the relation a node reads is its call's) */
	char		id_column[NAMEDATALEN];
	char		tokens_column[NAMEDATALEN];
	char		label_column[NAMEDATALEN];
	int64		max_job_memory;
	char	  **tokens;			/* n_words: the vocabulary, in byte order */
	double	   *extra_word_counts;	/* V x K: the clamped counts, or NULL */
	double	   *extra_doc_counts;	/* K, or NULL */
	int64	   *all_unlabeled_count;	/* V: each word's count in all unlabelled documents */
	int64		all_n_unlabeled;
	/*
	 * A warm start (warm 1): the first labels the job's worker found for
	 * its documents in the version, by document key, keys increasing; the
	 * other documents start cold
	 */
	int32		warm;
	int64		n_warm;
	uint64	   *warm_keys;
	int32	   *warm_labels;
} GnbNodeSetup;

/* The place of key among n increasing keys, or -1 if it is not one of them. */
static inline int64
gnb_key_position(const uint64 *keys, int64 n, uint64 key)
{
	int64		lo = 0,
				hi = n;

	while (lo < hi)
	{
		int64		mid = lo + (hi - lo) / 2;

		if (keys[mid] < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && keys[lo] == key ? lo : -1;
}

/* node_setup.c */
extern bytea *gnb_node_setup_encode(const GnbNodeSetup *setup);
extern void gnb_node_setup_decode(bytea *value, GnbNodeSetup *setup);
extern void gnb_sized_bytea_begin(StringInfo buf, Size size);
extern void gnb_bytea_reader(StringInfo msg, const bytea *value);
extern void gnb_node_model_check(bytea *value, int32 K, int32 V);
extern void gnb_node_model_read(bytea *value, int32 K, int32 V, double *pi, double *theta);
#define GNB_EXACT_SUM_BYTES 20
extern bytea *gnb_exact_sums_encode(const gnb_exact_sum *sums, int32 n);
extern bool gnb_exact_sums_merge(bytea *value, gnb_exact_sum *sums, int32 n);
extern void gnb_documents_by_key(const uint64 *doc_key, int32 D, uint64 **sorted_keys,
								 int32 **doc_of_key);

/* nodes.c: the job's worker, training through nodes */
typedef struct NodesRun GnbNodesRun;
extern bool gnb_nodes_wanted(const GnbJobParams *params);
extern GnbNodesRun *gnb_train_nodes(const GnbJobParams *params, const GnbCorpus *corpus,
									const gnb_corpus *core, const gnb_hooks *hooks,
									gnb_result *result);
extern void gnb_nodes_labels_only(GnbNodesRun *run, gnb_result *result);
struct GnbIdSum;
extern int64 gnb_nodes_store_labels(GnbNodesRun *run, int64 version_id, struct GnbIdSum *ids);
extern void gnb_nodes_check_ids(const GnbNodesRun *run, uint64 sum);
extern void gnb_nodes_check_labels_given(const GnbNodesRun *run, uint64 given, int64 expected,
										 const char *what);
extern char *gnb_nodes_holdout_sql(GnbNodesRun *run);
extern bool gnb_nodes_can_write_labels(GnbNodesRun *run, Oid labels_relid);
extern void gnb_nodes_write_labels(GnbNodesRun *run, Oid relid, const char *qualified,
								   char **classes, int32 version);
extern void gnb_nodes_release(GnbNodesRun *run);

#endif							/* GNB_WORKER_NODES_H */
