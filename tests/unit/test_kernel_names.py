"""A kernel's own name out of a demangled signature (launchgap.trace.kernel_own_name / kernel_base_name)."""
from __future__ import annotations

import pytest

from launchgap.trace import kernel_base_name, kernel_own_name

GEMV = ("std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, __nv_bfloat16, float, "
        "cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<__nv_bfloat16 const>, float> >"
        "(cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<__nv_bfloat16 const>, float>)")
NORM = ("std::enable_if<(((8)>(0)))&&vllm::_typeConvert<c10::BFloat16>::exists, void>::type "
        "vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, long, c10::BFloat16 const*, float, int)")


@pytest.mark.parametrize(("name", "own", "base"), [
    # the return type may hold parentheses, spaces and comparisons: the cut is at the trailing (...) and the last
    # space outside brackets
    (GEMV, "internal::gemvx::kernel<int, int, __nv_bfloat16, float, cublasGemvParamsEx<int, "
           "cublasGemvTensorStridedBatched<__nv_bfloat16 const>, float> >", "internal::gemvx::kernel"),
    (NORM, "vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>", "vllm::fused_add_rms_norm_kernel"),
    ("void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, (vllm::Fp8KVCacheDataType)0>(__nv_bfloat16 const*, "
     "long)", "vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, (vllm::Fp8KVCacheDataType)0>",
     "vllm::reshape_and_cache_flash_kernel"),
    ("void at::native::(anonymous namespace)::softmax_warp_forward<float>(float*, int)",
     "at::native::softmax_warp_forward<float>", "at::native::softmax_warp_forward"),
    # no signature (cuBLAS's own kernels, Triton, mangled ROCm names): as they are
    ("nvjet_sm90_tst_128x8_64x12_2x1_v_bz_TNT", "nvjet_sm90_tst_128x8_64x12_2x1_v_bz_TNT",
     "nvjet_sm90_tst_128x8_64x12_2x1_v_bz_TNT"),
    ("_ZN5aiter24add_rmsnorm_quant_kernelIDF16bDF16bLi256E", "_ZN5aiter24add_rmsnorm_quant_kernelIDF16bDF16bLi256E",
     "_ZN5aiter24add_rmsnorm_quant_kernelIDF16bDF16bLi256E"),
    ("void k<a->b>(x)", "k<a->b>", "k"),
    # a parameter list that does not balance: left as it is; a name cut short keeps what it has
    ("x)", "x)", "x)"),
    ("void foo<(a>b)>(int", "foo<(a>b)>(int", "foo"),
    ("", "", ""),
])
def test_kernel_own_and_base_name(name: str, own: str, base: str) -> None:
    assert kernel_own_name(name) == own
    assert kernel_base_name(name) == base
