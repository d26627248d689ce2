// main.c: the mtac command-line tool: sets up the process's environment and dispatches to the
// commands of its table (their shared helpers: cli.c).
#include "blas_core.h"
#include "cli.h"
#include "util/threads.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

// The commands, in the order --help lists them: each one's name, function and one-line summary.
typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static int bench(int argc, char **argv);

static const command COMMANDS[] = {
    {"attn", cmd_attn, "run the MTA operator on tensors from a safetensors file (forward, and backward if dout)"},
    {"bench", bench, "benchmarks: `mtac bench attn` times plain attention, MTA and the naive PyTorch MTA"},
    {"demo", cmd_demo, "a short tour of the operator: MTA vs plain attention, identity kernels, gradients"},
    {"data", cmd_data, "turn text files (default: the King James Bible) into token shards"},
    {"train", cmd_train, "train an MTA or baseline language model; --resume continues a run"},
    {"eval", cmd_eval, "validation loss and perplexity of a trained run; eval needle|babi: long-context retrieval"},
    {"sample", cmd_sample, "generate text from a run (a trained or an imported model; --chat: its chat template)"},
    {"tokenize", cmd_tokenize, "a run's tokenizer: text to ids, or ids to text (--decode)"},
    {"logits", cmd_logits, "the model's logits at every position of a sequence of token ids (JSON or float32)"},
    {"plot", cmd_plot, "loss curves of runs (PNG or SVG)"},
    {"toy", cmd_toy, "the paper's toy task: train and evaluate baseline and MTA over seeds (--quick: a demo)"},
    {"attnmap", cmd_attnmap, "draw where the toy models attend, baseline beside MTA (PNG or SVG)"},
    {"import", cmd_import, "a pretrained Llama-family model (Hugging Face directory or GGUF file) as a run"},
    {"convert", cmd_convert, "--add-mta: a trained baseline as an MTA model with identity kernels (same outputs)"},
};
enum { N_COMMANDS = sizeof COMMANDS / sizeof COMMANDS[0] };

// `mtac bench NAME`: the benchmarks, a table of their own.
static const command BENCHES[] = {
    {"attn", cmd_bench_attn, "plain attention, MTA and the naive PyTorch MTA: time and peak memory"},
    {"train", cmd_bench_train, "training steps of model presets, beside the PyTorch reference model"},
    {"decode", cmd_bench_decode, "tokens/s of decoding with the KV/MTA cache and by recomputing"},
};
enum { N_BENCHES = sizeof BENCHES / sizeof BENCHES[0] };

// The names of the benchmarks joined by sep ("attn|train|decode").
static void bench_names(FILE *f, const char *sep) {
    for (int i = 0; i < N_BENCHES; i++) fprintf(f, "%s%s", i ? sep : "", BENCHES[i].name);
}

static int bench(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        FILE *f = argc < 2 ? stderr : stdout;
        fprintf(f, "usage: mtac bench ");
        bench_names(f, "|");
        fprintf(f, " [options]   (mtac bench %s --help, and so on)\n\n", BENCHES[0].name);
        for (int i = 0; i < N_BENCHES; i++) fprintf(f, "  %-7s %s\n", BENCHES[i].name, BENCHES[i].summary);
        return argc < 2 ? 2 : 0;
    }
    for (int i = 0; i < N_BENCHES; i++)
        if (!strcmp(argv[1], BENCHES[i].name)) return BENCHES[i].run(argc - 1, argv + 1);
    fprintf(stderr, "mtac bench: unknown benchmark '%s' (available: ", argv[1]);
    bench_names(stderr, ", ");
    fprintf(stderr, ")\n");
    return 2;
}

static void usage(FILE *f);

// `mtac help CMD [SUB]`: what `mtac CMD [SUB] --help` prints.
static int help(int argc, char **argv) {
    for (int i = 0; i < N_COMMANDS; i++)
        if (!strcmp(argv[0], COMMANDS[i].name)) {
            char *args[8] = {0};
            int n = 0;
            for (; n < argc && n < 6; n++) args[n] = argv[n];
            args[n++] = "--help";
            return COMMANDS[i].run(n, args);
        }
    fprintf(stderr, "mtac help: unknown command '%s'\n\n", argv[0]);
    usage(stderr);
    return 2;
}

static void usage(FILE *f) {
    fprintf(f, "mtac: Multi-Token Attention in C\n"
               "\n"
               "usage: mtac <command> [options]   (mtac <command> --help, or mtac help <command>, for details)\n"
               "       mtac --version\n"
               "\n"
               "commands:\n");
    for (int i = 0; i < N_COMMANDS; i++) fprintf(f, "  %-8s %s\n", COMMANDS[i].name, COMMANDS[i].summary);
    fprintf(f, "\n"
               "threads: at most OMP_NUM_THREADS (default: every core); work too small to share (decoding a token of a\n"
               "small model, the toy task) runs on fewer. mtac runs with OMP_WAIT_POLICY=passive (waiting threads sleep\n"
               "instead of spinning: for machines shared with other jobs) unless you set OMP_WAIT_POLICY yourself.\n");
}

// The environment that OpenMP and OpenBLAS read when they load, before main: when mtac wants a
// variable the user left unset, it sets it and restarts itself once (one exec for all of them).
//  - OMP_WAIT_POLICY=passive: a thread that waits for work or at a barrier sleeps at once instead
//    of spinning (libgomp's default spins up to 300,000 times first). On a machine whose cores
//    another job also uses, spinning threads take the cores from the ones with work: the toy
//    quick start took 374 s instead of 77 s with two busy processes on 2 cores. A user's
//    OMP_WAIT_POLICY or GOMP_SPINCOUNT is kept.
//  - OPENBLAS_CORETYPE: the kernels the CPU supports where OpenBLAS does not know the CPU
//    (blas_core.h, the rule the test programs share). MTAC_KEEP_BLAS_CORE=1 keeps OpenBLAS's own
//    choice.
// The restarted process finds every variable it would set already set, so it never restarts.
static void fix_env(char **argv) {
    int restart = 0;
    if (!getenv("OMP_WAIT_POLICY") && !getenv("GOMP_SPINCOUNT")) restart |= !setenv("OMP_WAIT_POLICY", "passive", 1);
    restart |= blas_core_setenv();
    if (restart) restart_self(argv);  // if exec failed: carry on with the defaults
}

// Whether OpenMP's waiting threads spin (the user's OMP_WAIT_POLICY=active, or GOMP_SPINCOUNT
// without a policy): small work is then worth more threads (util/threads.h).
static int omp_spins(void) {
    const char *policy = getenv("OMP_WAIT_POLICY"), *count = getenv("GOMP_SPINCOUNT");
    if (policy) return !strcasecmp(policy, "active");
    return count && strtod(count, NULL) > 0;
}

int main(int argc, char **argv) {
    fix_env(argv);
    threads_set_spinning(omp_spins());
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        printf("mtac %s\n", MTAC_VERSION);
        return 0;
    }
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || (!strcmp(cmd, "help") && argc == 2)) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "help")) return help(argc - 2, argv + 2);
    for (int i = 0; i < N_COMMANDS; i++)
        if (!strcmp(cmd, COMMANDS[i].name)) return COMMANDS[i].run(argc - 1, argv + 1);
    fprintf(stderr, "mtac: unknown command '%s'\n\n", cmd);
    usage(stderr);
    return 2;
}
