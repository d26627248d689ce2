// fuzz_train_config.c: the training run configuration (src/train/train_config.c): a config file
// (train_config_load, `mtac train --config` and a run's config.json on --resume / eval / sample),
// then command-line flags on top (train_config_set, `--KEY VALUE`), then train_config_finish.
// The input is the config file up to its first NUL byte, then NUL-separated KEY, VALUE pairs.
// A config that finishes must write out (train_config_to_json, the run's config.json) as a file
// that reads back to the same values, finishes and writes the same text again.
#include "fuzz_util.h"
#include "train/train.h"

#include <stdlib.h>
#include <string.h>

// The same run settings: every key of the table in train_config.c, by value (the text alone
// would hide a number that prints the same but does not read back the same).
static int same_settings(const train_config *a, const train_config *b) {
    return !strcmp(a->preset, b->preset) && !strcmp(a->schedule, b->schedule) && !strcmp(a->data, b->data) &&
           !strcmp(a->out, b->out) && a->steps == b->steps && a->batch_size == b->batch_size &&
           a->seq_len == b->seq_len && a->grad_accum == b->grad_accum && a->lr == b->lr && a->min_lr == b->min_lr &&
           a->warmup == b->warmup && a->beta1 == b->beta1 && a->beta2 == b->beta2 && a->eps == b->eps &&
           a->weight_decay == b->weight_decay && a->clip == b->clip && a->seed == b->seed &&
           a->eval_every == b->eval_every && a->eval_batches == b->eval_batches && a->save_every == b->save_every &&
           a->log_every == b->log_every && !strcmp(a->init, b->init) && a->mix == b->mix &&
           !strcmp(a->mix_tasks, b->mix_tasks) && !strcmp(a->mix_loss, b->mix_loss);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    const size_t file_len = nul ? (size_t)(nul - data) : size;
    train_config c;
    char err[1024];
    train_config_default(&c);
    if (train_config_load(&c, fuzz_file(data, file_len), err, sizeof err)) return 0;

    // The flags, as C strings: a copy with a NUL after the last one.
    size_t rest = nul ? size - file_len - 1 : 0;
    char *flags = malloc(rest + 1);
    fuzz_require(flags != NULL, "out of memory");
    if (rest) memcpy(flags, nul + 1, rest);
    flags[rest] = '\0';
    int rc = 0;
    for (const char *p = flags, *end = flags + rest; !rc && p < end;) {
        const char *key = p, *value = key + strlen(key) + 1;
        if (value > end) break;  // a key without a value: the CLI refuses it before parsing
        rc = train_config_set(&c, key, value, err, sizeof err);
        p = value + strlen(value) + 1;
    }
    free(flags);
    if (rc || train_config_finish(&c, err, sizeof err)) return 0;

    char *json = train_config_to_json(&c);
    fuzz_require(json != NULL, "train_config_to_json");
    train_config c2;
    train_config_default(&c2);
    fuzz_require(train_config_load(&c2, fuzz_file((const uint8_t *)json, strlen(json)), err, sizeof err) == 0,
                 "the written config reads back");
    fuzz_require(same_settings(&c, &c2), "the written config reads back to the same values");
    fuzz_require(train_config_finish(&c2, err, sizeof err) == 0, "the written config finishes");
    char *json2 = train_config_to_json(&c2);
    fuzz_require(json2 && !strcmp(json, json2), "the written config reads back unchanged");
    free(json);
    free(json2);
    return 0;
}
