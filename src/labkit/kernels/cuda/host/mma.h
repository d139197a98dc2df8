// labkit's CPU stand-in for <mma.h>: the nvcuda::wmma fragment API, carried out on the CPU (labkit.cuda_cpp only).
//
// Each lane of a warp holds num_elements = rows * cols / 32 elements of a fragment (lane l the row-major elements
// l * num_elements ... (l + 1) * num_elements - 1; on a GPU the mapping is opaque, so no correct kernel depends on
// it). load_matrix_sync, store_matrix_sync, mma_sync and fill_fragment are warp-wide: the 32 lanes meet, the call
// is checked (same pointer, leading dimension and layout in every lane; a 256-bit aligned pointer; a leading
// dimension that is a multiple of 16 bytes) and carried out once for the warp. Products are exact in float and
// accumulated in float, as a Tensor Core does with FP16 inputs and an FP32 accumulator (the order differs).
#pragma once
#include "labkit_cuda_host.h"

namespace nvcuda {
namespace wmma {
struct row_major {};
struct col_major {};
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K> struct __lk_dims;
template <int M, int N, int K> struct __lk_dims<matrix_a, M, N, K> { static const int rows = M, cols = K; };
template <int M, int N, int K> struct __lk_dims<matrix_b, M, N, K> { static const int rows = K, cols = N; };
template <int M, int N, int K> struct __lk_dims<accumulator, M, N, K> { static const int rows = M, cols = N; };

template <class L> struct __lk_layout { static const int value = -1; };
template <> struct __lk_layout<row_major> { static const int value = 0; };
template <> struct __lk_layout<col_major> { static const int value = 1; };

template <class Use, int M, int N, int K, class T, class Layout = void>
class fragment {
public:
    static const int rows = __lk_dims<Use, M, N, K>::rows;
    static const int cols = __lk_dims<Use, M, N, K>::cols;
    static_assert(rows * cols % 32 == 0, "a WMMA fragment spreads over the 32 lanes of a warp");
    enum { num_elements = rows * cols / 32, num_storage_elements = rows * cols / 32 };
    typedef T element_type;
    typedef T storage_element_type;
    T x[num_elements];
};

struct __lk_mem_args { void* frag; const void* ptr; unsigned ldm; int layout; };
struct __lk_fill_args { void* frag; double value; };
struct __lk_mma_args { void* d; const void* a; const void* b; const void* c; };

template <class P>
static inline bool __lk_check_mem(const char* name, __lk::WarpCall& c) {
    __lk_mem_args* first = static_cast<__lk_mem_args*>(c.args[0]);
    for (int l = 1; l < 32; ++l) {
        __lk_mem_args* o = static_cast<__lk_mem_args*>(c.args[l]);
        if (o->ptr != first->ptr || o->ldm != first->ldm || o->layout != first->layout) {
            const char* what = o->ptr != first->ptr ? "pointer" : (o->ldm != first->ldm ? "leading dimension" : "layout");
            __lk_fail("wmma::%s: lane %d of warp %d passes a different %s than lane 0; every lane of the warp must pass the same "
                      "pointer, leading dimension and layout (compute them from the warp's tile, not from the lane).",
                      name, l, __lk::cur / 32, what);
            return false;
        }
    }
    if (reinterpret_cast<uintptr_t>(first->ptr) % 32u) {
        __lk_fail("wmma::%s got a pointer that is not 256-bit (32-byte) aligned, as WMMA requires: the tile's offset "
                  "from the start of the matrix is not a multiple of %d elements.", name, (int)(32 / sizeof(P)));
        return false;
    }
    if ((first->ldm * sizeof(P)) % 16u) {
        __lk_fail("wmma::%s: leading dimension %u is not a multiple of %d elements (16 bytes), as WMMA requires.",
                  name, first->ldm, (int)(16 / sizeof(P)));
        return false;
    }
    return true;
}

template <class F, class P>
static void __lk_perform_load(__lk::WarpCall& c) {
    if (!__lk_check_mem<P>("load_matrix_sync", c)) return;
    __lk_mem_args* a0 = static_cast<__lk_mem_args*>(c.args[0]);
    const P* p = static_cast<const P*>(a0->ptr);
    const int ne = F::num_elements;
    for (int e = 0; e < F::rows * F::cols; ++e) {
        int i = e / F::cols, j = e % F::cols;
        size_t off = a0->layout == 0 ? (size_t)i * a0->ldm + j : (size_t)j * a0->ldm + i;
        F* f = static_cast<F*>(static_cast<__lk_mem_args*>(c.args[e / ne])->frag);
        f->x[e % ne] = typename F::element_type((float)p[off]);
    }
}

template <class Use, int M, int N, int K, class T, class L, class P>
static inline void load_matrix_sync(fragment<Use, M, N, K, T, L>& f, const P* p, unsigned ldm) {
    static_assert(__lk_layout<L>::value >= 0, "matrix_a/matrix_b fragments need row_major or col_major");
    __lk_mem_args a{&f, p, ldm, __lk_layout<L>::value};
    __lk_warp_meet("wmma::load_matrix_sync", 0xffffffffu, true, &a,
                   __lk_perform_load<fragment<Use, M, N, K, T, L>, typename std::remove_cv<P>::type>);
}
template <int M, int N, int K, class T, class P>
static inline void load_matrix_sync(fragment<accumulator, M, N, K, T>& f, const P* p, unsigned ldm, layout_t layout) {
    __lk_mem_args a{&f, p, ldm, layout == mem_row_major ? 0 : 1};
    __lk_warp_meet("wmma::load_matrix_sync", 0xffffffffu, true, &a,
                   __lk_perform_load<fragment<accumulator, M, N, K, T>, typename std::remove_cv<P>::type>);
}

template <class F, class P>
static void __lk_perform_store(__lk::WarpCall& c) {
    if (!__lk_check_mem<P>("store_matrix_sync", c)) return;
    __lk_mem_args* a0 = static_cast<__lk_mem_args*>(c.args[0]);
    P* p = const_cast<P*>(static_cast<const P*>(a0->ptr));
    const int ne = F::num_elements;
    for (int e = 0; e < F::rows * F::cols; ++e) {
        int i = e / F::cols, j = e % F::cols;
        size_t off = a0->layout == 0 ? (size_t)i * a0->ldm + j : (size_t)j * a0->ldm + i;
        const F* f = static_cast<const F*>(static_cast<__lk_mem_args*>(c.args[e / ne])->frag);
        p[off] = P((float)f->x[e % ne]);
    }
}
template <int M, int N, int K, class T, class P>
static inline void store_matrix_sync(P* p, const fragment<accumulator, M, N, K, T>& f, unsigned ldm, layout_t layout) {
    __lk_mem_args a{const_cast<fragment<accumulator, M, N, K, T>*>(&f), p, ldm, layout == mem_row_major ? 0 : 1};
    __lk_warp_meet("wmma::store_matrix_sync", 0xffffffffu, true, &a, __lk_perform_store<fragment<accumulator, M, N, K, T>, P>);
}

template <class F>
static void __lk_perform_fill(__lk::WarpCall& c) {
    double v = static_cast<__lk_fill_args*>(c.args[0])->value;
    for (int l = 0; l < 32; ++l) {
        __lk_fill_args* o = static_cast<__lk_fill_args*>(c.args[l]);
        if (!(o->value == v || (o->value != o->value && v != v))) {
            __lk_fail("wmma::fill_fragment: lane %d of warp %d fills with %g, lane 0 with %g; every lane must pass the same value.",
                      l, __lk::cur / 32, o->value, v);
            return;
        }
        F* f = static_cast<F*>(o->frag);
        for (int t = 0; t < F::num_elements; ++t) f->x[t] = typename F::element_type((float)o->value);
    }
}
template <class Use, int M, int N, int K, class T, class L, class V>
static inline void fill_fragment(fragment<Use, M, N, K, T, L>& f, const V& v) {
    __lk_fill_args a{&f, (double)(float)v};
    __lk_warp_meet("wmma::fill_fragment", 0xffffffffu, true, &a, __lk_perform_fill<fragment<Use, M, N, K, T, L>>);
}

template <class FD, class FA, class FB, class FC>
static void __lk_perform_mma(__lk::WarpCall& c) {
    const int M = FA::rows, K = FA::cols, N = FB::cols;
    float A[M * K], B[K * N], C[M * N];
    const int na = FA::num_elements, nb = FB::num_elements, nc = FC::num_elements, nd = FD::num_elements;
    for (int e = 0; e < M * K; ++e) A[e] = (float)static_cast<const FA*>(static_cast<__lk_mma_args*>(c.args[e / na])->a)->x[e % na];
    for (int e = 0; e < K * N; ++e) B[e] = (float)static_cast<const FB*>(static_cast<__lk_mma_args*>(c.args[e / nb])->b)->x[e % nb];
    for (int e = 0; e < M * N; ++e) C[e] = (float)static_cast<const FC*>(static_cast<__lk_mma_args*>(c.args[e / nc])->c)->x[e % nc];
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            float s = C[i * N + j];
            for (int k = 0; k < K; ++k) s += A[i * K + k] * B[k * N + j];
            FD* d = static_cast<FD*>(static_cast<__lk_mma_args*>(c.args[(i * N + j) / nd])->d);
            d->x[(i * N + j) % nd] = typename FD::element_type(s);
        }
}
template <int M, int N, int K, class TD, class TA, class LA, class TB, class LB, class TC>
static inline void mma_sync(fragment<accumulator, M, N, K, TD>& d, const fragment<matrix_a, M, N, K, TA, LA>& a,
                            const fragment<matrix_b, M, N, K, TB, LB>& b, const fragment<accumulator, M, N, K, TC>& c) {
    __lk_mma_args args{&d, &a, &b, &c};
    __lk_warp_meet("wmma::mma_sync", 0xffffffffu, true, &args,
                   __lk_perform_mma<fragment<accumulator, M, N, K, TD>, fragment<matrix_a, M, N, K, TA, LA>,
                                    fragment<matrix_b, M, N, K, TB, LB>, fragment<accumulator, M, N, K, TC>>);
}
}  // namespace wmma
}  // namespace nvcuda
