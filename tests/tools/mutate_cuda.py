#!/usr/bin/env python3
"""Deliberate bugs in the CUDA backend's source and its emulator, each of which their tests must catch.

    python3 tests/tools/mutate_cuda.py [--build DIR] [--list] [--check] [--only TESTS] [N ...]

Each mutation is applied to the source, the build directory's test program is rebuilt (a build
made with -DMTAC_CUDA_EMU=ON), it runs (`test_attn_backends cuda-emu`; for the emulator's own
primitives and test_cuda_emu's kernels on them, `test_cuda_emu`; for the end-of-tile barriers, with the
emulator's warps running ahead, `test_attn_backends cuda-emu --schedule 3`), and the source is restored, also
on an error or Ctrl-C. A mutation the tests do not catch (the run passes) is reported as MISSED and
makes the exit status 1. Without N, every mutation runs (about half a minute each on 2 cores). Do not
edit or build the tree meanwhile: the source files are changed in place. See docs/cuda.md.
--check only checks that each mutation's text is in its file once (CTest test_mutation_texts), so
that an edit of the source that moves a mutation's text fails CI instead of this script.
"""
import argparse
import os
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CU, CUH, TC = 'src/attn/mta_cuda.cu', 'src/attn/cuda_kernels.cuh', 'src/attn/mta_cuda_tc.cuh'
FA = 'src/attn/mta_cuda_fa2.cuh'  # the tensor-core path's FlashAttention-2 kernels (mma.sync, ldmatrix, cp.async)
FH = 'src/attn/mta_cuda_fa_heads.cuh'  # the head steps' forward on mma.sync (k_fa_head_forward)
FHQ = 'src/attn/mta_cuda_fa_heads_dq.cuh'  # their dQ (k_fa_head_dq)
FHK = 'src/attn/mta_cuda_fa_heads_dkdv.cuh'  # their dK, dV (k_fa_head_dkdv)
FHC = 'src/attn/mta_cuda_fa_heads_cl.cuh'  # the head forward on clusters (k_fa_head_cl_forward)
FHD = 'src/attn/mta_cuda_fa_heads_cl_dkdv.cuh'  # their dK, dV on clusters (k_fa_head_cl_dkdv)
FHQC = 'src/attn/mta_cuda_fa_heads_cl_dq.cuh'  # their dQ on clusters (k_fa_head_cl_dq)
FC = 'src/attn/mta_cuda_fa_conv.cuh'  # the pre-softmax convolution's k_fa_conv_ kernels (band MMAs)
FCB = 'src/attn/mta_cuda_fa_conv_bwd.cuh'  # its backward on band MMAs (k_fa_conv_dkdv, k_fa_conv_dq)
FP = 'src/attn/mta_cuda_fa_post.cuh'  # the post-softmax convolution's k_fa_post_ kernels (band MMAs)
FE = 'src/attn/mta_cuda_fa_every.cuh'  # the every-step kernels (k_fa_every_*: planes of every head)
FEB = 'src/attn/mta_cuda_fa_every_bwd.cuh'  # their backward (k_fa_every_D, _dq, _dkdv, _dqkv)
LAG = 'src/attn/lag.h'  # the backward's lag schedule, the CUDA and fused backends'
EMU, PTXK = 'src/attn/cuda_emu/cuda_emu.cpp', 'tests/cuda_emu_ptx.cuh'  # the emulator; its test's kernels
BACKENDS, EMU_TEST = ('test_attn_backends', 'cuda-emu'), ('test_cuda_emu',)  # (target, arguments)
# The emulator's schedule 3, in which a warp released by a warp operation runs on to its next block
# barrier before the other warps run (cuda_emu_ctl.h): a warp gets whole tiles ahead of the others.
RUN_AHEAD = ('test_attn_backends', 'cuda-emu', '--schedule', '3')
END_OF_TILE = '        __syncthreads();  // before the next tile\'s copies overwrite this one\n'

# (what, file, the text, what it becomes[, the test program that must catch it: default BACKENDS])
MUTATIONS = [
    ('ring one row short (off by one in the ring capacity)', CU,
     'const int cap = (R + L + R - 1) / R * R;', 'const int cap = L ? (R + L - 1 + R - 1) / R * R : R;'),
    ('ring slot off by one on the convolution\'s writes', CUH,
     '    vrow(dst, bh, i)[j] = s;\n}\n\n// The transposed', '    vrow(dst, bh, i + 1)[j] = s;\n}\n\n// The transposed'),
    ('barrier removed in block_reduce\'s loop', CUH,
     '        if (t < s) sh[t] = op(sh[t], sh[t + s]);\n        __syncthreads();',
     '        if (t < s) sh[t] = op(sh[t], sh[t + s]);'),
    ('barrier removed after block_reduce\'s result', CUH, '    F r = sh[0];\n    __syncthreads();', '    F r = sh[0];'),
    ('barrier removed before block_reduce\'s loop', CUH, '    sh[t] = x;\n    __syncthreads();', '    sh[t] = x;'),
    ('strip edge: the backward\'s rows B one short', LAG,
     's.B = mta_rows_clip(b0 > 0 ? b0 : 0, i1 - g.L1, g.T);', 's.B = mta_rows_clip(b0 > 0 ? b0 : 0, i1 - g.L1 - 1, g.T);'),
    ('strip edge: the forward\'s last row skipped', CU,
     'const int i1 = imin(T, i0 + R), n = i1 - i0;', 'const int i1 = imin(T - 1, i0 + R), n = i1 - i0;'),
    ('strip edge: the convolution skips the diagonal', CUH,
     'bh = blockIdx.z;\n    if (j > i) return;\n    const float *wh', 'bh = blockIdx.z;\n    if (j >= i) return;\n    const float *wh'),
    ('wrong head in the mixing (its matrix transposed)', CUH,
     'const float mv = m[h * H + h2];', 'const float mv = m[h2 * H + h];'),
    ('wrong head in the head convolution\'s matrix', CU,
     'hc = w_hc[((size_t)g * ch + i % ch) * ch + o % ch];', 'hc = w_hc[((size_t)g * ch + o % ch) * ch + i % ch];'),
    ('the reduction reads past the half that was written', CUH,
     'for (int s = blockDim.x / 2; s > 0; s >>= 1) {', 'for (int s = blockDim.x; s > 0; s >>= 1) {'),
    ('a refused cudaMalloc\'s error left behind', CU,
     '        cudaGetLastError();  // a refused allocation is reported here, not by the next call\'s check\n', ''),
    ('the backward\'s dropout mask from another entry', CUH,
     'mta_dropout_keep(seed, ((size_t)bh * T + i) * (size_t)T + j, drop_thr)',
     'mta_dropout_keep(seed, ((size_t)bh * T + i) * (size_t)T + j + (src.p == dst.p), drop_thr)'),
    ('the forward never writes out (P v skipped)', CU,
     '        gemm_kv(&cl, MM_NN, n, d, i1, 1.0f, map_in(st->pd, i0), kv_in(v, d, Td), 0.0f,',
     '        if (0) gemm_kv(&cl, MM_NN, n, d, i1, 1.0f, map_in(st->pd, i0), kv_in(v, d, Td), 0.0f,'),
    ('the parameter gradients never summed', CU, '        if (g->w[x.param] && count)', '        if (0 && g->w[x.param] && count)'),
    # the tensor-core path (precision MTA_BF16)
    ('tensor cores: the dropout mask of another entry', TC,
     'mta_dropout_keep(a.seed, ((size_t)bh * a.T + i) * (size_t)a.T + j, a.drop_thr)',
     'mta_dropout_keep(a.seed, ((size_t)bh * a.T + i) * (size_t)a.T + j + 1, a.drop_thr)'),
    # the emulator's primitives (mma.sync, ldmatrix, cp.async, shuffles), each lane's registers
    ('emulator: mma.sync\'s A fragment registers 1 and 2 swapped', EMU,
     'm->vals[4 * (r % 8) + k % 8 / 2][r / 8 + 2 * (k / 8)]', 'm->vals[4 * (r % 8) + k % 8 / 2][2 * (r / 8) + k / 8]', EMU_TEST),
    ('emulator: mma.sync\'s B fragment from the wrong lane', EMU,
     'm->vals[4 * n + k % 8 / 2][4 + k / 8]', 'm->vals[4 * (k % 8 / 2) + n % 4][4 + k / 8]', EMU_TEST),
    ('emulator: ldmatrix .trans gives the untransposed matrix', EMU,
     'r[j] = trans ? row_elem', 'r[j] = 0 ? row_elem', EMU_TEST),
    ('emulator: ldmatrix\'s halves swapped', EMU,
     ': row_elem(rows[g], 2 * t) | row_elem(rows[g], 2 * t + 1) << 16;',
     ': row_elem(rows[g], 2 * t + 1) | row_elem(rows[g], 2 * t) << 16;', EMU_TEST),
    ('emulator: cp.async\'s destination not poisoned at the issue', EMU,
     '    memset(dst, 0xff, bytes);  // NaN until', '    // memset(dst, 0xff, bytes);  // NaN until', EMU_TEST),
    ('emulator: cp.async.wait_group completes every group', EMU,
     'if (f->copies[i].group < below) complete_copy', 'if (1) complete_copy', EMU_TEST),
    ('emulator: a thread may exit with cp.async copies pending', EMU,
     '    if (f->ncopies)\n        fatal(', '    if (0)\n        fatal(', EMU_TEST),
    ('emulator: a shuffle may read a lane outside its mask', EMU,
     'if (!(mask >> src & 1)) lane_fatal', 'if (0) lane_fatal', EMU_TEST),
    # the four kernel-level bugs of issue 46, in test_cuda_emu's product chain on the primitives
    ('primitives: wrong ldmatrix row address', PTXK,
     'ldsm_x4(fa.x, as + (16 * w + l % 16) * PC_LDA', 'ldsm_x4(fa.x, as + (16 * w + l % 8) * PC_LDA', EMU_TEST),
    ('primitives: missing wait group', PTXK,
     '    cp_async_commit();\n    cp_async_wait<0>();\n    __syncthreads();', '    cp_async_commit();\n    __syncthreads();',
     EMU_TEST),
    ('primitives: swizzle off by one (the reader\'s)', PTXK,
     'ldsm_x2(fb.x, bs + n * PC_K + 8 * (c8 / 8 * 8 + pc_swizzle(n, c8 % 8)))',
     'ldsm_x2(fb.x, bs + n * PC_K + 8 * (c8 / 8 * 8 + pc_swizzle(n + 1, c8 % 8)))', EMU_TEST),
    ('primitives: wrong MMA fragment order (A\'s matrices 1 and 2 swapped)', PTXK,
     '(16 * w + l % 16) * PC_LDA + k0 + 8 * (l / 16));', '(16 * w + l % 8 + 8 * (l / 16)) * PC_LDA + k0 + 8 * (l / 8 % 2));',
     EMU_TEST),
    # the tensor-core path's FlashAttention-2 kernels (k_fa_*, mta_cuda_fa2.cuh): run with --only test_bf16_tensor_cores
    ('tensor cores: barrier removed after the cp.async wait (other threads\' copies read early)', FA,
     '    cp_async_wait<1>();  // this thread\'s copies of tile jt are done,\n    __syncthreads();     // and every thread\'s\n',
     '    cp_async_wait<1>();  // this thread\'s copies of tile jt are done,\n'),
    ('tensor cores: a wrong ldmatrix row address (.trans rows l % 8)', FA,
     'yl = y + (l % 16) * ld + 8 * (l / 16);', 'yl = y + (l % 8) * ld + 8 * (l / 16);'),
    ('tensor cores: the cp.async wait group missing (forward, dQ)', FA,
     '    cp_async_wait<1>();  // this thread\'s copies of tile jt are done,\n', ''),
    ('tensor cores: the tiles\' padding off by one 16-byte segment in the loader', FA,
     'fa_load_cols(tile, fa_ld(dp), slab, r0, n, T, dp, 0, dp, nt);',
     'fa_load_cols(tile, fa_ld(dp) - FA_PAD, slab, r0, n, T, dp, 0, dp, nt);'),
    ('tensor cores: the A fragment\'s a[1] and a[2] swapped (C to A)', FA,
     'a.x[1] = pack_bf16x2(c[0].x[2], c[0].x[3]);  // row g+8\n    a.x[2] = pack_bf16x2(c[1].x[0], c[1].x[1]);',
     'a.x[2] = pack_bf16x2(c[0].x[2], c[0].x[3]);  // row g+8\n    a.x[1] = pack_bf16x2(c[1].x[0], c[1].x[1]);'),
    ('tensor cores: the k_fa_ kernels keep a key before its document start', FA,
     'return i < T && j <= i && j >= st;', 'return i < T && j <= i;'),
    # the end-of-tile barrier removed: a warp's copies of the tile after next overwrite the buffer
    # another warp still reads; only warps running ahead (RUN_AHEAD) show it
    ('tensor cores: the end-of-tile barrier removed (k_fa_forward)', FA,
     'fa_fwd_tile(a, bh, jt, f, s, vs, ld);\n' + END_OF_TILE, 'fa_fwd_tile(a, bh, jt, f, s, vs, ld);\n', RUN_AHEAD),
    ('tensor cores: the end-of-tile barrier removed (k_fa_dq)', FA,
     'fa_acc<DP>(acc, fa_a_of(s), ks + 16 * kc * ld, ld, dp);\n        }\n' + END_OF_TILE,
     'fa_acc<DP>(acc, fa_a_of(s), ks + 16 * kc * ld, ld, dp);\n        }\n', RUN_AHEAD),
    ('tensor cores: the end-of-tile barrier removed (k_fa_dkdv)', FA,
     'rows[buf], dks, dvs);\n' + END_OF_TILE, 'rows[buf], dks, dvs);\n', RUN_AHEAD),
    # k_fa_head_forward (mta_cuda_fa_heads.cuh): run with --only test_bf16_tensor_cores
    ('tensor cores: the head mixing\'s matrix transposed in its B fragment', FH,
     'return hd.mix ? hd.w1[out * a.H + in]', 'return hd.mix ? hd.w1[in * a.H + out]'),
    ('tensor cores: the mixing\'s B fragment with its matrices 1 and 2 swapped (ldmatrix row address)', FH,
     '(16 * nb + l % 8 + 8 * (l / 16)) * ld', '(16 * nb + l % 8 + 8 * (l / 8 % 2)) * ld'),
    ('tensor cores: the mixing\'s second k step reads the first\'s heads (groups of 17-32)', FH,
     '* ld + 16 * ks + 8 * (l / 8 % 2));', '* ld + 8 * (l / 8 % 2));'),
    ('tensor cores: the 16-key tiles\' Q K^T reads one 8-column block twice (groups of 17-32)', FH,
     '*yl = y + (l % 8) * ld + 8 * (l / 8 % 2);', '*yl = y + (l % 8) * ld;'),
    ('tensor cores: the mixings\' hi x hi product dropped', FH,
     '        mma_16816(c[n], ah, bh[n]);\n', ''),
    ('tensor cores: S1\'s swizzle off (ldmatrix reads the unswizzled half)', FH,
     'at = fh_s1_at<NQ>(e, 16 * ks + 8 * (l / 16));', 'at = e * 16 * NQ + 16 * ks + 8 * (l / 16);'),
    ('tensor cores: the head forward\'s O not rescaled by alpha', FH,
     '*y = (alpha ? *y * alpha[row] : *y)', '*y = *y'),
    ('tensor cores: dQ\'s transposed mixing reads W1 untransposed', FHQ,
     'fh_mixmat<NQ, 1>(ds1, hi, lo, k.f.w, 1);', 'fh_mixmat<NQ, 1>(ds1, hi, lo, k.f.w, 0);'),
    ('tensor cores: dQ\'s D summed over 4 of a row\'s 8 lanes', FHQ,
     'sum = fa_row_reduce<4, 16>(sum, 1);', 'sum = fa_row_reduce<4, 8>(sum, 1);'),
    ('tensor cores: the kernel gradient\'s transposed A fragment with its matrices 1 and 2 swapped', FHQ,
     'ea = 16 * kc + l % 8 + 8 * (l / 16)', 'ea = 16 * kc + l % 16'),
    ('tensor cores: dK, dV\'s transposed A fragment with its matrices 1 and 2 swapped', FH,
     'ldsm_x4_t(pa.x, x_at(l % 8 + 8 * (l / 16), 8 * (l / 8 % 2)))', 'ldsm_x4_t(pa.x, x_at(l % 16, 8 * (l / 16)))'),
    ('tensor cores: dK, dV\'s walk stops a query tile short', FHK,
     'while (wk.last + FH_M < a.T', 'while (wk.last + 2 * FH_M < a.T'),
    ('tensor cores: the head kernels\' end-of-stage barrier removed (k_fa_head_*)', FH,
     '        step(cur, s.stage + (n & 1) * s.sbuf);\n        __syncthreads();  // before the next stage\'s copies overwrite this buffer\n',
     '        step(cur, s.stage + (n & 1) * s.sbuf);\n', RUN_AHEAD),
    # k_fa_head_cl_forward (mta_cuda_fa_heads_cl.cuh, groups of up to 16 heads): --only test_bf16_tensor_cores
    ('tensor cores: the cluster barrier after the S1 exchange removed (k_fa_head_cl_forward)', FHC,
     '    fhc_share(k, hi, lo);\n    cl_sync();  // and every block\'s\n', '    fhc_share(k, hi, lo);\n'),
    ('tensor cores: the S1 exchange stores to the wrong rank (k_fa_head_cl_forward)', FHC,
     'cl_st16(cl_map(src, (k.r + q) % k.C),', 'cl_st16(cl_map(src, (k.r + q + 1) % k.C),'),
    ('tensor cores: the S1 arrays single-buffered (k_fa_head_cl_forward; a block lagging reads the next tile\'s)', FHC,
     '    const int par = k.x++ & 1;\n', '    const int par = 0 * (k.x++ & 1);\n', RUN_AHEAD),
    ('tensor cores: the barrier after the zeroing removed (k_fa_head_cl_forward; a late block zeroes S1)', FHC,
     '    cl_sync();  // every block\'s arrays are zeroed before any block writes into them\n', '', RUN_AHEAD),
    # the pre-softmax convolution's band MMAs (k_fa_conv_*, mta_cuda_fa_conv.cuh): --only test_bf16_tensor_cores
    ('tensor cores: the convolution\'s band shifted by one key', FC,
     'c = e % g.bw - 8 - e / g.bw % 8 - sh;', 'c = e % g.bw - 7 - e / g.bw % 8 - sh;'),
    ('tensor cores: the convolution\'s halo rows one row off', FC,
     'const int zl = (r0 + a + l % 16) * x.ld', 'const int zl = (r0 + a + 1 + l % 16) * x.ld'),
    ('tensor cores: the convolution\'s key halo not loaded (k from the tile\'s first key)', FC,
     'fa_load_rows(ks, a.k + slab, jt * TC_N - g.p, g.kz, a.T, a.dp);', 'fa_load_rows(ks, a.k + slab, jt * TC_N, g.kz, a.T, a.dp);'),
    ('tensor cores: the convolution reads Z rows of an earlier document', FC,
     '            fc_keep(hi, k0, k1);\n            fc_keep(lo, k0, k1);\n', ''),
    ('tensor cores: the convolution\'s Z without its lo part (one bf16 rounding)', FC,
     '                if (LO) mma_16816(s[nt], lo, bb);\n', ''),
    ('tensor cores: the barrier after Z removed (k_fa_conv_forward reads other warps\' halo rows early)', FC,
     '        __syncthreads();  // Z\'s halo rows come from other warps; k is no longer read\n', '', RUN_AHEAD),
    ('tensor cores: the convolution\'s transposed band (dZ) shifted by one key', FCB,
     'fc_band(g, w_pre + (size_t)h * g.cq * g.ck, 1, g.sh, sh + at.bandT);',
     'fc_band(g, w_pre + (size_t)h * g.cq * g.ck, 1, g.sh + 1, sh + at.bandT);'),
    ('tensor cores: dK/dV\'s transposed dZ and P2 fragments with their matrices 1 and 2 swapped', FCB,
     'const int at = (16 * ks + l % 8 + 8 * (l / 16)) * FCB_P2LD + 16 * w + 8 * (l / 8 % 2);',
     'const int at = (16 * ks + l % 16) * FCB_P2LD + 16 * w + 8 * (l / 16);'),
    ('tensor cores: the convolution\'s dS1 halo rows (below the tile) not computed', FCB,
     '    const int nf = g.sr / 16 * cc;\n', '    const int nf = TC_M / 16 * cc;\n'),
    ('tensor cores: the convolution\'s kernel gradient one diagonal off', FCB,
     'const int c = jj + l - off;', 'const int c = jj + l + 1 - off;'),
    # the post-softmax convolution (k_fa_post_*, mta_cuda_fa_post.cuh): --only test_bf16_tensor_cores
    ('tensor cores: the post-softmax convolution\'s dP by the kernel unflipped (not the transposed band)', FP,
     'fc_band(g, w + (size_t)h * g.cq * g.ck, 1, g.sh, sh + at.band);',
     'fc_band(g, w + (size_t)h * g.cq * g.ck, 0, g.sh, sh + at.band);'),
    ('tensor cores: the post-softmax convolution\'s D left as rowsum(dO O) for dK, dV', FP,
     '            if (i[r] < a.T && threadIdx.x % 4 == 0) a.D[(size_t)bh * a.T + i[r]] = D[r];\n', ''),
    ('tensor cores: the post-softmax convolution\'s dP reads dP1 rows of a later document', FP,
     'std_[r] = i < a.T ? mta_row_start(a.ds, a.T, b, i) : -1;', 'std_[r] = i < a.T ? 0 : -1;'),
    # the every-step kernels (k_fa_every_*, mta_cuda_fa_every.cuh): --only test_bf16_tensor_cores
    ('tensor cores: the every-step head mixing\'s ldmatrix with heads and columns swapped', FE,
     'at = fe_at(r, 8 * (m / 2) + l % 8, row, c + 8 * (m % 2));', 'at = fe_at(r, 8 * (m % 2) + l % 8, row, c + 8 * (m / 2));'),
    ('tensor cores: the every-step post-softmax convolution reads P rows of another document', FE,
     'f.s.ld, tc_up16(f.s.cols), m.st + f.q1,', 'f.s.ld, tc_up16(f.s.cols), m.st,'),
    ('tensor cores: the barrier after the every-step Z removed (its halo rows read early)', FE,
     "            __syncthreads();  // Z's halo rows come from other warps; the band from every thread\n", ''),
    ('tensor cores: the every-step kernels\' end-of-step barrier removed (fe_steps)', FE,
     "        body(n, buf0 + (n & 1) * size);\n        __syncthreads();  // before the next step's copies overwrite this buffer\n",
     "        body(n, buf0 + (n & 1) * size);\n", RUN_AHEAD),
    ('tensor cores: the every-step backward\'s dS2 without D (P dP)', FEB,
     'return p(row, col) * (x - Dh[row]); });', 'return p(row, col) * x; });'),
    ('tensor cores: the every-step kernel gradients read rows of another document', FEB,
     '        fcb_keep_k(ah, so, sx + a);\n        fcb_keep_k(al, so, sx + a);\n', ''),
    ('tensor cores: the every-step backward\'s barrier before dS1 overwrites dS2 removed', FEB,
     '    __syncthreads();  // dS2 is read before the mixing overwrites it\n', '', RUN_AHEAD),
    # k_fa_every_dqkv (without determinism): --only test_bf16_atomic_kv
    ('tensor cores: the diagonal tile pair\'s dk term not added (k_fa_every_dqkv)', FEB,
     '        if (dkp) feb_kv_acc(a, k, at,', '        if (dkp && k.i0 != k.j0) feb_kv_acc(a, k, at,'),
    ('tensor cores: P2\'s padding heads left over the stage (k_fa_every_dqkv; 0 * NaN in the mixing)', FEB,
     '    fe_zero_pad(fe_planes{k.s.c_hi, k.s.c_lo, c}, k.hd.G);\n', ''),
    # k_fa_every_dkdv's chunks of key-tile pairs: --only test_bf16_kv_chunks
    ('tensor cores: a chunk\'s mirror tiles one tile off (kv_tile)', TC,
     't = x < s.pc ? r : s.nt - 1 - r;', 't = x < s.pc ? r : s.nt - 2 - r;'),
    ('tensor cores: a chunk slot\'s rows not offset in dK, dV (k_fa_every_dkdv)', FEB,
     'k.kv_row0 = k.j0 - (int)blockIdx.x * FE_N;', 'k.kv_row0 = k.j0;'),
    # k_fa_head_cl_dkdv (mta_cuda_fa_heads_cl_dkdv.cuh, groups of 9-16 heads): --only test_bf16_tensor_cores
    ('tensor cores: the cluster barrier after the S1, dP2 exchange removed (k_fa_head_cl_dkdv)', FHD,
     '    fhd_share(k, k.s.x1, 3);\n    cl_sync();  // and every block\'s\n', '    fhd_share(k, k.s.x1, 3);\n'),
    ('tensor cores: the dK, dV exchanges store to the wrong rank (k_fa_head_cl_dkdv)', FHD,
     'cl_st16(cl_map(src, (k.r + q) % k.C)', 'cl_st16(cl_map(src, (k.r + q + 1) % k.C)'),
    ('tensor cores: the barrier after the zeroing removed (k_fa_head_cl_dkdv; a late block zeroes X1, X2)', FHD,
     '    cl_sync();  // every block\'s arrays are zeroed before any block writes into them\n', '', RUN_AHEAD),
    # its sums of each kv head's query heads (fhd_finish_kv): --only test_bf16_gqa_sums
    ('tensor cores: a kv head\'s query heads summed in reverse order (k_fa_head_cl_dkdv)', FHD,
     'for (int u = 0, h = m * rep; u < rep; u++, h++)', 'for (int u = 0, h = m * rep + rep - 1; u < rep; u++, h--)'),
    ('tensor cores: the barrier before the staged dK, dV are summed removed (k_fa_head_cl_dkdv)', FHD,
     '    __syncthreads();  // every warp\'s tiles are staged\n', '', RUN_AHEAD),
    # k_fa_head_cl_dq (mta_cuda_fa_heads_cl_dq.cuh, groups of up to 16 heads): --only test_bf16_tensor_cores
    ('tensor cores: the cluster barrier after the dS2 exchange removed (k_fa_head_cl_dq)', FHQC,
     '    fhd_share(k, k.s.x2, 2);\n    cl_sync();  // X2: every block\'s dS2\n', '    fhd_share(k, k.s.x2, 2);\n'),
    ('tensor cores: the kernel gradient partial\'s entries written by the wrong rank (k_fa_head_cl_dq)', FHQC,
     'if (own / FHC_HB != k.r) continue;', 'if (own / FHC_HB != (k.r + 1) % k.C) continue;'),
    ('tensor cores: the S1, dP2 arrays single-buffered (k_fa_head_cl_dq; a block lagging reads the next tile\'s)', FHQC,
     '    bf16 *const x1 = k.s.x1 + (k.x++ & 1) * 3 * FHD_ARR;\n', '    bf16 *const x1 = k.s.x1 + 0 * (k.x++ & 1) * 3 * FHD_ARR;\n',
     RUN_AHEAD),
    ('tensor cores: P stored over the row\'s S1 before the kernel gradients read it (k_fa_head_cl_dq)', FHQC,
     '        fqc_wgrad(hd, k, x1, q, p);\n',
     '        if (hd.ch) fhd_put(k, x1, x1 + FHD_ARR, q, p);\n        fqc_wgrad(hd, k, x1, q, p);\n'),
]


def build(build_dir, target='test_attn_backends'):
    r = subprocess.run(['cmake', '--build', build_dir, '-j2', '--target', target],
                       capture_output=True, text=True)
    return r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('n', nargs='*', type=int, help='the mutations to run (default: all)')
    ap.add_argument('--build', default='build', help='a build made with -DMTAC_CUDA_EMU=ON (default build)')
    ap.add_argument('--list', action='store_true', help='list the mutations and exit')
    ap.add_argument('--timeout', type=int, default=300, help='seconds a test run may take (default 300)')
    ap.add_argument('--check', action='store_true', help='check that every mutation\'s text is in its file once')
    ap.add_argument('--only', help='run only the tests whose names match (test_attn_backends --only, e.g. '
                    'test_bf16_tensor_cores for the tensor-core mutations)')
    args = ap.parse_args()
    if args.list:
        for k, m in enumerate(MUTATIONS):
            print(k, m[0])
        return 0
    os.chdir(ROOT)
    if args.check:
        stale = [f'{k} ({m[0]}): found {open(m[1]).read().count(m[2])} times in {m[1]}'
                 for k, m in enumerate(MUTATIONS) if open(m[1]).read().count(m[2]) != 1]
        for line in stale:
            print('mutate_cuda: mutation ' + line + ', not once; update this script')
        print(f'mutate_cuda: {len(MUTATIONS) - len(stale)} of {len(MUTATIONS)} mutation texts found once')
        return 1 if stale else 0
    if not os.path.isfile(os.path.join(args.build, 'CMakeCache.txt')):
        sys.exit(f'mutate_cuda: {args.build} is not a build directory (cmake -S . -B {args.build} -DMTAC_CUDA_EMU=ON)')
    chosen = args.n or range(len(MUTATIONS))
    if any(not 0 <= k < len(MUTATIONS) for k in chosen):
        sys.exit(f'mutate_cuda: mutations are 0 to {len(MUTATIONS) - 1} (--list)')
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the finally below restores the source
    env = dict(os.environ, OMP_WAIT_POLICY='passive')
    missed = 0
    for k in chosen:
        what, path, old, new = MUTATIONS[k][:4]
        test = MUTATIONS[k][4] if len(MUTATIONS[k]) > 4 else BACKENDS
        src = open(path).read()
        if src.count(old) != 1:
            sys.exit(f'mutate_cuda: mutation {k} ({what}): its text is not in {path} once; update this script')
        try:
            open(path, 'w').write(src.replace(old, new))
            ok, log = build(args.build, test[0])
            if not ok:
                print(f'{k} {what}: the build failed\n{log}', flush=True)
                missed += 1
                continue
            t0 = time.time()
            try:
                only = ['--only', args.only] if args.only and test[0] == BACKENDS[0] else []
                r = subprocess.run([os.path.join(args.build, test[0]), *test[1:], *only], capture_output=True,
                                   text=True, env=env, timeout=args.timeout)
                failed = [l.split('] ')[1] for l in r.stdout.splitlines() if l.startswith('[  FAILED  ] test_')]
                verdict = 'MISSED' if r.returncode == 0 else 'caught by ' + ', '.join(failed or [f'exit {r.returncode}'])
            except subprocess.TimeoutExpired:
                verdict = f'caught: the tests did not finish in {args.timeout} s'
            print(f'{k} {what}: {verdict} ({time.time() - t0:.0f} s)', flush=True)
            missed += verdict == 'MISSED'
        finally:
            open(path, 'w').write(src)
    for target in sorted({(MUTATIONS[k][4] if len(MUTATIONS[k]) > 4 else BACKENDS)[0] for k in chosen}):
        build(args.build, target)
    print(f'mutate_cuda: {len(chosen) - missed} of {len(chosen)} mutations caught')
    return 1 if missed else 0


if __name__ == '__main__':
    sys.exit(main())
