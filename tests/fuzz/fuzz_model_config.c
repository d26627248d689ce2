// fuzz_model_config.c: the model config JSON (src/model/config.c, model_config_from_json), read
// from the "model" object of a training config, a run's config.json and a toy run's run.json.
// The input is the JSON text. A config it accepts must pass model_config_check and write out
// (model_config_to_json) as JSON that reads back to the same config.
#include "fuzz_util.h"
#include "model/model.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *json = malloc(size + 1), msg[256];
    fuzz_require(json != NULL, "out of memory");
    memcpy(json, data, size);
    json[size] = '\0';
    model_config c, c2;
    int rc = model_config_from_json(json, &c, msg, sizeof msg);
    free(json);
    if (rc) return 0;
    fuzz_require(model_config_check(&c, msg, sizeof msg) == 0, "an accepted config passes model_config_check");
    char *out = model_config_to_json(&c);
    fuzz_require(out != NULL, "model_config_to_json");
    fuzz_require(model_config_from_json(out, &c2, msg, sizeof msg) == 0, "the written config reads back");
    char *out2 = model_config_to_json(&c2);
    fuzz_require(out2 && !strcmp(out, out2), "the written config reads back unchanged");
    free(out);
    free(out2);
    return 0;
}
