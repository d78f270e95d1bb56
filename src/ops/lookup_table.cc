// octet.LookupTable (made by rewrite/qdq_lookup.h): y = table[x] for 8-bit x, where the
// 256-entry table (input 1, any type of 1, 2, 4 or 8 bytes) holds the result of a
// pointwise chain for every value x can take, in index order (uint8 0..255, int8
// -128..127). Attribute min_rank: the output's rank is at least this (the chain's
// constants may have had a higher rank than x).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "core/thread_pool.h"
#include "graph/octet_ops.h"
#include "kernels/int8/lookup.h"
#include "ops/registry.h"

namespace octet {

namespace {

// Elements per parallel task: lookups take well under a nanosecond each, so smaller tasks
// would cost more to hand out than they save.
constexpr int64_t kChunk = 1 << 16;

class LookupTableKernel : public OpKernel {
 public:
  void Run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& table = ctx.input(1);
    OCTET_CHECK(table.numel() == 256, ctx.node().Describe(), ": the table has ", table.numel(),
                " entries; expected 256");
    const int64_t min_rank = ctx.node().GetInt("min_rank", 0);
    Shape shape = x.shape();
    if (static_cast<int64_t>(shape.size()) < min_rank)
      shape.insert(shape.begin(), min_rank - shape.size(), 1);
    Tensor& y = ctx.AllocateUninitializedOutput(0, table.dtype(), shape);
    // int8 -128 is entry 0: adding 128 to the stored byte is the index.
    const uint8_t offset = x.dtype() == DType::kInt8 ? 128 : 0;
    const uint8_t* in = static_cast<const uint8_t*>(x.raw());
    const size_t size = DTypeSize(table.dtype());
    const int64_t n = x.numel();
    ParallelFor(ctx.pool(), (n + kChunk - 1) / kChunk, [&](int64_t begin, int64_t end) {
      const int64_t lo = begin * kChunk;
      LookupTable256(in + lo, std::min(n, end * kChunk) - lo, offset, table.raw(), size,
                     static_cast<uint8_t*>(y.raw()) + lo * size);
    });
  }
};

bool AcceptsLookup(const Node&, const std::vector<DType>& t) {
  if (t.size() != 2 || (t[0] != DType::kInt8 && t[0] != DType::kUInt8)) return false;
  const size_t size = DTypeSize(t[1]);
  return t[1] != DType::kInt4 && t[1] != DType::kUInt4 && t[1] != DType::kString &&
         (size == 1 || size == 2 || size == 4 || size == 8);
}

}  // namespace

void RegisterLookupTableOps(KernelRegistry& r) {
  r.Register({kOctetDomain, kLookupTableOp, 1, 1 << 30, AcceptsLookup,
              [](const Node&, const std::vector<DType>& t) { return std::vector<DType>{t[1]}; },
              [](const KernelInit&) { return std::make_unique<LookupTableKernel>(); }});
}

}  // namespace octet
