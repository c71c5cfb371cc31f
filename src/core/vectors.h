/* GCC's generic vector types for loops over 8 or 16 lanes that the compiler should not have to
 * discover (plain loops over 16 channels compiled to scalar code), with HET_CLONES
 * (core/clones.h) compiling them for AVX-512, AVX2 and SSE2. Element-wise vector operations
 * round as the scalar ones do (no contraction under C11's -ffp-contract=off, no
 * reassociation), so every variant gives the same bits. Loads and stores go through
 * unaligned, aliasing views, as macros: a function returning a vector type would have a
 * different ABI in each clone. Internal header. */
#ifndef HET_CORE_VECTORS_H
#define HET_CORE_VECTORS_H

typedef float het_v8f __attribute__((vector_size(32)));
typedef float het_v16f __attribute__((vector_size(64)));
typedef int het_v16i __attribute__((vector_size(64)));
typedef double het_v8d __attribute__((vector_size(64)));
typedef float het_v8f_u __attribute__((vector_size(32), aligned(4), may_alias));
typedef float het_v16f_u __attribute__((vector_size(64), aligned(4), may_alias));
typedef double het_v8d_u __attribute__((vector_size(64), aligned(8), may_alias));

#define HET_LD8(p) (*(const het_v8f_u *)(p))
#define HET_LD16(p) (*(const het_v16f_u *)(p))
#define HET_ST16(p, v) (*(het_v16f_u *)(p) = (v))
#define HET_ST8D(p, v) (*(het_v8d_u *)(p) = (v))
#define HET_WIDE(v) __builtin_convertvector((v), het_v8d)
/* lanes of a where mask (all bits set or clear, as comparisons give), else those of b */
#define HET_SEL16(mask, a, b) \
    ((het_v16f)(((het_v16i)(a) & (mask)) | ((het_v16i)(b) & ~(mask))))

#endif
