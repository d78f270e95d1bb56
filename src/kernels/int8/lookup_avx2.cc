// The 256-entry byte lookup with AVX2. vpshufb looks up 16 entries by an index's low 4 bits
// and gives 0 where the index's top bit is set. Each 128-entry half of the table is 8
// chunks of 16: with j = (index & 0x7f) - 16c for chunk c, vpshufb gives chunk c's entry
// for every c up to the index's chunk and 0 past it (j is negative there). Each chunk is
// stored XOR the previous one, so the XOR of the 8 results telescopes to the index's
// entry. Both halves share the j's, and the index's top bit picks between their results:
// 16 vpshufb per 32 lookups.
#include <immintrin.h>

#include <cstring>

#include "kernels/int8/lookup.h"

namespace octet {

namespace {

constexpr int kChunks = 8;  // per half

__m256i BroadcastChunk(const uint8_t* table, int chunk) {
  return _mm256_broadcastsi128_si256(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(table + 16 * chunk)));
}

// Chunk c of a 128-entry half XOR chunk c - 1 (chunk 0 as it is), in both 128-bit lanes.
void PrefixXorChunks(const uint8_t* half, __m256i (&chunks)[kChunks]) {
  chunks[0] = BroadcastChunk(half, 0);
  for (int c = 1; c < kChunks; ++c)
    chunks[c] = _mm256_xor_si256(BroadcastChunk(half, c), BroadcastChunk(half, c - 1));
}

struct ByteLookup {
  __m256i low[kChunks], high[kChunks];

  __m256i operator()(__m256i index) const {
    const __m256i sixteen = _mm256_set1_epi8(16);
    __m256i j = _mm256_and_si256(index, _mm256_set1_epi8(0x7f));
    __m256i from_low = _mm256_shuffle_epi8(low[0], j), from_high = _mm256_shuffle_epi8(high[0], j);
#pragma GCC unroll 8
    for (int c = 1; c < kChunks; ++c) {
      j = _mm256_sub_epi8(j, sixteen);
      from_low = _mm256_xor_si256(from_low, _mm256_shuffle_epi8(low[c], j));
      from_high = _mm256_xor_si256(from_high, _mm256_shuffle_epi8(high[c], j));
    }
    return _mm256_blendv_epi8(from_low, from_high, index);
  }
};

}  // namespace

void LookupBytesAvx2(const uint8_t* x, int64_t n, uint8_t index_offset, const uint8_t* table,
                     uint8_t* y) {
  ByteLookup lookup;
  PrefixXorChunks(table, lookup.low);
  PrefixXorChunks(table + 128, lookup.high);
  const __m256i offset = _mm256_set1_epi8(static_cast<char>(index_offset));
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i index =
        _mm256_add_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)), offset);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), lookup(index));
  }
  if (i < n) {  // the last partial vector through a buffer: nothing past the span is touched
    const size_t rest = static_cast<size_t>(n - i);
    alignas(32) uint8_t buffer[32] = {};
    std::memcpy(buffer, x + i, rest);
    const __m256i index =
        _mm256_add_epi8(_mm256_load_si256(reinterpret_cast<const __m256i*>(buffer)), offset);
    _mm256_store_si256(reinterpret_cast<__m256i*>(buffer), lookup(index));
    std::memcpy(y + i, buffer, rest);
  }
}

}  // namespace octet
