// toyplan.h: a toy-task experiment: the task, the training recipe, the models and the seeds, its
// named settings (paper, reduced, quick), and its record DIR/run.json, which mtac attnmap reads to
// rebuild the models and the test samples of a finished run.
#ifndef MTAC_TOYPLAN_H
#define MTAC_TOYPLAN_H

#include "toy/toytrain.h"

#include <stddef.h>
#include <stdint.h>

enum { TOY_MAX_MODELS = 4, TOY_MAX_SEEDS = 8 };

// The largest seed. run.json holds seeds as JSON numbers, which cJSON writes with 15 significant
// digits whenever those read back within a relative 2^-52 of the value: every integer up to 2^52
// comes back exactly, but above it one may come back as another seed (2^53 - 1 as 2^53 - 2).
#define TOY_MAX_SEED (UINT64_C(1) << 52)

typedef struct {
    char setting[32];
    toy_run_config run;  // task and training recipe; run.model and run.seed are set per training
    int n_models;
    char model_name[TOY_MAX_MODELS][32];
    model_config models[TOY_MAX_MODELS];
    int n_seeds;
    uint64_t seeds[TOY_MAX_SEEDS];
} toy_plan;

// A named setting: "paper" (the paper's toy setting: 52 blocks, dim 256, 4 layers, 100k steps of
// 64 rows at lr 1e-4), "reduced" (a smaller task and model sized for a 2-core CPU, seeds 42-44),
// "quick" (a demo of a few minutes, seed 42). Models are toy-baseline and toy. 0, or -1 for an
// unknown name. toy_plan_settings lists the names.
int toy_plan_preset(const char *name, toy_plan *p);
const char *toy_plan_settings(void);

// Applies the model size overrides (0 = keep) to every model of the plan.
void toy_plan_resize(toy_plan *p, int dim, int layers, int hidden);

// DIR/run.json: writes (atomically) or reads a plan. 0, or -1 + message (also for a seed that is
// not an integer in [0, TOY_MAX_SEED]).
int toy_plan_save(const toy_plan *p, const char *dir, char *err, size_t n);
int toy_plan_load(toy_plan *p, const char *dir, char *err, size_t n);

// DIR/<model>-seed<S><suffix>, e.g. suffix ".safetensors" or ".jsonl".
void toy_plan_path(char *buf, size_t n, const char *dir, const char *name, uint64_t seed, const char *suffix);

#endif
