// fuzz_checkpoint.c: what reads checkpoints and run directories (src/train/checkpoint.c and the
// run readers of src/train/train.c), into a tiny model (baseline, or MTA with every step on).
// The first input byte picks the reader, the rest is the file:
//   mode 0: checkpoint_load with the AdamW moments (`mtac train --resume`), then the sampler
//           state of its metadata (data_state) through dataloader_state_parse, as the resume
//           reads it (the resume's other metadata checks are static in train.c, not reached);
//   mode 1: checkpoint_load of the weights alone;
//   mode 2: model_load_weights (a run's model.safetensors: `mtac eval`, `mtac sample`);
//   mode 3: a whole run directory for train_open_run: config.json (up to the first NUL byte)
//           and model.safetensors (the rest), written to a temporary directory;
//   bit 2 (modes 0-2): the MTA model instead of the baseline.
#include "data/dataloader.h"
#include "fuzz_tiny_model.h"
#include "fuzz_util.h"
#include "train/checkpoint.h"
#include "train/train.h"

#include <stdlib.h>
#include <string.h>

// The largest model a fuzzed run directory may ask for (floats); bigger configs are skipped, as
// allocating them tests the allocator, not the reader.
enum { MAX_PARAMS = 1 << 16 };

static model *tiny_model(int mta) {
    static model *models[2];
    if (!models[mta]) {
        const model_config c = fuzz_tiny_model_config(mta);
        char err[256];
        models[mta] = model_create(&c, err, sizeof err);
        fuzz_require(models[mta] != NULL, err);
    }
    return models[mta];
}

static void load_checkpoint(const char *path, model *m, int moments) {
    const size_t P = model_num_params(m);
    float *mv = moments ? malloc(2 * P * sizeof(float)) : NULL;
    fuzz_require(!moments || mv, "out of memory");
    st_file f;
    char err[1024];
    if (checkpoint_load(path, m, mv, mv ? mv + P : NULL, &f, err, sizeof err) == 0) {
        const char *ds = st_meta_get(&f, "data_state");
        dataloader dl;
        if (ds) (void)dataloader_state_parse(&dl, ds);
        st_free(&f);
    }
    free(mv);
}

static void open_run(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    const size_t cfg_len = nul ? (size_t)(nul - data) : size;
    const char *cfg_path = fuzz_dir_file("config.json", data, cfg_len);
    fuzz_dir_file("model.safetensors", nul ? nul + 1 : data + size, nul ? size - cfg_len - 1 : 0);
    // The same config reading train_open_run starts with, to skip models too big to allocate.
    train_config c;
    char err[1024];
    train_config_default(&c);
    if (train_config_load(&c, cfg_path, err, sizeof err) || train_config_finish(&c, err, sizeof err)) return;
    const model_config *mc = &c.model;
    const double D = mc->dim, F = mc->hidden_dim;
    if ((double)mc->vocab_size * D + mc->n_layers * (4 * D * D + 3 * D * F + 8 * D) > MAX_PARAMS) return;
    model *m = train_open_run(fuzz_dir(), &c, err, sizeof err);
    model_free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const int mode = data[0] & 3, mta = (data[0] >> 2) & 1;
    const uint8_t *file = data + 1;
    const size_t len = size - 1;
    char err[1024];
    if (mode == 0 || mode == 1) load_checkpoint(fuzz_file(file, len), tiny_model(mta), mode == 0);
    else if (mode == 2) (void)model_load_weights(tiny_model(mta), fuzz_file(file, len), err, sizeof err);
    else open_run(file, len);
    return 0;
}
