// 256-entry table lookups over 8-bit data (octet.LookupTable, ops/lookup_table.cc).
#pragma once

#include <cstddef>
#include <cstdint>

namespace octet {

// y[i] = table[uint8(x[i] + index_offset)] for n bytes x and a table of 256 elements of
// element_size bytes (1, 2, 4 or 8). index_offset is 128 for int8 x (entry 0 is -128).
void LookupTable256(const uint8_t* x, int64_t n, uint8_t index_offset, const void* table,
                    size_t element_size, void* y);

// The paths, for tests: the portable loop and the AVX512_VBMI byte kernel (only where
// HasAvx512Vbmi()).
void LookupBytesScalar(const uint8_t* x, int64_t n, uint8_t index_offset, const uint8_t* table,
                       uint8_t* y);
void LookupBytesAvx512Vbmi(const uint8_t* x, int64_t n, uint8_t index_offset, const uint8_t* table,
                           uint8_t* y);

}  // namespace octet
