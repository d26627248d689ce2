// import_tool: what the import tests need from the C side that no command prints.
//   import_tool dequant FILE.gguf OUT.bin   every tensor of the GGUF as float32, in file order
//   import_tool logits RUN OUT.bin ID...    the logits (T, V) of the ids under RUN's model, float32
#include "io/gguf.h"
#include "model/model.h"
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

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "dequant")) return dequant(argv[2], argv[3]);
    if (argc >= 5 && !strcmp(argv[1], "logits")) return logits(argv[2], argv[3], argc - 4, argv + 4);
    fprintf(stderr, "usage: import_tool dequant FILE.gguf OUT.bin | logits RUN OUT.bin ID...\n");
    return 2;
}
