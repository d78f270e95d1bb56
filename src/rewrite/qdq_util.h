// Helpers shared by the QDQ passes in rewrite/: reading constant Q/DQ
// parameters, ONNX Runtime's float steps for one 8-bit value (so a rewrite can
// prove itself exact by enumerating all 256 inputs), and graph edits.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/quant.h"
#include "graph/graph.h"

namespace octet {

bool IsQdqDomain(const Node& n);
bool IsDequantizeNode(const Node& n);
bool IsQuantizeNode(const Node& n);

int InputAt(const Node& n, size_t i);  // -1 when omitted
const Tensor* ConstantValue(const Graph& g, int value);
// The entries of a constant int64 or int32 tensor of rank <= 1, else nullopt.
std::optional<std::vector<int64_t>> ConstantInts(const Graph& g, int value);
// Whether `value` is a constant float32 tensor of one element equal to `expected`.
bool IsFloatConstant(const Graph& g, int value, float expected);
// Whether n is the ai.onnx binary operator `op` (two inputs).
bool IsOnnxBinary(const Node& n, const char* op);
// The other input of binary node n when one input is `value`, else -1.
int OtherInput(const Node& n, int value);
// The rank of a value when the graph records its shape, else -1.
int64_t KnownRank(const Graph& g, int value);

// A Slice's constant parameters with axes normalized and steps filled in.
struct SliceParams {
  std::vector<int64_t> starts, ends, axes, steps;
};
// The parameters of an ai.onnx Slice (opset >= 10: inputs) whose starts, ends,
// axes and steps are constants, its axes normalized against `rank` (unknown:
// -1, then the axes stay as written, negative ones too); nullopt otherwise, and
// for a step of 0 or a repeated axis (the kernel reports those).
std::optional<SliceParams> ReadSlice(const Graph& g, const Node& n, int64_t rank);

// The dtype of a value as far as the graph says without running kernels
// (kUndefined when it does not).
DType KnownDType(const Graph& g, int value);

// True when the value may be float32: its known dtype is float32, or the graph does
// not record one (the float passes' test for their inputs).
bool MayBeFloat32(const Graph& g, int value);

// Reads a QuantizeLinear / DequantizeLinear whose scale and zero point are
// one-value float32 / 8-bit constants; returns the reason when it is not one.
std::string ReadScalarQdq(const Graph& g, const Node& n, ScalarQParams& p);

// A DequantizeLinear's parameters, checked for what the fused kernels fold.
struct DqParams {
  int data = -1, scale = -1, zero = -1;
  DType data_type = DType::kUndefined;
  int64_t axis = 1;  // as written; meaningful only when per_axis
  bool per_axis = false;
  int64_t count = 1;  // scale entries
};

// Why a DequantizeLinear cannot feed a fused node; empty when it can.
std::string ReadDq(const Graph& g, const Node& dq, DqParams& p);

// Whether the (single) consumer of `product` is a QuantizeLinear a fused node can
// absorb; returns its index, or -1 with note set when there is one that cannot be.
int FoldableQuantize(const Graph& g, int product, const std::vector<std::vector<int>>& consumers,
                     const std::set<int>& graph_outputs, std::string& note, DType& out_type);

// Consumers of every value, by node index.
std::vector<std::vector<int>> ConsumersOf(const Graph& g);
// The one node that reads `value`, or -1 when there are several, none, or the
// value is a graph output.
int SoleConsumer(const Graph& g, const std::vector<std::vector<int>>& consumers, int value);

// A 1-D int64 tensor of the values (a Slice's parameters).
Tensor Int64Tensor(const std::vector<int64_t>& v);
// A new value named base_name (or base_name/2, /3, ... when taken).
int AddUniqueValue(Graph& g, const std::string& base_name);
// A new constant value holding t, named base_name (or base_name/2, /3, ... when taken).
int AddConstant(Graph& g, const std::string& base_name, Tensor t);

// Removes the marked nodes and recomputes every value's producer.
void RemoveNodes(Graph& g, const std::vector<bool>& removed);

// Removes DequantizeLinear nodes nothing reads any more (in reverse, so a chain
// of them goes too); a DQ with another consumer keeps running for it. Then
// recomputes every value's producer.
void DropUnreadDequantize(Graph& g);

}  // namespace octet
