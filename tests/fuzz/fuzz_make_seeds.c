// fuzz_make_seeds.c: writes the fuzz targets' starting corpora, valid files made by the library's
// own writers, so that nothing large is committed:
//   fuzz_make_seeds OUTDIR [FIXTURES_DIR]
// makes OUTDIR/<target>/ for every target (fuzz_<target>.c) and copies the small operator
// fixtures (under 8 KB) of FIXTURES_DIR into the safetensors and attn_problem corpora.
#include "data/shard.h"
#include "fuzz_tiny_model.h"
#include "io/fsutil.h"
#include "io/safetensors.h"
#include "tok/tokenizer.h"
#include "toy/toyplan.h"
#include "train/checkpoint.h"
#include "train/train.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { MAX_FIXTURE_BYTES = 8192 };

static const char *g_out;
static char g_err[1024];

static void die(const char *what) {
    fprintf(stderr, "fuzz_make_seeds: %s: %s\n", what, g_err);
    exit(1);
}

// OUTDIR/target/name (the directory made on the way).
static const char *seed_path(const char *target, const char *name) {
    static char path[4096];
    snprintf(path, sizeof path, "%s/%s", g_out, target);
    if (mkdir_p(path)) die(path);
    snprintf(path, sizeof path, "%s/%s/%s", g_out, target, name);
    return path;
}

static void write_bytes(const char *path, const void *a, size_t na, const void *b, size_t nb) {
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(a, 1, na, f) == na && (!nb || fwrite(b, 1, nb, f) == nb);
    if (f) ok &= fclose(f) == 0;
    if (!ok) die(path);
}

// Reads a whole file (binary) into a malloc'd buffer.
static unsigned char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) die(path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    unsigned char *buf = malloc(n > 0 ? (size_t)n : 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) die(path);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

// A seed that is one byte (a mode) and then a file's contents; the file is removed.
static void prefixed_seed(const char *target, const char *name, unsigned char mode, const char *file) {
    size_t len;
    unsigned char *buf = slurp(file, &len);
    write_bytes(seed_path(target, name), &mode, 1, buf, len);
    free(buf);
    remove(file);
}

static void safetensors_seeds(void) {
    float a[6] = {1, -2, 3.5f, 0, 1e-3f, -7}, s = 0.25f;
    st_tensor ts[3] = {{"a", 2, {2, 3}, 6, a}, {"scalar", 0, {0}, 1, &s}, {"empty", 3, {2, 0, 4}, 0, NULL}};
    st_meta_kv meta[2] = {{"format", "pt"}, {"layer_id", "3"}};
    if (st_write(seed_path("safetensors", "none"), NULL, 0, NULL, 0, g_err, sizeof g_err)) die("st_write");
    if (st_write(seed_path("safetensors", "three"), ts, 3, meta, 2, g_err, sizeof g_err)) die("st_write");
    if (st_write(seed_path("safetensors", "one"), ts, 1, NULL, 0, g_err, sizeof g_err)) die("st_write");
}

static void shard_seeds(void) {
    uint32_t t[12] = {0, 1, 2, 3, 258, 65535, 7, 7, 7, 100, 4, 9}, big[4] = {65536, 1u << 31, 0xFFFFFFFFu, 5};
    if (shard_write(seed_path("shard", "u16"), t, 12, SHARD_U16, g_err, sizeof g_err)) die("shard_write");
    if (shard_write(seed_path("shard", "u32"), big, 4, SHARD_U32, g_err, sizeof g_err)) die("shard_write");
    if (shard_write(seed_path("shard", "empty"), t, 0, SHARD_U16, g_err, sizeof g_err)) die("shard_write");
    if (shard_write(seed_path("shard", "two"), t, 2, SHARD_U32, g_err, sizeof g_err)) die("shard_write");
}

static void model_config_seeds(void) {
    static const char *const presets[] = {"toy", "toy-baseline", "lm1m", "830m", "300m-baseline"};
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        model_config c;
        model_preset(presets[i], &c);
        char *js = model_config_to_json(&c);
        write_bytes(seed_path("model_config", presets[i]), js, strlen(js), NULL, 0);
        free(js);
    }
    const model_config tiny = fuzz_tiny_model_config(1);
    char *js = model_config_to_json(&tiny);
    write_bytes(seed_path("model_config", "tiny"), js, strlen(js), NULL, 0);
    free(js);
}

static void train_config_seeds(void) {
    train_config c;
    train_config_default(&c);
    train_config_finish(&c, g_err, sizeof g_err);
    char *js = train_config_to_json(&c);
    // config file, NUL, then KEY NUL VALUE pairs (see fuzz_train_config.c)
    static const char flags[] = "steps\0" "10\0" "lr\0" "3e-4\0" "schedule\0" "linear\0" "seed\0" "7";
    write_bytes(seed_path("train_config", "default"), js, strlen(js) + 1, flags, sizeof flags - 1);
    free(js);
    static const char small[] = "{\"preset\": \"toy\", \"steps\": 5, \"batch_size\": 2, \"out\": \"runs/x\"}";
    write_bytes(seed_path("train_config", "small"), small, sizeof small - 1, NULL, 0);
    static const char with_model[] =
        "{\"model\": {\"dim\": 16, \"n_layers\": 2, \"n_heads\": 2, \"vocab_size\": 259, \"mta\": {\"qk_layers\": [1], "
        "\"pre_cq\": 2, \"pre_ck\": 3, \"post_ch\": 2, \"group_norm\": true}}, \"warmup\": 0}";
    static const char more[] = "min-lr\0" "1e-5\0" "clip\0" "0\0" "data\0" "d";
    write_bytes(seed_path("train_config", "model"), with_model, sizeof with_model, more, sizeof more - 1);
}

static void attn_problem_seeds(void) {
    enum { B = 1, H = 2, T = 5, d = 4, N = B * H * T * d };
    static float x[4][N], w_pre[H * 2 * 3], w_head[H * H], w_post[H * 3 * 2], w_post_head[H * 2], gn[d], gw[d], gb[1];
    for (int i = 0; i < N; i++)
        for (int j = 0; j < 4; j++) x[j][i] = (float)((i * 7 + j * 3) % 11) / 5.0f - 1.0f;
    w_pre[2] = w_pre[8] = w_post[4] = w_post[10] = 1;
    w_head[0] = w_head[3] = w_post_head[0] = w_post_head[3] = 1;
    for (int i = 0; i < d; i++) gn[i] = 1, gw[i] = 0.1f;
    st_tensor ts[] = {{"q", 4, {B, H, T, d}, N, x[0]},
                      {"k", 4, {B, H, T, d}, N, x[1]},
                      {"v", 4, {B, H, T, d}, N, x[2]},
                      {"dout", 4, {B, H, T, d}, N, x[3]},
                      {"w_pre", 3, {H, 2, 3}, H * 6, w_pre},
                      {"w_pre_head", 2, {H, H}, H * H, w_head},
                      {"w_post", 3, {H, 3, 2}, H * 6, w_post},
                      {"w_post_head", 3, {1, 2, 2}, 4, w_post_head},
                      {"gn_weight", 1, {d}, d, gn},
                      {"gate_w", 1, {d}, d, gw},
                      {"gate_b", 1, {1}, 1, gb}};
    st_meta_kv meta[] = {{"layer_id", "2"}, {"depth_scale", "1"}};
    if (st_write(seed_path("attn_problem", "all"), ts, 11, meta, 2, g_err, sizeof g_err)) die("st_write");
    if (st_write(seed_path("attn_problem", "plain"), ts, 3, NULL, 0, g_err, sizeof g_err)) die("st_write");
}

static void checkpoint_seeds(void) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s/checkpoint.tmp", g_out);
    for (int mta = 0; mta < 2; mta++) {
        const model_config mc = fuzz_tiny_model_config(mta);
        model *m = model_create(&mc, g_err, sizeof g_err);
        if (!m) die("model_create");
        model_init(m, 42 + mta);
        const size_t P = model_num_params(m);
        float *mv = calloc(2 * P, sizeof(float));
        if (!mv) die("out of memory");
        for (size_t i = 0; i < 2 * P; i++) mv[i] = (float)(i % 13) * 1e-3f;
        train_config tc;
        train_config_default(&tc);
        tc.model = mc, tc.have_model = 1;
        char *tj = train_config_to_json(&tc);
        // the metadata train.c saves with every checkpoint
        st_meta_kv meta[] = {{"step", "50"}, {"adam_t", "50"}, {"data_state", "0123456789abcdef"},
                             {"best_val_loss", "2.5"}, {"train_config", tj}};
        char name[64];
        if (checkpoint_save(tmp, m, mv, mv + P, meta, 5, g_err, sizeof g_err)) die("checkpoint_save");
        snprintf(name, sizeof name, "resume-%s", mta ? "mta" : "baseline");
        prefixed_seed("checkpoint", name, (unsigned char)(0 | mta << 2), tmp);
        if (checkpoint_save(tmp, m, NULL, NULL, meta, 5, g_err, sizeof g_err)) die("checkpoint_save");
        snprintf(name, sizeof name, "weights-only-%s", mta ? "mta" : "baseline");
        prefixed_seed("checkpoint", name, (unsigned char)(1 | mta << 2), tmp);
        if (model_save_weights(m, tmp, g_err, sizeof g_err)) die("model_save_weights");
        snprintf(name, sizeof name, "model-%s", mta ? "mta" : "baseline");
        size_t wlen;
        unsigned char *w = slurp(tmp, &wlen);
        prefixed_seed("checkpoint", name, (unsigned char)(2 | mta << 2), tmp);
        // a run directory: mode 3, config.json, NUL, model.safetensors
        snprintf(name, sizeof name, "run-%s", mta ? "mta" : "baseline");
        const size_t tl = strlen(tj);
        unsigned char *run = malloc(tl + 2 + wlen);
        if (!run) die("out of memory");
        run[0] = 3;
        memcpy(run + 1, tj, tl + 1);
        memcpy(run + 2 + tl, w, wlen);
        write_bytes(seed_path("checkpoint", name), run, tl + 2 + wlen, NULL, 0);
        free(run), free(w), free(tj), free(mv);
        model_free(m);
    }
}

static void toyplan_seeds(void) {
    static const char *const settings[] = {"quick", "reduced", "paper"};
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/toyplan.tmp", g_out);
    if (mkdir_p(dir)) die(dir);
    for (int i = 0; i < 3; i++) {
        toy_plan p;
        if (toy_plan_preset(settings[i], &p) || toy_plan_save(&p, dir, g_err, sizeof g_err)) die("toy_plan_save");
        snprintf(path, sizeof path, "%s/run.json", dir);
        size_t len;
        unsigned char *text = slurp(path, &len);
        write_bytes(seed_path("toyplan", settings[i]), text, len, NULL, 0);
        free(text);
        remove(path);
    }
    rmdir(dir);
}

// The fixtures small enough to keep the fuzzers fast.
static void fixture_seeds(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) die(dir);
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *dot = strrchr(e->d_name, '.');
        if (!dot || strcmp(dot, ".safetensors")) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t len;
        unsigned char *buf = slurp(path, &len);
        if (len <= MAX_FIXTURE_BYTES) {
            write_bytes(seed_path("safetensors", e->d_name), buf, len, NULL, 0);
            write_bytes(seed_path("attn_problem", e->d_name), buf, len, NULL, 0);
        }
        free(buf);
    }
    closedir(d);
}

// Small tokenizer.json files written by tokenizer_save: byte-level BPE (GPT-2's alphabet, a few
// merges, the smollm pre-tokenizer, control tokens) and SentencePiece BPE (scores, byte tokens).
static void tokenizer_json_seeds(void) {
    static char bytes[256][8];
    const char *tokens[300];
    int32_t types[300];
    float scores[300];
    int nv = 0;
    for (int b = 0; b < 256; b++) {  // the byte-level alphabet, UTF-8
        unsigned cp = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174 ? (unsigned)b : 0;
        if (!cp) {
            unsigned k = 0;
            for (int c = 0; c < b; c++) k += !((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || c >= 174);
            cp = 256 + k;
        }
        if (cp < 0x80) snprintf(bytes[b], 8, "%c", (char)cp);
        else snprintf(bytes[b], 8, "%c%c", (char)(0xc0 | cp >> 6), (char)(0x80 | (cp & 0x3f)));
        tokens[nv] = bytes[b];
        types[nv++] = 1;
    }
    const char *extra[] = {"he", "ll", "hell", "hello", "<|im_start|>", "<|im_end|>"};
    for (int i = 0; i < 6; i++) {
        tokens[nv] = extra[i];
        types[nv++] = i < 4 ? 1 : 3;
    }
    const char *merges[] = {"h e", "l l", "he ll", "hell o"};
    tokenizer_spec s = {.kind = TOKENIZER_BPE_BYTES, .pre = "smollm", .n_vocab = nv, .tokens = tokens, .types = types,
                        .n_merges = 4, .merges = merges, .bos_id = 260, .eos_id = 261, .unk_id = -1, .pad_id = -1};
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", seed_path("tokenizer_json", "tmp"));
    const char *pres[] = {"smollm", "llama-bpe", "qwen2", "gpt-2"};
    for (int p = 0; p < 4; p++) {
        s.pre = pres[p];
        tokenizer *t = tokenizer_from_spec(&s, g_err, sizeof g_err);
        if (!t || mkdir_p(dir) || tokenizer_save(t, dir, g_err, sizeof g_err)) die("tokenizer seed");
        tokenizer_free(t);
        char from[4200], to[4200];
        snprintf(from, sizeof from, "%s/tokenizer.json", dir);
        snprintf(to, sizeof to, "%s", seed_path("tokenizer_json", pres[p]));
        if (rename(from, to)) die("tokenizer seed");
    }
    // SentencePiece: <unk>, <s>, </s>, the byte tokens, a few pieces by score
    nv = 0;
    const char *spm[] = {"<unk>", "<s>", "</s>", "\xe2\x96\x81", "h", "e", "\xe2\x96\x81h", "\xe2\x96\x81he"};
    for (int i = 0; i < 8; i++) {
        tokens[nv] = spm[i];
        types[nv] = i == 0 ? 2 : i < 3 ? 3 : 1;
        scores[nv++] = (float)-i;
    }
    for (int b = 0; b < 256; b++) {
        snprintf(bytes[b], 8, "<0x%02X>", b);
        tokens[nv] = bytes[b];
        types[nv] = 6;
        scores[nv++] = 0;
    }
    tokenizer_spec q = {.kind = TOKENIZER_BPE_SPM, .n_vocab = nv, .tokens = tokens, .types = types, .scores = scores,
                        .bos_id = 1, .eos_id = 2, .unk_id = 0, .pad_id = -1, .add_bos = 1};
    tokenizer *t = tokenizer_from_spec(&q, g_err, sizeof g_err);
    if (!t || tokenizer_save(t, dir, g_err, sizeof g_err)) die("tokenizer seed");
    tokenizer_free(t);
    char from[4200], to[4200];
    snprintf(from, sizeof from, "%s/tokenizer.json", dir);
    snprintf(to, sizeof to, "%s", seed_path("tokenizer_json", "spm"));
    if (rename(from, to)) die("tokenizer seed");
    snprintf(from, sizeof from, "%s/tokenizer_config.json", dir);
    remove(from);
    rmdir(dir);
}

// GGUF seeds, built byte by byte (mtac writes no GGUF): v3 and v2 headers, every kind of
// key/value the import reads, an F32 and a Q8_0 tensor.
typedef struct {
    unsigned char b[1024];
    size_t n;
} bytes;

static void put(bytes *o, const void *p, size_t n) {
    memcpy(o->b + o->n, p, n);
    o->n += n;
}
static void put_u32(bytes *o, uint32_t v) { put(o, &v, 4); }
static void put_u64(bytes *o, uint64_t v) { put(o, &v, 8); }
static void put_str(bytes *o, const char *s) {
    put_u64(o, strlen(s));
    put(o, s, strlen(s));
}

static void gguf_seed(const char *name, uint32_t version) {
    bytes o = {{0}, 0};
    put(&o, "GGUF", 4);
    put_u32(&o, version);
    put_u64(&o, 2);  // tensors
    put_u64(&o, 5);  // key/values
    put_str(&o, "general.architecture"), put_u32(&o, 8), put_str(&o, "llama");
    put_str(&o, "general.alignment"), put_u32(&o, 4), put_u32(&o, 32);
    put_str(&o, "llama.attention.layer_norm_rms_epsilon"), put_u32(&o, 6), put(&o, &(float){1e-5f}, 4);
    put_str(&o, "tokenizer.ggml.tokens"), put_u32(&o, 9), put_u32(&o, 8), put_u64(&o, 2), put_str(&o, "a"), put_str(&o, "b");
    put_str(&o, "tokenizer.ggml.token_type"), put_u32(&o, 9), put_u32(&o, 5), put_u64(&o, 2), put_u32(&o, 1), put_u32(&o, 3);
    put_str(&o, "a"), put_u32(&o, 1), put_u64(&o, 4), put_u32(&o, 0), put_u64(&o, 0);           // F32 [4]
    put_str(&o, "b"), put_u32(&o, 2), put_u64(&o, 32), put_u64(&o, 1), put_u32(&o, 8), put_u64(&o, 32);  // Q8_0 [32, 1]
    o.n = (o.n + 31) / 32 * 32;
    const float a[4] = {1, -2, 0.5f, 3};
    put(&o, a, sizeof a);
    o.n += 16;
    const unsigned char d[2] = {0x00, 0x3c};  // the block scale 1.0 as a half; quants 0
    put(&o, d, 2);
    o.n += 32;
    write_bytes(seed_path("gguf", name), o.b, o.n, NULL, 0);
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: fuzz_make_seeds OUTDIR [FIXTURES_DIR]\n");
        return 2;
    }
    g_out = argv[1];
    safetensors_seeds();
    shard_seeds();
    model_config_seeds();
    train_config_seeds();
    attn_problem_seeds();
    checkpoint_seeds();
    toyplan_seeds();
    tokenizer_json_seeds();
    gguf_seed("v3", 3);
    gguf_seed("v2", 2);
    if (argc == 3) fixture_seeds(argv[2]);
    return 0;
}
