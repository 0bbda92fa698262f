/*
 * gnb_nodes.h
 *	  A chain of the blocked sampler whose unlabelled documents are held
 *	  apart from its counts: by nodes (other processes, other servers), each
 *	  holding some of them, while the chain (the coordinator) holds only the
 *	  counts, theta and pi, V x K numbers whatever the number of documents.
 *
 * Given (theta, pi) every unlabelled label is independent, and the counts
 * are sums over documents: a sweep is "every node draws its documents'
 * labels and tells the chain how its counts changed", then "the chain draws
 * theta and pi from the summed counts".  The draws are keyed by the
 * documents' keys (gnb_corpus.doc_key) and the counts' changes are integers,
 * summed in any order; so the chain is the same, bit for bit, as the blocked
 * chain of gnb_train_chain on the whole corpus, however the documents are
 * cut into nodes and in whatever order the nodes answer, when the clamped
 * counts are integers too (as the server's are: with fractional extra
 * counts at lambda = 1, adding the answers' changes in another order may
 * round otherwise).
 *
 * The coordinator runs gnb_train_chain on a corpus of no documents, with the
 * clamped documents as its extra counts and the whole corpus's summary
 * (all_unlabeled_count, all_n_unlabeled), and hooks->blocked_nodes, which has
 * every node answer each call.  A node is gnb_node_begin on its part of the
 * documents (unlabelled ones only), with the same extra counts and summary:
 * from them it lays out the words as the chain does.  gnb_train_chain on a
 * whole corpus runs its own documents as one node of this kind, in process.
 */
#ifndef GNB_NODES_H
#define GNB_NODES_H

#include "gnb_sampler.h"

/* What a node's documents changed in the counts, answering a call. */
typedef struct gnb_count_changes
{
	/*
	 * The entries of N that the moves touched: entry[e] = i * K + k for
	 * class k of the i-th active word (in the chain's order of the active
	 * words), its count changed by delta[e] (0 for an entry that a document
	 * left and another joined: the chain still brings its theta-hat sum up
	 * to date, as the moves would have); each entry once.
	 */
	int64_t		n_entries;
	const int64_t *entry;
	const int64_t *delta;
	const int64_t *docs;		/* K: the change in each class's documents */
	const int64_t *tokens;		/* K: the change in each class's tokens */
	int64_t		changed;		/* documents whose label changed */
	int64_t		locked;			/* GNB_NODE_END: locked documents (gnb_chain.locked) */
	/*
	 * GNB_NODE_START: the documents the node holds and their tokens, which
	 * over all nodes must be the whole corpus's (the caller checks)
	 */
	int64_t		held_docs;
	int64_t		held_tokens;
} gnb_count_changes;

/* A call's kind. */
#define GNB_NODE_START	1		/* draw the chain's first labels; changes: their counts */
#define GNB_NODE_LABELS	2		/* a sweep: every label drawn given (theta, pi) */
#define GNB_NODE_END	3		/* the chain ended: its locked documents, its estimates */

/* What the chain asks of every node. */
typedef struct gnb_node_call
{
	int32_t		what;			/* GNB_NODE_* */
	int32_t		chain;
	int32_t		sweep;			/* LABELS: 1 .. sweeps */
	int32_t		kept;			/* LABELS: the sweep is kept */
	/*
	 * LABELS: log theta and log pi as gnb_blocked_arrays has them:
	 * gnb_node_theta_length and K + 1 doubles
	 */
	const double *log_theta;
	const double *log_pi;
	/*
	 * END: the chain's last counts (N as gnb_blocked_arrays has it, V x K),
	 * and its gammas
	 */
	const double *N;
	const double *Nk;
	const double *C;
	double		g_theta;
	double		g_pi;
	/*
	 * The chain's, not sent to nodes: the length of log_theta (and of N:
	 * V x K) for encoding the call, and the number of entries an answer
	 * may name (n_active x K) for decoding it
	 */
	int64_t		theta_length;
	int64_t		max_entries;
	/*
	 * The chain's: each node's answer to the call goes to
	 * apply(coordinator, changes), in any order, before hooks->blocked_nodes
	 * returns
	 */
	void		(*apply) (void *coordinator, const gnb_count_changes *changes);
	void	   *coordinator;
} gnb_node_call;

typedef struct gnb_node gnb_node;

/*
 * A node for the unlabelled documents of `part` (every label -1; their keys
 * in doc_key), whose extra counts and all_unlabeled_count are the whole
 * corpus's, as the chain's are.  The part must have passed gnb_check with
 * params.  Its chains run one at a time.
 */
extern gnb_node *gnb_node_begin(const gnb_corpus *part, const gnb_params *params,
								const gnb_hooks *hooks);

/*
 * Answer a call: the changes are the node's until its next call.  After
 * GNB_NODE_END, gnb_node_estimates gives the chain's estimates for the
 * node's documents.
 */
extern const gnb_count_changes *gnb_node_run(gnb_node *node, const gnb_node_call *call);

/*
 * The ended chain's label probabilities of the node's documents (n_docs x
 * K, row-major, by their place in the part) and their last labels
 * (n_docs): the node's until its next call.
 */
extern void gnb_node_estimates(const gnb_node *node, const double **label_prob,
							   const int32_t **last_labels);

/*
 * The chains combined where the documents are (gnb_combine_add's comment):
 * after GNB_NODE_END of chain c, gnb_node_fold folds the chain's estimates
 * into the node's sums over the chains (classes aligned by perm, as
 * gnb_combine_add gave it), chains in the order 0, 1, ..., and adds their
 * distances to *distance; after the last, gnb_node_combine_end makes the
 * sums means and adds their mass (2K exact sums, unlabeled_mass's) to
 * mass, and gnb_node_combined gives the means (n_docs x K, by the
 * documents' places in the part) and the last chain's last labels: the
 * node's until it ends.  They return NULL, or what is out of order.
 */
extern const char *gnb_node_fold(gnb_node *node, int32_t chain, const int32_t *perm,
								 gnb_exact_sum *distance);
extern const char *gnb_node_combine_end(gnb_node *node, int32_t chains, gnb_exact_sum *mass);
extern void gnb_node_combined(const gnb_node *node, const double **label_prob,
							  const int32_t **last_labels);

/* The number of doubles of a call's log_theta (and of N: V x K). */
extern int64_t gnb_node_theta_length(const gnb_node *node);

extern void gnb_node_end(gnb_node *node);

/*
 * Calls and answers as bytes, for nodes in other processes (gnb_node_wire.c):
 * little-endian whatever the machine, so that any node reads them.  A call
 * carries what its kind needs: LABELS log theta (gnb_node_theta_length) and
 * log pi (K + 1), END the counts (V x K) and Nk and C (K).
 * gnb_node_call_encode writes the call into out, which has
 * gnb_node_call_size(call, theta_length, K, V) bytes;
 * gnb_node_call_decode reads one into the node's own arrays (call's
 * pointers point there, apply is NULL).  gnb_count_changes_encode and
 * _decode do the same for a node's answer: the decoder's entry and delta
 * arrays (max_entries long: n_active x K at most) are the caller's.  The
 * decoders return NULL, or what is wrong with the bytes: every length and
 * entry is checked against the chain's shape before anything is read.
 */
extern size_t gnb_node_call_size(const gnb_node_call *call, int64_t theta_length, int32_t K,
								 int32_t V);
extern void gnb_node_call_encode(const gnb_node_call *call, int64_t theta_length, int32_t K,
								 int32_t V, uint8_t *out);
extern const char *gnb_node_call_decode(gnb_node *node, const uint8_t *in, size_t len,
										gnb_node_call *call);
/* a call's kind, chain and sweep, without a node (NULL, or what is wrong) */
extern const char *gnb_node_call_peek(const uint8_t *in, size_t len, int32_t *what,
									  int32_t *chain, int32_t *sweep);
extern size_t gnb_count_changes_size(const gnb_count_changes *changes, int32_t K);
extern void gnb_count_changes_encode(const gnb_count_changes *changes, int32_t K, uint8_t *out);
extern const char *gnb_count_changes_decode(const uint8_t *in, size_t len, int32_t K,
											int64_t max_entries, int64_t *entry, int64_t *delta,
											int64_t *docs, int64_t *tokens,
											gnb_count_changes *changes);

#endif							/* GNB_NODES_H */
