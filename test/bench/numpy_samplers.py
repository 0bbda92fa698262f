"""The two samplers of docs/model.md in numpy, as a numpy user would write them.

    /usr/bin/python3 numpy_samplers.py FILE SAMPLER SWEEPS

FILE is the corpus bench_core reads (run-bench.sh writes it from the
database): same tokens, same K, same hidden labels.  Parameters are
gibbs_nb_train's defaults: one chain, burn_in = sweeps / 2, lag 1,
gamma_pi = gamma_theta = 1, unlabeled_weight 1.  Like the C core, each sweep
also yields the log joint (for the trace) and kept sweeps add to the
estimates of theta, pi and the labels.

Vectorised where the algorithm allows it:
  paper      the scores of all unlabelled documents are one sparse product
             (documents x active words) @ log theta; the theta step is one
             vectorised Gamma draw per class over the active words; only the
             prior term log(C_k^-j + gamma_pi), which changes as documents
             move, is a loop over documents (on K numbers); the counts are
             rebuilt once per sweep by a sparse product.
  collapsed  sequential by nature (each document's label changes the counts
             the next document is scored with): a loop over documents, each
             vectorised over its words x K classes.
Prints one line of key=value pairs, like bench_core.
"""
import sys
import time

import numpy as np
import scipy.sparse as sp
from scipy.special import gammaln


def load(path):
    data = np.fromfile(path, sep=" ", dtype=np.int64)
    D, V, K = (int(x) for x in data[:3])
    pos = 3
    label = np.empty(D, dtype=np.int64)
    truth = np.empty(D, dtype=np.int64)
    indptr = np.zeros(D + 1, dtype=np.int64)
    words, counts = [], []
    for j in range(D):
        label[j], truth[j], n = data[pos], data[pos + 1], data[pos + 2]
        pairs = data[pos + 3: pos + 3 + 2 * n]
        words.append(pairs[0::2])
        counts.append(pairs[1::2])
        indptr[j + 1] = indptr[j] + n
        pos += 3 + 2 * n
    X = sp.csr_matrix((np.concatenate(counts).astype(np.float64),
                       np.concatenate(words), indptr), shape=(D, V))
    return X, label, truth, K


class Setup:
    """What both samplers derive once from the corpus."""

    def __init__(self, X, label, K, gp=1.0, g=1.0):
        self.K, self.V, self.gp, self.g = K, X.shape[1], gp, g
        lab = label >= 0
        self.unl = np.flatnonzero(~lab)
        Xl = X[lab]
        self.Xu = X[self.unl].tocsr()
        onehot = sp.csr_matrix((np.ones(lab.sum()), (np.arange(lab.sum()), label[lab])),
                               shape=(lab.sum(), K))
        self.N_lab = np.asarray((Xl.T @ onehot).todense())          # V x K
        self.C_lab = np.bincount(label[lab], minlength=K).astype(np.float64)
        self.active = np.flatnonzero(np.asarray(self.Xu.sum(axis=0)).ravel() > 0)
        inactive = np.ones(self.V, dtype=bool)
        inactive[self.active] = False
        self.inactive_shape = self.N_lab[inactive].sum(axis=0) + g * inactive.sum()
        # log joint: the inactive words' terms never change
        self.S_inactive = (gammaln(self.N_lab[inactive] + g) - gammaln(g)).sum(axis=0)
        self.Xa = self.Xu[:, self.active].tocsr()                   # docs x active words
        self.XaT = self.Xa.T.tocsr()
        self.R = np.asarray(self.Xu.sum(axis=1)).ravel()
        self.Du = len(self.unl)

    def counts(self, z):
        """Word counts of the active words (active x K), class totals, documents."""
        onehot = sp.csr_matrix((np.ones(self.Du), (np.arange(self.Du), z)), shape=(self.Du, self.K))
        Na = self.N_lab[self.active] + np.asarray((self.XaT @ onehot).todense())
        return Na

    def log_joint(self, Na, Nk, C):
        g, gp, K, V = self.g, self.gp, self.K, self.V
        S = self.S_inactive + (gammaln(Na + g) - gammaln(g)).sum(axis=0)
        lj = (gammaln(C + gp) - gammaln(gp)).sum() + (gammaln(V * g) - gammaln(Nk + V * g) + S).sum()
        return lj + gammaln(K * gp) - gammaln(C.sum() + K * gp)


def paper(s, sweeps, rng):
    K, g, gp, V = s.K, s.g, s.gp, s.V
    burn = sweeps // 2

    def theta_step(Na):
        draws = rng.standard_gamma(Na + g)                          # active x K
        rest = rng.standard_gamma(s.inactive_shape)                 # K
        return np.log(draws) - np.log(draws.sum(axis=0) + rest)

    Nk_lab = s.N_lab.sum(axis=0)
    log_theta = theta_step(s.N_lab[s.active])
    z = rng.integers(K, size=s.Du)
    C = s.C_lab + np.bincount(z, minlength=K)
    Na = s.counts(z)
    prob_sum = np.zeros((s.Du, K))
    theta_sum = np.zeros((V, K))
    N_full = s.N_lab.copy()
    for t in range(1, sweeps + 1):
        scores = np.asarray(s.Xa @ log_theta) + rng.gumbel(size=(s.Du, K))
        for i in range(s.Du):
            a = z[i]
            C[a] -= 1
            b = int(np.argmax(scores[i] + np.log(C + gp)))
            C[b] += 1
            z[i] = b
        Na = s.counts(z)
        log_theta = theta_step(Na)
        Nk = Nk_lab + (Na - s.N_lab[s.active]).sum(axis=0)
        s.last_lj = s.log_joint(Na, Nk, C)
        if t > burn:
            prob_sum[np.arange(s.Du), z] += 1
            N_full[s.active] = Na
            theta_sum += (N_full + g) / (Nk + V * g)
    return prob_sum


def collapsed(s, sweeps, rng):
    K, g, gp, V = s.K, s.g, s.gp, s.V
    burn = sweeps // 2
    Xu = s.Xu
    z = rng.integers(K, size=s.Du)
    C = s.C_lab + np.bincount(z, minlength=K)
    N = s.N_lab.copy()
    onehot = sp.csr_matrix((np.ones(s.Du), (np.arange(s.Du), z)), shape=(s.Du, K))
    N += np.asarray((Xu.T @ onehot).todense())
    Nk = N.sum(axis=0)
    prob_sum = np.zeros((s.Du, K))
    theta_sum = np.zeros((V, K))
    indptr, indices, data = Xu.indptr, Xu.indices, Xu.data
    for t in range(1, sweeps + 1):
        gum = rng.gumbel(size=(s.Du, K))
        for i in range(s.Du):
            a = z[i]
            w = indices[indptr[i]:indptr[i + 1]]
            c = data[indptr[i]:indptr[i + 1]]
            R = s.R[i]
            N[w, a] -= c
            Nk[a] -= R
            C[a] -= 1
            rows = N[w] + g                                          # n x K
            sc = (np.log(C + gp)
                  + (gammaln(rows + c[:, None]) - gammaln(rows)).sum(axis=0)
                  - (gammaln(Nk + R + V * g) - gammaln(Nk + V * g)))
            b = int(np.argmax(sc + gum[i]))
            N[w, b] += c
            Nk[b] += R
            C[b] += 1
            z[i] = b
        s.last_lj = s.log_joint(N[s.active], Nk, C)
        if t > burn:
            prob_sum[np.arange(s.Du), z] += 1
            theta_sum += (N + g) / (Nk + V * g)
    return prob_sum


def main():
    path, sampler, sweeps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    X, label, truth, K = load(path)
    s = Setup(X, label, K)
    rng = np.random.default_rng(42)
    fn = {"paper": paper, "collapsed": collapsed}[sampler]
    t0 = time.perf_counter()
    prob_sum = fn(s, sweeps, rng)
    t1 = time.perf_counter()
    accuracy = float((prob_sum.argmax(axis=1) == truth[s.unl]).mean())
    print(f"sampler={sampler} sweeps={sweeps} ms_per_sweep={(t1 - t0) / sweeps * 1e3:.3f} "
          f"accuracy={accuracy:.4f} numpy={np.__version__}")


if __name__ == "__main__":
    main()
