// cmd_import.c: `mtac import --from SRC --out RUN`: a pretrained Llama-family model (a Hugging
// Face directory or a GGUF file) as an mtac run (model/import.h, docs/models.md).
#include "cli.h"
#include "model/import.h"

#include <signal.h>
#include <stdio.h>

// The first SIGINT/SIGTERM stops the import before its next tensor, so it can remove its
// temporary directory; the handler is then the default again, so a second one ends it at once.
static const int STOP_SIGNALS[] = {SIGINT, SIGTERM, 0};

static const char USAGE[] = "usage: mtac import --from SRC --out RUN\n";
static const char ABOUT[] =
    "Imports a pretrained Llama-family model as the run directory RUN: SRC is a Hugging Face model\n"
    "directory (config.json with LlamaForCausalLM or MistralForCausalLM; model.safetensors or its\n"
    "shards; tokenizer.json, tokenizer_config.json, generation_config.json) or a GGUF file (llama).\n"
    "Weights are converted to float32 (F32, F16, BF16; GGUF's Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K,\n"
    "Q5_K, Q6_K) one tensor at a time. RUN must not exist (or be empty); it appears only once the\n"
    "import is complete. Every command that takes --run then works on it. Exit status 2 when SRC is\n"
    "not a model mtac can import (the message names the file and the field or tensor).\n";

static void progress(void *arg, int done, int total, const char *what) {
    (void)arg;
    if (done < 0) fprintf(stderr, "mtac import: note: %s\n", what);
    else if (done == total) fprintf(stderr, "mtac import: %d tensors read\n", total);
    else if (done % 16 == 0 || done + 1 == total) fprintf(stderr, "mtac import: tensor %d/%d %s\n", done + 1, total, what);
}

int cmd_import(int argc, char **argv) {
    const char *from = NULL, *out = NULL;
    const cli_opt opts[] = {
        {"from", CLI_STR, &from, .required = 1, .arg = "SRC", .help = "a Hugging Face model directory or a GGUF file"},
        {"out", CLI_STR, &out, .required = 1, .arg = "RUN", .help = "the run directory to create"},
    };
    const cli_spec spec = {"mtac import", USAGE, ABOUT, NULL, opts, sizeof opts / sizeof opts[0], NULL};
    int first, st = cli_parse(&spec, argc, argv, &first);
    if (st >= 0) return st;
    char err[2048];
    import_hooks h = {progress, NULL, &cli_stop_signal};
    cli_catch_stop(STOP_SIGNALS, NULL);
    int rc = import_model(from, out, &h, err, sizeof err);
    cli_release_stop(STOP_SIGNALS);
    if (rc == IMPORT_INTERRUPTED) {
        fprintf(stderr, "mtac import: %s\n", err);
        return 128 + (int)cli_stop_signal;
    }
    if (rc) {
        fprintf(stderr, "mtac import: %s\n", err);
        return rc == IMPORT_BAD_INPUT ? 2 : 1;
    }
    printf("imported %s as %s\n", from, out);
    return 0;
}
