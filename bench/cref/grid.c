/* The C reference of the benchmark: a Gauss-Seidel frame of an N x N cloth written for
   that grid alone, the practical speed limit for the 200x200 cloth's work on a machine.
   `python main.py bench` compiles it with gcc (-O3 -march=native -fno-math-errno) when
   gcc is present, times it in the same run and under the same load as our kernels, and
   prints our physics time as a multiple of it.

   Layout: planar X and Y, rows and columns each permuted even-then-odd (red-black), so
   every colour batch of links is a set of contiguous slices that gcc vectorises; equal
   masses, row 0 pinned. One frame: a Verlet step, then K passes over the links.
   ops: 7 ints per op (ra0, ca0, rb0, cb0, h, w, exact) and a rest length per op. */
#include <math.h>
#include <stdint.h>
#define CAT2(a,b) a##b
#define CAT(a,b) CAT2(a,b)
#define FN(name) CAT(name, SUFFIX)

void FN(grid_frame)(REAL* X, REAL* Y, REAL* PX, REAL* PY, int N, const int32_t* ops, const REAL* Ls,
                    int nops, int K, REAL damp, REAL gdt2) {
    int n = N * N;
    /* verlet; row 0 (perm row 0) pinned */
    for (int i = N; i < n; i++) {
        REAL x = X[i], y = Y[i];
        REAL vx = (x - PX[i]) * damp, vy = (y - PY[i]) * damp;
        PX[i] = x; PY[i] = y; X[i] = x + vx; Y[i] = y + vy + gdt2;
    }
    for (int it = 0; it < K; it++) {
        for (int o = 0; o < nops; o++) {
            const int32_t* op = ops + 7 * o;
            int ra = op[0], ca = op[1], rb = op[2], cb = op[3], h = op[4], w = op[5], exact = op[6];
            REAL L = Ls[o];
            if (!exact) {
                REAL hL = (REAL)0.5 * L;
                for (int r = 0; r < h; r++) {
                    REAL* xa = X + (ra + r) * N + ca; REAL* ya = Y + (ra + r) * N + ca;
                    REAL* xb = X + (rb + r) * N + cb; REAL* yb = Y + (rb + r) * N + cb;
                    #pragma GCC ivdep
                    for (int c = 0; c < w; c++) {
                        REAL dx = xb[c] - xa[c], dy = yb[c] - ya[c];
                        REAL d = SQRT(dx * dx + dy * dy);
                        REAL s = (REAL)0.5 - hL / d;
                        dx *= s; dy *= s;
                        xa[c] += dx; ya[c] += dy; xb[c] -= dx; yb[c] -= dy;
                    }
                }
            } else {
                for (int r = 0; r < h; r++) {
                    REAL* xa = X + (ra + r) * N + ca; REAL* ya = Y + (ra + r) * N + ca;
                    REAL* xb = X + (rb + r) * N + cb; REAL* yb = Y + (rb + r) * N + cb;
                    #pragma GCC ivdep
                    for (int c = 0; c < w; c++) {
                        REAL dx = xb[c] - xa[c], dy = yb[c] - ya[c];
                        REAL d = SQRT(dx * dx + dy * dy);
                        REAL s = (REAL)1 - L / d;
                        xb[c] -= dx * s; yb[c] -= dy * s;
                    }
                }
            }
        }
    }
}
