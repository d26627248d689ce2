// perplexity.c: see perplexity.h.
#include "eval/perplexity.h"
#include "util/errmsg.h"

#include <math.h>
#include <stdlib.h>

// -log softmax(z)[t] over V logits, in double.
static double nll(const float *z, int V, int t) {
    float mx = z[0];
    for (int j = 1; j < V; j++) mx = z[j] > mx ? z[j] : mx;
    double sum = 0;
    for (int j = 0; j < V; j++) sum += exp((double)z[j] - mx);
    return log(sum) + mx - z[t];
}

int perplexity_eval(model *m, const int32_t *ids, size_t n, int T, double *loss, int *windows,
                    void (*fn)(void *arg, int done, int total), void *arg, char *err, size_t en) {
    const int V = model_cfg(m)->vocab_size;
    if (n < 2) return errmsg(err, en, "%zu token%s: nothing to predict (a loss needs at least 2)", n, n == 1 ? "" : "s");
    if (T < 1) return errmsg(err, en, "a window of %d tokens", T);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= V)
            return errmsg(err, en, "token %zu is id %d, outside the model's vocabulary (%d)", i, (int)ids[i], V);
    int *tok = malloc((size_t)T * sizeof *tok);
    if (!tok) return errmsg(err, en, "out of memory");
    const size_t total = (n - 1 + (size_t)T - 1) / (size_t)T;
    double sum = 0;
    int rc = 0, k = 0;
    model_set_training(m, 0, 0);
    for (size_t at = 0; at + 1 < n && !rc; at += (size_t)T, k++) {
        const int len = n - 1 - at < (size_t)T ? (int)(n - 1 - at) : T;  // inputs with a target
        for (int i = 0; i < len; i++) tok[i] = ids[at + (size_t)i];
        if ((rc = model_forward(m, tok, NULL, 1, len, NULL, err, en))) break;
        const float *z = model_logits(m);
        for (int i = 0; i < len; i++) sum += nll(z + (size_t)i * V, V, ids[at + (size_t)i + 1]);
        if (fn) fn(arg, k + 1, total > INT32_MAX ? INT32_MAX : (int)total);
    }
    free(tok);
    if (!rc) *loss = sum / (double)(n - 1);
    if (!rc && windows) *windows = k;
    return rc;
}
