// 256-entry table lookups over 8-bit data (octet.LookupTable, ops/lookup_table.cc).
#pragma once

#include <cstddef>
#include <cstdint>

namespace octet {

// y[i] = table[uint8(x[i] + index_offset)] for n bytes x and a table of 256 elements of
// element_size bytes (1, 2, 4 or 8). index_offset is 128 for int8 x (entry 0 is -128).
void LookupTable256(const uint8_t* x, int64_t n, uint8_t index_offset, const void* table,
                    size_t element_size, void* y);

// A table of 256 four-byte elements (float or int32 bits) prepared for LookupDwords256:
// the entries, and byte k of entry i at planes[k][i] so that byte permutes can look up
// each byte of the result.
struct DwordTable256 {
  explicit DwordTable256(const void* table);  // 256 elements of 4 bytes
  uint32_t entries[256];
  alignas(64) uint8_t planes[4][256];
};

// y[i] = table entry uint8(x[i] + index_offset) for n bytes x; y holds n 4-byte elements.
// Same bits as LookupTable256 with element_size 4, faster where AVX512_VBMI runs.
void LookupDwords256(const uint8_t* x, int64_t n, uint8_t index_offset, const DwordTable256& table,
                     void* y);

// The paths, for tests: the portable loop, the AVX2 byte kernel (only where
// IsaSupported(Isa::kAvx2)) and the AVX512_VBMI one (only where HasAvx512Vbmi()).
void LookupBytesScalar(const uint8_t* x, int64_t n, uint8_t index_offset, const uint8_t* table,
                       uint8_t* y);
void LookupBytesAvx2(const uint8_t* x, int64_t n, uint8_t index_offset, const uint8_t* table,
                     uint8_t* y);
void LookupBytesAvx512Vbmi(const uint8_t* x, int64_t n, uint8_t index_offset, const uint8_t* table,
                           uint8_t* y);
// And the 4-byte lookups: the portable loop and the AVX512_VBMI byte-plane kernel.
void LookupDwordsScalar(const uint8_t* x, int64_t n, uint8_t index_offset,
                        const DwordTable256& table, void* y);
void LookupDwordsAvx512Vbmi(const uint8_t* x, int64_t n, uint8_t index_offset,
                            const DwordTable256& table, void* y);

}  // namespace octet
