// The kernel registry: (domain, op_type, opset range, input dtypes) -> kernel.
// A kernel object is created once per node at session creation, where it may
// read attributes and constant inputs (and prepack weights); Run is called per
// inference.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "graph/graph.h"
#include "kernels/output_columns.h"

namespace octet {

class ThreadPool;
class WeightArena;
struct KvCacheState;

// What a kernel sees at session creation.
struct KernelInit {
  const Node& node;
  std::vector<DType> input_types;              // kUndefined for omitted optional inputs
  std::vector<const Tensor*> constant_inputs;  // the initializer, or nullptr if not constant
  ThreadPool* pool;
  // Where the kernel keeps what it packs from its constant inputs: the session's
  // (core/weight_arena.h); null (the heap) where the kernel lives outside a session.
  WeightArena* weights = nullptr;
};

// What a kernel sees per run.
class KernelContext {
 public:
  KernelContext(const Node& node, std::vector<const Tensor*> inputs, ThreadPool* pool)
      : node_(node), inputs_(std::move(inputs)), outputs_(node.outputs.size()), pool_(pool) {}

  size_t num_inputs() const { return inputs_.size(); }
  bool has_input(size_t i) const { return i < inputs_.size() && inputs_[i] != nullptr; }
  // Throws when the input is omitted.
  const Tensor& input(size_t i) const;
  size_t num_outputs() const { return outputs_.size(); }
  // Allocates output i (zero-filled) and returns it.
  Tensor& AllocateOutput(size_t i, DType dtype, Shape shape);
  // Allocates output i without zero-filling it: only for kernels that write
  // every element (a product's epilogue, for example).
  Tensor& AllocateUninitializedOutput(size_t i, DType dtype, Shape shape);
  // Sets output i to an existing tensor (e.g. a reshaped view of an input).
  void SetOutput(size_t i, Tensor t);
  // Allocates outputs 0, 1, ... of products run as one, without zero-filling them:
  // output i has `shape` with widths[i] as its last dimension. Returns the ranges that
  // send the product's columns to them (kernels/output_columns.h).
  std::vector<ColumnRange> AllocateColumnOutputs(DType dtype, Shape shape,
                                                 const std::vector<int64_t>& widths);
  // (Outputs past the ones the node lists, trailing optional ones it omits, are made and
  // dropped: a kernel may set every output its operator has.)
  // True when the model consumes output i (optional outputs may be omitted).
  bool output_wanted(size_t i) const { return i < node_.outputs.size() && node_.outputs[i] >= 0; }

  const Node& node() const { return node_; }
  ThreadPool* pool() const { return pool_; }
  std::vector<Tensor>& outputs() { return outputs_; }
  // The KV cache the caller holds across runs (ops/kv_cache.h), or null.
  KvCacheState* kv_cache() const { return kv_cache_; }
  void set_kv_cache(KvCacheState* cache) { kv_cache_ = cache; }

 private:
  const Node& node_;
  std::vector<const Tensor*> inputs_;
  std::vector<Tensor> outputs_;
  std::vector<Tensor> unlisted_outputs_;  // written for outputs the node does not list
  ThreadPool* pool_;
  KvCacheState* kv_cache_ = nullptr;
  Tensor& Slot(size_t i);
};

class OpKernel {
 public:
  virtual ~OpKernel() = default;
  virtual void Run(KernelContext& ctx) = 0;
  // True when Run reads no byte past input i's last one (and keeps no view of
  // it), so a graph input read only by such kernels may be a view of caller
  // memory with nothing after it (TensorInfo::reads_only_own_bytes). Other
  // kernels may read to the end of the 64-byte line after a tensor's last
  // byte (core/tensor.cc). Declare it only for code run on guarded memory in
  // the unit tests (tests/unit/guarded_buffer.h).
  virtual bool ReadsOnlyInputBytes(size_t /*input*/) const { return false; }
  // False when Run never reads constant input i's data: the kernel took what it
  // needs from it at creation (packed weights), so the session frees the data
  // when no other reader needs it. Run then finds the input's dtype and shape
  // there, with no data.
  virtual bool ReadsConstantInRun(size_t /*input*/) const { return true; }
};

struct KernelDef {
  std::string domain;  // normalized (kOnnxDomain / kMsDomain)
  std::string op_type;
  int since_version = 1;
  int end_version = 1 << 30;  // inclusive
  // True when this kernel handles these input dtypes (kUndefined = omitted).
  std::function<bool(const Node&, const std::vector<DType>&)> accepts;
  // Output dtypes for accepted inputs; may throw octet::Error for a bad attribute.
  std::function<std::vector<DType>(const Node&, const std::vector<DType>&)> infer_types;
  std::function<std::unique_ptr<OpKernel>(const KernelInit&)> create;
  // True when the kernel takes its 4-bit inputs in either form, packed nibbles
  // (Tensor::PackedNibbles) or a byte per element, at creation and in Run, keeping no
  // pointer into them past the call; other kernels get packed constants unpacked.
  bool reads_packed_nibbles = false;
};

// Whether a kernel of `def` must be given constant t unpacked (UnpackedNibbles).
inline bool NeedsUnpackedNibbles(const KernelDef& def, const Tensor* t) {
  return t != nullptr && t->packed_nibbles() && !def.reads_packed_nibbles;
}
// Points each of `inputs` that NeedsUnpackedNibbles at its unpacked copy, kept in `unpacked`
// (one slot per input).
void UnpackNibblesFor(const KernelDef& def, std::vector<const Tensor*>& inputs,
                      std::vector<Tensor>& unpacked);

class KernelRegistry {
 public:
  // The registry with every kernel octet has.
  static const KernelRegistry& Global();

  void Register(KernelDef def);
  // The kernel for this node and these input dtypes. Throws octet::Error that
  // names the operator, its domain and opset, and the dtypes when there is none.
  const KernelDef& Find(const Node& node, const std::vector<DType>& input_types) const;
  bool HasOp(const std::string& domain, const std::string& op_type) const;
  // Every registered kernel, in registration order (for `octet list-ops`).
  const std::vector<KernelDef>& defs() const { return defs_; }

 private:
  std::vector<KernelDef> defs_;
};

// KernelDef::infer_types for an operator of one float32 output, and for one whose every
// listed output is float32.
std::vector<DType> FloatOutput(const Node& node, const std::vector<DType>& input_types);
std::vector<DType> FloatOutputs(const Node& node, const std::vector<DType>& input_types);

// Each op family registers itself here; ops/register_all.cc calls them all.
void RegisterQuantizeOps(KernelRegistry& r);       // ops/quantize_linear.cc
void RegisterIntegerMatMulOps(KernelRegistry& r);  // ops/integer_matmul.cc
void RegisterIntegerConvOps(KernelRegistry& r);    // ops/integer_conv.cc
void RegisterFloatOps(KernelRegistry& r);          // ops/float_ops.cc
void RegisterFloatMathOps(KernelRegistry& r);      // ops/float_math_ops.cc
void RegisterFloatNnOps(KernelRegistry& r);        // ops/float_nn_ops.cc
void RegisterTensorOps(KernelRegistry& r);         // ops/tensor_ops.cc
void RegisterFusedOps(KernelRegistry& r);          // ops/fused_qdq_matmul.cc (graph/octet_ops.h)
void RegisterFusedConvOps(KernelRegistry& r);      // ops/fused_qdq_conv.cc (graph/octet_ops.h)
void RegisterMsQuantMatMulOps(KernelRegistry& r);  // ops/dynamic_quant_matmul.cc (com.microsoft)
void RegisterQGemmOps(KernelRegistry& r);          // ops/qgemm.cc (com.microsoft QGemm)
void RegisterShapeOps(KernelRegistry& r);          // ops/shape_ops.cc (movement ops, any dtype)
void RegisterQLinearBinaryOps(KernelRegistry& r);  // ops/qlinear_binary.cc (ms QLinearAdd/Mul)
void RegisterQLinearMiscOps(KernelRegistry& r);    // ops/qlinear_misc.cc (QLinearConcat/...)
void RegisterQLinearPoolOps(KernelRegistry& r);    // ops/qlinear_pool.cc (QLinear*AveragePool)
void RegisterLookupTableOps(KernelRegistry& r);    // ops/lookup_table.cc (graph/octet_ops.h)
void RegisterInt8DynamicMatMulOps(KernelRegistry& r);  // ops/int8_dynamic_matmul.cc (forward route)
void RegisterNBitsOps(KernelRegistry& r);  // ops/matmul_nbits.cc (4-bit weights)

// Helpers for KernelDef::accepts.
bool OneOf(DType t, std::initializer_list<DType> allowed);
std::string DTypeList(const std::vector<DType>& types);  // "(float, uint8, -)"

}  // namespace octet
