// fuzz_toyplan.c: a toy run's record DIR/run.json (src/toy/toyplan.c, toy_plan_load), which
// `mtac attnmap` reads to rebuild a finished run's models and test samples. The input is
// run.json, written to a temporary directory. A record it accepts must write back
// (toy_plan_save) as one that reads back and writes the same text again.
#include "fuzz_util.h"
#include "io/fsutil.h"
#include "toy/toyplan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Saves p into the temporary directory and returns run.json's text (malloc'd).
static char *save(const toy_plan *p) {
    char err[512];
    fuzz_require(toy_plan_save(p, fuzz_dir(), err, sizeof err) == 0, "toy_plan_save");
    char *text = read_text_file(fuzz_dir_path("run.json"), 1u << 20, err, sizeof err);
    fuzz_require(text != NULL, "reading the saved run.json");
    return text;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    toy_plan p, p2;
    char err[512];
    fuzz_dir_file("run.json", data, size);
    if (toy_plan_load(&p, fuzz_dir(), err, sizeof err)) return 0;
    char *text = save(&p);
    fuzz_require(toy_plan_load(&p2, fuzz_dir(), err, sizeof err) == 0, "the saved record reads back");
    char *text2 = save(&p2);
    fuzz_require(!strcmp(text, text2), "the saved record reads back unchanged");
    free(text);
    free(text2);
    return 0;
}
