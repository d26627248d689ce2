// import.h: a pretrained Llama-family model as an mtac run (docs/models.md, "Importing"): a
// Hugging Face model directory (config.json, safetensors, tokenizer.json) or a GGUF file.
#ifndef MTAC_IMPORT_H
#define MTAC_IMPORT_H

#include <signal.h>
#include <stddef.h>

typedef struct {
    // Called before each tensor is read (done of total, its mtac name) and with a note (a line of
    // text, done < 0) about what the import decided; NULL: silent.
    void (*progress)(void *arg, int done, int total, const char *what);
    void *arg;
    // Non-zero: stop before the next tensor, remove the temporary directory, return
    // IMPORT_INTERRUPTED (the CLI's SIGINT/SIGTERM). NULL: never.
    const volatile sig_atomic_t *stop;
} import_hooks;

enum { IMPORT_BAD_INPUT = -1, IMPORT_IO_ERROR = -2, IMPORT_INTERRUPTED = -3 };

// Imports src (a directory: Hugging Face; a file: GGUF) as the run directory out, which must not
// exist or be an empty directory. The run is built in a temporary directory beside out and
// renamed into place at the end, so out holds a complete run or nothing. Tensors are streamed: one
// at a time beside the model. 0, or IMPORT_BAD_INPUT (src is not a model mtac can import: the
// message names the file and the field or tensor) or IMPORT_IO_ERROR, with a message in err.
int import_model(const char *src, const char *out, const import_hooks *h, char *err, size_t n);

#endif
