// fuzz_util.h: what the fuzz targets share. The library's readers take paths, so a target hands
// them its input as a file: an in-memory file (memfd) for one file, a private temporary directory
// for readers that open a directory's files. Built into the libFuzzer targets (clang, MTAC_FUZZ)
// and into the replay drivers of the normal test suite (fuzz_replay_main.c).
#ifndef MTAC_FUZZ_UTIL_H
#define MTAC_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>

// The libFuzzer entry point every target defines.
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

// A path ("/proc/self/fd/N") naming a file that holds exactly data[0..size). The same in-memory
// file serves every call, so nothing is left behind; the path is valid until the next call.
const char *fuzz_file(const uint8_t *data, size_t size);

// This process's temporary directory ($TMPDIR or /tmp, mtac-fuzz-XXXXXX), made on first use and
// removed with its files at exit.
const char *fuzz_dir(void);

// The path fuzz_dir()/name (valid until the next call of this or fuzz_dir_file).
const char *fuzz_dir_path(const char *name);

// Writes data[0..size) to fuzz_dir()/name, replacing it; returns its path (valid until the next
// call of this or fuzz_dir_path).
const char *fuzz_dir_file(const char *name, const uint8_t *data, size_t size);

// A property every input must keep: when it fails, says which and aborts (a finding).
void fuzz_require(int ok, const char *what);

#endif
