// import_tool: what the import tests need from the C side that no command prints.
//   import_tool dequant FILE.gguf OUT.bin   every tensor of the GGUF as float32, in file order
//   import_tool logits RUN OUT.bin ID...    the logits (T, V) of the ids under RUN's model, float32
//   import_tool greedy RUN N ID...          N greedy tokens after the ids (the KV-cache decoder), on one line
//   import_tool tokenize RUN TEXT           the ids of TEXT (no BOS) under RUN's tokenizer, on one line
#include "io/gguf.h"
#include "model/model.h"
#include "tok/tokenizer.h"
#include "train/train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int dequant(const char *path, const char *out) {
    gguf_file g;
    char err[1024];
    if (gguf_open(&g, path, err, sizeof err)) return fprintf(stderr, "%s\n", err), 1;
    FILE *f = fopen(out, "wb");
    int rc = !f;
    for (int i = 0; i < g.n_tensors && !rc; i++) {
        float *x = malloc(g.tensors[i].numel * sizeof(float));
        rc = !x || gguf_read_tensor(&g, i, x, err, sizeof err) ||
             fwrite(x, sizeof(float), g.tensors[i].numel, f) != g.tensors[i].numel;
        free(x);
    }
    if (f && fclose(f)) rc = 1;
    if (rc) fprintf(stderr, "dequant: %s\n", err);
    gguf_close(&g);
    return rc;
}

static int logits(const char *run, const char *out, int T, char **ids) {
    train_config c;
    char err[1024];
    model *m = train_open_run(run, &c, err, sizeof err);
    if (!m) return fprintf(stderr, "%s\n", err), 1;
    int *tok = malloc((size_t)T * sizeof *tok);
    for (int t = 0; t < T; t++) tok[t] = atoi(ids[t]);
    int rc = model_forward(m, tok, NULL, 1, T, NULL, err, sizeof err);
    size_t nv = (size_t)T * (size_t)model_cfg(m)->vocab_size;
    FILE *f = rc ? NULL : fopen(out, "wb");
    if (!rc) rc = !f || fwrite(model_logits(m), sizeof(float), nv, f) != nv;
    if (f && fclose(f)) rc = 1;
    if (rc) fprintf(stderr, "logits: %s\n", err);
    free(tok);
    model_free(m);
    return rc;
}

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static int greedy(const char *run, int steps, int T, char **ids) {
    train_config c;
    char err[1024];
    model *m = train_open_run(run, &c, err, sizeof err);
    if (!m) return fprintf(stderr, "%s\n", err), 1;
    int *tok = malloc((size_t)T * sizeof *tok), V = model_cfg(m)->vocab_size;
    for (int t = 0; t < T; t++) tok[t] = atoi(ids[t]);
    model_decoder *dec = model_decoder_create(m, 1, T + steps, err, sizeof err);
    int rc = !dec || model_decoder_prefill(dec, tok, T, &T, err, sizeof err);
    for (int i = 0; i < steps && !rc; i++) {
        int next = argmax(model_decoder_logits(dec), V);
        printf("%s%d", i ? " " : "", next);
        rc = i + 1 < steps && model_decoder_step(dec, &next, err, sizeof err);
    }
    printf("\n");
    if (rc) fprintf(stderr, "greedy: %s\n", err);
    if (dec) model_decoder_free(dec);
    free(tok);
    model_free(m);
    return rc;
}

static int tokenize(const char *run, const char *text) {
    char err[1024];
    tokenizer *t = tokenizer_load_run(run, err, sizeof err);
    if (!t) return fprintf(stderr, "%s\n", err), 1;
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = tokenizer_encode(t, text, strlen(text), 0, &ids, &n, err, sizeof err);
    for (size_t i = 0; !rc && i < n; i++) printf("%s%d", i ? " " : "", (int)ids[i]);
    printf("\n");
    if (rc) fprintf(stderr, "tokenize: %s\n", err);
    free(ids);
    tokenizer_free(t);
    return rc != 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "dequant")) return dequant(argv[2], argv[3]);
    if (argc >= 5 && !strcmp(argv[1], "logits")) return logits(argv[2], argv[3], argc - 4, argv + 4);
    if (argc >= 5 && !strcmp(argv[1], "greedy")) return greedy(argv[2], atoi(argv[3]), argc - 4, argv + 4);
    if (argc == 4 && !strcmp(argv[1], "tokenize")) return tokenize(argv[2], argv[3]);
    fprintf(stderr, "usage: import_tool dequant FILE.gguf OUT.bin | logits RUN OUT.bin ID... | greedy RUN N ID... | tokenize RUN TEXT\n");
    return 2;
}
