// The 256-byte table lookup with AVX512_VBMI: vpermi2b picks from 128 table bytes (two
// registers) by the low 7 index bits; two of them cover the table and the index's top
// bit chooses between their results. 64 lookups per ~4 instructions.
#include <immintrin.h>

#include "kernels/int8/lookup.h"

namespace octet {

__attribute__((target("avx512vbmi"))) void LookupBytesAvx512Vbmi(const uint8_t* x, int64_t n,
                                                                 uint8_t index_offset,
                                                                 const uint8_t* table, uint8_t* y) {
  const __m512i t0 = _mm512_loadu_si512(table), t1 = _mm512_loadu_si512(table + 64),
                t2 = _mm512_loadu_si512(table + 128), t3 = _mm512_loadu_si512(table + 192);
  const __m512i offset = _mm512_set1_epi8(static_cast<char>(index_offset));
  for (int64_t i = 0; i < n; i += 64) {
    const __mmask64 active = n - i >= 64 ? ~__mmask64{0} : (__mmask64{1} << (n - i)) - 1;
    const __m512i index = _mm512_add_epi8(_mm512_maskz_loadu_epi8(active, x + i), offset);
    const __m512i low = _mm512_permutex2var_epi8(t0, index, t1);
    const __m512i high = _mm512_permutex2var_epi8(t2, index, t3);
    const __m512i result = _mm512_mask_blend_epi8(_mm512_movepi8_mask(index), low, high);
    _mm512_mask_storeu_epi8(y + i, active, result);
  }
}

}  // namespace octet
