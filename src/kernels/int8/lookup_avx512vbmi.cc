// The 256-entry table lookups with AVX512_VBMI. Bytes: vpermi2b picks from 128 table bytes (two
// registers) by the low 7 index bits; two of them cover the table and the index's top
// bit chooses between their results. 64 lookups per ~4 instructions.
//
// Four-byte entries: the same byte lookup on each of the table's four byte planes gives
// 64 elements' bytes k, which two rounds of in-lane unpacks (8-bit, then 16-bit)
// interleave into 4 x 16 elements. The unpacks take each 128-bit lane's bytes in
// groups of four, so the indices are first permuted so that the groups come out in
// element order. ~27 instructions per 64 lookups (gathers and 8 x vpermi2d over 32-entry
// pieces measured slower than the scalar loop on Zen 4).
#include <immintrin.h>

#include "kernels/int8/lookup.h"

namespace octet {

void LookupBytesAvx512Vbmi(const uint8_t* x, int64_t n, uint8_t index_offset, const uint8_t* table,
                           uint8_t* y) {
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

void LookupDwordsAvx512Vbmi(const uint8_t* x, int64_t n, uint8_t index_offset,
                            const DwordTable256& table, void* y) {
  __m512i quarter[4][4];  // [plane][64-entry quarter of the table]
  for (int k = 0; k < 4; ++k)
    for (int q = 0; q < 4; ++q) quarter[k][q] = _mm512_load_si512(table.planes[k] + 64 * q);
  // Byte 16l + 4g + j of the permuted indices is element 16g + 4l + j (lane l, group g):
  // the unpacks then put group g of every lane into output vector g, in order.
  const __m512i element_order =
      _mm512_set_epi32(0x3f3e3d3c, 0x2f2e2d2c, 0x1f1e1d1c, 0x0f0e0d0c, 0x3b3a3938, 0x2b2a2928,
                       0x1b1a1918, 0x0b0a0908, 0x37363534, 0x27262524, 0x17161514, 0x07060504,
                       0x33323130, 0x23222120, 0x13121110, 0x03020100);
  const __m512i offset = _mm512_set1_epi8(static_cast<char>(index_offset));
  auto* out = static_cast<uint32_t*>(y);
  for (int64_t i = 0; i < n; i += 64) {
    const int64_t left = n - i;
    const __mmask64 active = left >= 64 ? ~__mmask64{0} : (__mmask64{1} << left) - 1;
    const __m512i index = _mm512_permutexvar_epi8(
        element_order, _mm512_add_epi8(_mm512_maskz_loadu_epi8(active, x + i), offset));
    const __mmask64 upper_half = _mm512_movepi8_mask(index);
    __m512i plane[4];
    for (int k = 0; k < 4; ++k)
      plane[k] = _mm512_mask_blend_epi8(
          upper_half, _mm512_permutex2var_epi8(quarter[k][0], index, quarter[k][1]),
          _mm512_permutex2var_epi8(quarter[k][2], index, quarter[k][3]));
    const __m512i low01 = _mm512_unpacklo_epi8(plane[0], plane[1]);
    const __m512i high01 = _mm512_unpackhi_epi8(plane[0], plane[1]);
    const __m512i low23 = _mm512_unpacklo_epi8(plane[2], plane[3]);
    const __m512i high23 = _mm512_unpackhi_epi8(plane[2], plane[3]);
    const __m512i group[4] = {
        _mm512_unpacklo_epi16(low01, low23), _mm512_unpackhi_epi16(low01, low23),
        _mm512_unpacklo_epi16(high01, high23), _mm512_unpackhi_epi16(high01, high23)};
    for (int g = 0; g < 4; ++g) {
      const int64_t count = left - 16 * g;
      if (count <= 0) break;
      const __mmask16 lanes =
          count >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << count) - 1);
      _mm512_mask_storeu_epi32(out + i + 16 * g, lanes, group[g]);
    }
  }
}

}  // namespace octet
