// cmd_convert.c: `mtac convert --add-mta`: a trained baseline run as an MTA model whose new kernels
// start as the identity (the authors' retrofit experiment; docs/longctx.md).
#include "cli.h"
#include "io/fsutil.h"
#include "train/train.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char USAGE[] = "usage: mtac convert --add-mta --run BASE --out DIR [--norm-gate]\n";
static const char ABOUT[] =
    "Turns the baseline Transformer of run BASE into an MTA model: the paper's pattern (6x11 key-query\n"
    "convolutions before and after the softmax in layers 2, 6, 10, ...; head mixing and head\n"
    "convolution over all heads in every layer), every new kernel the identity, every other weight\n"
    "the baseline's. Its outputs are then the baseline's. --norm-gate adds group norm and the gate\n"
    "too, which are not the identity (the outputs then change). Writes DIR/model.safetensors and\n"
    "DIR/config.json (BASE's configuration with the MTA model, init = the new weights); continue\n"
    "training with: mtac train --config DIR/config.json --out NEWRUN --steps N\n";

int cmd_convert(int argc, char **argv) {
    const char *run = NULL, *out = NULL;
    int add_mta = 0, norm_gate = 0;
    const cli_opt opts[] = {
        {"add-mta", CLI_FLAG, &add_mta, .required = 1, .help = "the conversion (the only one there is)"},
        {"run", CLI_STR, &run, .required = 1, .arg = "BASE", .help = "the baseline run"},
        {"out", CLI_STR, &out, .required = 1, .arg = "DIR", .help = "where the MTA model goes"},
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
    model_config_mta_pattern(&c.model, norm_gate);
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
                 model_save_weights(m, path, err, sizeof err))
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
