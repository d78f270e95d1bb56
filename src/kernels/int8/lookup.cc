#include "kernels/int8/lookup.h"

#include <bit>
#include <cstring>

#include "core/error.h"
#include "kernels/isa.h"

namespace octet {

namespace {

template <typename T>
void Gather(const uint8_t* x, int64_t n, uint8_t index_offset, const T* table, T* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = table[static_cast<uint8_t>(x[i] + index_offset)];
}

// Four-byte entries, eight indices per 8-byte load: the loop's loads, not its
// arithmetic, bound it.
void GatherDwords(const uint8_t* x, int64_t n, uint8_t index_offset, const uint32_t* table,
                  void* y) {
  static_assert(std::endian::native == std::endian::little, "index k is byte k of the load");
  auto* out = static_cast<uint8_t*>(y);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t indices;
    std::memcpy(&indices, x + i, 8);
    for (int k = 0; k < 8; ++k)
      std::memcpy(out + 4 * (i + k),
                  &table[static_cast<uint8_t>((indices >> (8 * k)) + index_offset)], 4);
  }
  for (; i < n; ++i) std::memcpy(out + 4 * i, &table[static_cast<uint8_t>(x[i] + index_offset)], 4);
}

constexpr int64_t kDwordPlanesMinLength = 1024;

enum class LookupPath { kScalar, kAvx2, kAvx512Vbmi };

// Every x86 vector path has AVX2; AVX512_VBMI runs with kAvx512Vnni only (isa.h).
LookupPath ActiveLookupPath() {
#if defined(__x86_64__) || defined(_M_X64)
  static const LookupPath path = [] {
    const Isa isa = ActiveIsa();
    if (isa == Isa::kAvx512Vnni && HasAvx512Vbmi()) return LookupPath::kAvx512Vbmi;
    return isa == Isa::kScalar ? LookupPath::kScalar : LookupPath::kAvx2;
  }();
  return path;
#else
  return LookupPath::kScalar;
#endif
}

bool UseVbmi() { return ActiveLookupPath() == LookupPath::kAvx512Vbmi; }

}  // namespace

void LookupBytesScalar(const uint8_t* x, int64_t n, uint8_t index_offset, const uint8_t* table,
                       uint8_t* y) {
  Gather(x, n, index_offset, table, y);
}

DwordTable256::DwordTable256(const void* table) {
  std::memcpy(entries, table, sizeof(entries));
  for (int i = 0; i < 256; ++i)
    for (int k = 0; k < 4; ++k) planes[k][i] = static_cast<uint8_t>(entries[i] >> (8 * k));
}

void LookupDwordsScalar(const uint8_t* x, int64_t n, uint8_t index_offset,
                        const DwordTable256& table, void* y) {
  GatherDwords(x, n, index_offset, table.entries, y);
}

void LookupDwords256(const uint8_t* x, int64_t n, uint8_t index_offset, const DwordTable256& table,
                     void* y) {
#if defined(__x86_64__) || defined(_M_X64)
  if (UseVbmi()) return LookupDwordsAvx512Vbmi(x, n, index_offset, table, y);
#endif
  LookupDwordsScalar(x, n, index_offset, table, y);
}

void LookupTable256(const uint8_t* x, int64_t n, uint8_t index_offset, const void* table,
                    size_t element_size, void* y) {
  switch (element_size) {
    case 1: {
      const auto* bytes = static_cast<const uint8_t*>(table);
      auto* out = static_cast<uint8_t*>(y);
#if defined(__x86_64__) || defined(_M_X64)
      switch (ActiveLookupPath()) {
        case LookupPath::kAvx512Vbmi:
          return LookupBytesAvx512Vbmi(x, n, index_offset, bytes, out);
        case LookupPath::kAvx2:
          return LookupBytesAvx2(x, n, index_offset, bytes, out);
        case LookupPath::kScalar:
          break;
      }
#endif
      return LookupBytesScalar(x, n, index_offset, bytes, out);
    }
    case 2:
      return Gather(x, n, index_offset, static_cast<const uint16_t*>(table),
                    static_cast<uint16_t*>(y));
    case 4:
      // Preparing the byte planes costs about as much as a few hundred lookups.
      if (UseVbmi() && n >= kDwordPlanesMinLength)
        return LookupDwords256(x, n, index_offset, DwordTable256(table), y);
      return GatherDwords(x, n, index_offset, static_cast<const uint32_t*>(table), y);
    case 8:
      return Gather(x, n, index_offset, static_cast<const uint64_t*>(table),
                    static_cast<uint64_t*>(y));
  }
  Fail("internal: a lookup table of ", element_size, "-byte elements");
}

}  // namespace octet
