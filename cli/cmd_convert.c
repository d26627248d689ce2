// cmd_convert.c: `mtac convert --add-mta`: a trained baseline run as an MTA model whose new kernels
// start as the identity (the authors' retrofit experiment; docs/longctx.md).
#include "cli.h"
#include "io/fsutil.h"
#include "train/train.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char USAGE[] = "usage: mtac convert --add-mta --run BASE --out DIR [--layers LIST] [--norm-gate]\n";
static const char ABOUT[] =
    "Turns the baseline Transformer of run BASE into an MTA model: the paper's pattern (6x11 key-query\n"
    "convolutions before and after the softmax in layers 2, 6, 10, ..., or those of --layers; head\n"
    "mixing and head convolution over all heads in every layer), every new kernel the identity, every\n"
    "other weight the baseline's. Its outputs are then the baseline's. --norm-gate adds group norm and\n"
    "the gate too, which are not the identity (the outputs then change). BASE may be any run, an\n"
    "imported model's too (grouped-query attention, untied output, RoPE scaling, its tokenizer files,\n"
    "copied). Writes DIR/model.safetensors and DIR/config.json (BASE's configuration with the MTA\n"
    "model, init = the new weights); continue training with:\n"
    "mtac train --init DIR --data SHARDS --out NEWRUN --steps N [--train mta]\n";

int cmd_convert(int argc, char **argv) {
    const char *run = NULL, *out = NULL;
    int add_mta = 0, norm_gate = 0, n_layers = 0;
    uint64_t layers[MODEL_MAX_LAYERS];
    const cli_opt opts[] = {
        {"add-mta", CLI_FLAG, &add_mta, .required = 1, .help = "the conversion (the only one there is)"},
        {"run", CLI_STR, &run, .required = 1, .arg = "BASE", .help = "the baseline run"},
        {"out", CLI_STR, &out, .required = 1, .arg = "DIR", .help = "where the MTA model goes"},
        {"layers", CLI_LIST, layers, .arg = "LIST", .lo = 0, .hi = MODEL_MAX_LAYERS - 1, .max = MODEL_MAX_LAYERS,
         .count = &n_layers, .help = "the layers with the key-query convolutions (0-based; default 2, 6, 10, ...)"},
        {"norm-gate", CLI_FLAG, &norm_gate, .help = "add group norm and the gate too (outputs change)"},
    };
    const cli_spec spec = {"mtac convert", USAGE, ABOUT, NULL, opts, sizeof opts / sizeof opts[0], NULL};
    int first, st = cli_parse(&spec, argc, argv, &first);
    if (st >= 0) return st;
    if (cli_out_is_input(spec.name, out, run)) return 2;  // BASE's own model and config would be replaced
    train_config c;
    char err[1024];
    model *base = train_open_run(run, &c, err, sizeof err);
    if (!base) {
        fprintf(stderr, "mtac convert: %s\n", err);
        return 1;
    }
    if (c.model.mta) {
        fprintf(stderr, "mtac convert: %s is already an MTA model\n", run);
        model_free(base);
        return 2;
    }
    for (int i = 0; i < n_layers; i++)
        if (layers[i] >= (uint64_t)c.model.n_layers) {
            fprintf(stderr, "mtac convert: --layers: layer %d is past the model's last (%d)\n", (int)layers[i],
                    c.model.n_layers - 1);
            model_free(base);
            return 2;
        }
    model_config_mta_pattern(&c.model, norm_gate);
    if (n_layers) {
        memset(c.model.qk_layer, 0, sizeof c.model.qk_layer);
        for (int i = 0; i < n_layers; i++) c.model.qk_layer[layers[i]] = 1;
    }
    c.have_model = 1;
    model *m = model_create(&c.model, err, sizeof err);
    int rc = !m;
    if (m) {
        model_init(m, (uint64_t)c.seed);  // identity kernels (and, with --norm-gate, unit norms, the gate's init)
        const int copied = model_copy_matching(m, base);
        char path[1100];
        snprintf(path, sizeof path, "%s/model.safetensors", out);
        if (mkdir_p(out)) rc = snprintf(err, sizeof err, "%s: cannot create: %s", out, strerror(errno)) > 0;
        else if (train_config_set(&c, "init", path, err, sizeof err) || train_config_set(&c, "out", out, err, sizeof err) ||
                 model_save_weights(m, path, err, sizeof err) || train_copy_tokenizer(run, out, err, sizeof err))
            rc = 1;
        else {
            char *js = train_config_to_json(&c);
            snprintf(path, sizeof path, "%s/config.json", out);
            rc = !js || write_text_atomic(path, js, err, sizeof err);
            free(js);
        }
        if (!rc)
            printf("converted %s: %d baseline tensors kept, %zu parameters (%zu new); %s/model.safetensors, %s/config.json\n",
                   run, copied, model_num_params(m), model_num_params(m) - model_num_params(base), out, out);
    }
    if (rc) fprintf(stderr, "mtac convert: %s\n", err);
    model_free(m);
    model_free(base);
    return rc ? 1 : 0;
}
