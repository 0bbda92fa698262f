#!/usr/bin/python3
"""gibbs_nb_evaluate against scikit-learn's metrics, on the same documents.

Reads, with psql, from a database where the fixture of test/sql/evaluate.sql
has run
(PGHOST, PGUSER, PGDATABASE as usual): every scored document's true label,
gibbs_nb_predict's class and gibbs_nb_predict_proba's probabilities, and
gibbs_nb_evaluate's row.  Computes the metrics with sklearn.metrics and
compares.  Prints one line per check and 'N passed, N failed'; exits 1 on a
failure.  --write FILE also writes sklearn's values as JSON.

Run by `make check-sklearn` (which installs Debian's python3-sklearn).
"""
import json
import math
import subprocess
import sys

import numpy as np
import sklearn
from sklearn import metrics

MODEL, TABLE = "colours", "labelled"
TOL = 1e-12


def query(sql):
    out = subprocess.run(["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


rows = query(f"""SELECT json_agg(json_build_object(
                   'label', label,
                   'pred', gibbs_nb_predict('{MODEL}', tokens),
                   'p', gibbs_nb_predict_proba('{MODEL}', tokens)) ORDER BY id)
                 FROM {TABLE} WHERE label IS NOT NULL AND tokens IS NOT NULL""")
ours = query(f"SELECT row_to_json(e) FROM gibbs_nb_evaluate('{MODEL}', '{TABLE}', 'tokens', 'label') e")
model_classes = query(f"SELECT array_to_json(gibbs_nb_classes('{MODEL}'))")

y_true = [r["label"] for r in rows]
y_pred = [r["pred"] for r in rows]
unknown = sorted({y for y in y_true if y not in model_classes}, key=lambda s: s.encode())
classes = model_classes + unknown
# probabilities over every reported class (0 for labels the model does not
# know), columns in sklearn's order: the sorted labels
sorted_classes = sorted(classes)
proba = np.zeros((len(rows), len(classes)))
for i, r in enumerate(rows):
    for k, c in enumerate(model_classes):
        proba[i, sorted_classes.index(c)] = r["p"][k]

ref = {
    "sklearn_version": sklearn.__version__,
    "n_documents": len(rows),
    "n_unknown": sum(1 for y in y_true if y in unknown),
    "classes": classes,
    "accuracy": metrics.accuracy_score(y_true, y_pred),
    "macro_f1": metrics.f1_score(y_true, y_pred, average="macro", zero_division=0),
    "log_loss": metrics.log_loss(y_true, proba, labels=sorted_classes),
    "confusion": metrics.confusion_matrix(y_true, y_pred, labels=classes).tolist(),
}
p, r, f, s = metrics.precision_recall_fscore_support(y_true, y_pred, labels=classes,
                                                     zero_division=0)
present = set(y_true) | set(y_pred)
ref["precision"] = [float(x) if c in present else None for x, c in zip(p, classes)]
ref["recall"] = [float(x) if c in present else None for x, c in zip(r, classes)]
ref["f1"] = [float(x) if c in present else None for x, c in zip(f, classes)]
ref["support"] = [int(x) for x in s]

passed = failed = 0


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
    print(f"{'ok' if ok else 'FAILED'}: {name} {detail}")


def close(a, b):
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=TOL, abs_tol=TOL)


for key in ("n_documents", "n_unknown", "classes", "support", "confusion"):
    check(key, ours[key] == ref[key], f"ours={ours[key]} sklearn={ref[key]}")
for key in ("accuracy", "macro_f1", "log_loss"):
    check(key, close(ours[key], ref[key]), f"ours={ours[key]!r} sklearn={ref[key]!r}")
for key in ("precision", "recall", "f1"):
    check(key, len(ours[key]) == len(ref[key]) and all(close(a, b) for a, b in zip(ours[key], ref[key])),
          f"ours={ours[key]} sklearn={ref[key]}")

if len(sys.argv) == 3 and sys.argv[1] == "--write":
    with open(sys.argv[2], "w") as out:
        json.dump(ref, out, indent=1)
        out.write("\n")
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
