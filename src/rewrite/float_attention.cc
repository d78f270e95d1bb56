#include "rewrite/float_attention.h"

#include <optional>
#include <string>
#include <vector>

#include "graph/octet_ops.h"
#include "rewrite/qdq_lookup.h"
#include "rewrite/qdq_util.h"

namespace octet {

namespace {

bool IsOnnxOp(const Graph& g, int node, const char* op, size_t inputs) {
  return node >= 0 && g.nodes[node].domain == kOnnxDomain && g.nodes[node].op_type == op &&
         g.nodes[node].inputs.size() == inputs && g.nodes[node].outputs.size() == 1;
}

// Softmax over the last axis: axis=-1 written, or left out from opset 13 on.
bool SoftmaxOverLastAxis(const Node& n) {
  const auto it = n.attributes.find("axis");
  return it == n.attributes.end() ? n.opset >= 13 : n.GetInt("axis", 0) == -1;
}

// One constant value of `type` (any shape).
bool IsOneConstant(const Graph& g, int value, std::initializer_list<DType> types) {
  const Tensor* t = value >= 0 ? ConstantValue(g, value) : nullptr;
  if (!t || t->numel() != 1) return false;
  for (DType type : types)
    if (t->dtype() == type) return true;
  return false;
}

// [batch, heads, sequence, size] from [batch, sequence, heads, size], and k_t's form.
const std::vector<int64_t> kHeadsOut = {0, 2, 1, 3}, kKeysOut = {0, 2, 3, 1};
// k_t from keys [batch, heads, sequence, size] (decoders).
const std::vector<int64_t> kKeysTransposed = {0, 1, 3, 2};

// Grouped-query attention's repeat_kv, Reshape(Expand(Unsqueeze(x, [2]), [1, 1, g, 1, 1]),
// [0, heads, -1, size]) with constant shapes, each value read by the next node alone.
struct RepeatKv {
  int base = -1;  // x, [batch, kv heads, sequence, size]
  int64_t repeat = 1, heads = 0, size = 0;
  std::vector<int> nodes;
};

}  // namespace

void FuseFloatAttention(Graph& g, QdqReport& report) {
  const std::vector<std::vector<int>> consumers = ConsumersOf(g);
  std::vector<bool> removed(g.nodes.size(), false);
  bool changed = false;
  // The node reading `value` alone, if it is `op` with `inputs` inputs.
  auto next = [&](int value, const char* op, size_t inputs) {
    const int node = SoleConsumer(g, consumers, value);
    return IsOnnxOp(g, node, op, inputs) && !removed[node] ? node : -1;
  };
  // The Transpose(perm) that makes `value` for `consumer` alone.
  auto transpose_into = [&](int value, const std::vector<int64_t>& perm, int consumer) {
    const int node = value >= 0 ? g.values[value].producer : -1;
    return IsOnnxOp(g, node, "Transpose", 1) && !removed[node] &&
                   g.nodes[node].GetInts("perm") == perm &&
                   SoleConsumer(g, consumers, value) == consumer
               ? node
               : -1;
  };
  auto producer = [&](int value, const char* op, size_t inputs, int consumer) {
    const int node = value >= 0 ? g.values[value].producer : -1;
    return IsOnnxOp(g, node, op, inputs) && !removed[node] &&
                   SoleConsumer(g, consumers, value) == consumer
               ? node
               : -1;
  };
  // The repeat_kv that makes `value` for `consumer` alone, if it is one.
  auto repeat_kv = [&](int value, int consumer) -> std::optional<RepeatKv> {
    const int reshape = producer(value, "Reshape", 2, consumer);
    if (reshape < 0 || g.nodes[reshape].GetInt("allowzero", 0) != 0) return std::nullopt;
    const int expand = producer(g.nodes[reshape].inputs[0], "Expand", 2, reshape);
    if (expand < 0) return std::nullopt;
    const int unsqueeze = producer(g.nodes[expand].inputs[0], "Unsqueeze", 2, expand);
    if (unsqueeze < 0) return std::nullopt;
    const auto target = ConstantInts(g, g.nodes[reshape].inputs[1]);
    const auto repeat = ConstantInts(g, g.nodes[expand].inputs[1]);
    const auto axes = ConstantInts(g, g.nodes[unsqueeze].inputs[1]);
    if (!target || !repeat || !axes || *axes != std::vector<int64_t>{2} || repeat->size() != 5 ||
        target->size() != 4 || (*target)[0] != 0 || (*target)[2] != -1 || (*target)[1] <= 0 ||
        (*target)[3] <= 0 || (*repeat)[2] < 1)
      return std::nullopt;
    for (int d : {0, 1, 3, 4})
      if ((*repeat)[d] != 1) return std::nullopt;
    return RepeatKv{g.nodes[unsqueeze].inputs[0], (*repeat)[2], (*target)[1], (*target)[3],
                    {unsqueeze, expand, reshape}};
  };
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    if (!IsOnnxOp(g, static_cast<int>(n), "MatMul", 2) || removed[n]) continue;
    const Node& scores = g.nodes[n];
    const int q = scores.inputs[0];
    if (!MayBeFloat32(g, q)) continue;
    // The scale: Div(scores, divisor), or Mul by a factor on either side.
    int div = next(scores.outputs[0], "Div", 2);
    if (div >= 0 && g.nodes[div].inputs[0] != scores.outputs[0]) continue;
    const bool scale_mul = div < 0;
    if (scale_mul) {
      div = next(scores.outputs[0], "Mul", 2);
      if (div < 0 || g.nodes[div].inputs[0] == g.nodes[div].inputs[1]) continue;
    }
    const int factor = g.nodes[div].inputs[g.nodes[div].inputs[0] == scores.outputs[0] ? 1 : 0];
    const int scaled = g.nodes[div].outputs[0];
    const int add = next(scaled, "Add", 2);
    if (add < 0) continue;
    const bool mask_first = g.nodes[add].inputs[1] == scaled;
    const int mask = g.nodes[add].inputs[mask_first ? 0 : 1];
    if (mask == scaled) continue;
    const int softmax = next(g.nodes[add].outputs[0], "Softmax", 1);
    if (softmax < 0 || !SoftmaxOverLastAxis(g.nodes[softmax])) continue;
    const int context = next(g.nodes[softmax].outputs[0], "MatMul", 2);
    if (context < 0 || g.nodes[context].inputs[0] != g.nodes[softmax].outputs[0]) continue;

    // The heads' transposes around it, taken in when all four are there.
    const int k_t = scores.inputs[1], v = g.nodes[context].inputs[1];
    const int q_split = transpose_into(q, kHeadsOut, static_cast<int>(n));
    const int k_split = transpose_into(k_t, kKeysOut, static_cast<int>(n));
    const int v_split = transpose_into(v, kHeadsOut, context);
    int merge = next(g.nodes[context].outputs[0], "Transpose", 1);
    if (merge >= 0 && g.nodes[merge].GetInts("perm") != kHeadsOut) merge = -1;
    const bool heads_inner = q_split >= 0 && k_split >= 0 && v_split >= 0 && merge >= 0;
    // Or a decoder's keys: k_t = Transpose(k, [0, 1, 3, 2]), k and v each a repeat_kv of
    // the same shape or taken as they are.
    const int k_rows = heads_inner ? -1 : transpose_into(k_t, kKeysTransposed, static_cast<int>(n));
    std::optional<RepeatKv> k_repeat, v_repeat;
    if (k_rows >= 0) {
      k_repeat = repeat_kv(g.nodes[k_rows].inputs[0], k_rows);
      v_repeat = repeat_kv(v, context);
      const bool same = k_repeat && v_repeat && k_repeat->repeat == v_repeat->repeat &&
                        k_repeat->heads == v_repeat->heads;
      if (!same) k_repeat = v_repeat = std::nullopt;
    }

    Node fused;
    fused.name = (scores.name.empty() ? "node" + std::to_string(n) : scores.name) + "/attention";
    fused.op_type = kFloatAttentionOp;
    fused.domain = kOctetDomain;
    fused.opset = 1;
    std::string folded = "MatMul, Div, Add, Softmax, MatMul";
    if (heads_inner) {
      fused.inputs = {g.nodes[q_split].inputs[0], g.nodes[k_split].inputs[0], factor, mask,
                      g.nodes[v_split].inputs[0]};
      fused.outputs = {g.nodes[merge].outputs[0]};
      fused.attributes["heads_inner"] = Attribute::Int(1);
      folded = "Transpose x3, " + folded + ", Transpose";
    } else if (k_rows >= 0) {
      fused.inputs = {q, k_repeat ? k_repeat->base : g.nodes[k_rows].inputs[0], factor, mask,
                      v_repeat ? v_repeat->base : v};
      fused.outputs = {g.nodes[context].outputs[0]};
      fused.attributes["keys_rows"] = Attribute::Int(1);
      folded = "Transpose, " + folded;
      if (k_repeat) {
        fused.attributes["kv_repeat"] = Attribute::Int(k_repeat->repeat);
        fused.attributes["kv_heads"] = Attribute::Int(k_repeat->heads);
        fused.attributes["kv_size"] = Attribute::Int(k_repeat->size);
        fused.attributes["v_size"] = Attribute::Int(v_repeat->size);
        folded = "Unsqueeze, Expand, Reshape x2, " + folded;
      }
    } else {
      fused.inputs = {q, k_t, factor, mask, v};
      fused.outputs = {g.nodes[context].outputs[0]};
    }
    if (scale_mul) {
      fused.attributes["scale_mul"] = Attribute::Int(1);
      folded.replace(folded.find("Div"), 3, "Mul");
    }
    if (mask_first) fused.attributes["mask_first"] = Attribute::Int(1);
    report.Fuse(scores, "octet.FloatAttention (float; " + folded + " folded)");
    for (int node : {static_cast<int>(n), div, add, softmax, context}) removed[node] = true;
    if (heads_inner)
      for (int node : {q_split, k_split, v_split}) removed[node] = true;
    if (k_rows >= 0) removed[k_rows] = true;
    for (const auto& chain : {k_repeat, v_repeat})
      if (chain)
        for (int node : chain->nodes) removed[node] = true;
    const int keep = heads_inner ? merge : context;
    removed[keep] = false;
    g.nodes[keep] = std::move(fused);
    changed = true;
  }
  if (changed) RemoveNodes(g, removed);
}

void FuseKvAppend(Graph& g, QdqReport& report) {
  const std::vector<std::vector<int>> consumers = ConsumersOf(g);
  std::vector<bool> removed(g.nodes.size(), false), graph_input(g.values.size(), false),
      graph_output(g.values.size(), false);
  for (int v : g.inputs) graph_input[v] = true;
  for (int v : g.outputs) graph_output[v] = true;
  int64_t slots = 0;
  // The Concat(past, new, axis 2) that makes `value` for `attention` alone (and perhaps
  // the graph's outputs), past a graph input of rank 4 that it alone reads.
  auto appends = [&](int value, int attention) {
    const int node = value >= 0 ? g.values[value].producer : -1;
    if (!IsOnnxOp(g, node, "Concat", 2) || removed[node] ||
        consumers[value] != std::vector<int>{attention})
      return -1;
    const Node& concat = g.nodes[node];
    const int past = concat.inputs[0];
    const Value& past_value = g.values[past];
    const int64_t axis = concat.GetInt("axis", 0);
    const bool rows = axis == 2 || axis == -2;
    return rows && graph_input[past] && !past_value.initializer && past_value.shape &&
                   past_value.shape->size() == 4 && SoleConsumer(g, consumers, past) == node &&
                   concat.inputs[1] >= 0
               ? node
               : -1;
  };
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    Node& attention = g.nodes[n];
    if (attention.domain != kOctetDomain || attention.op_type != kFloatAttentionOp ||
        attention.GetInt("keys_rows", 0) == 0 || attention.inputs.size() != 5)
      continue;
    const int keys = appends(attention.inputs[1], static_cast<int>(n));
    const int values = appends(attention.inputs[4], static_cast<int>(n));
    if (keys < 0 || values < 0 || keys == values) continue;
    const Node &k = g.nodes[keys], &v = g.nodes[values];
    attention.inputs = {attention.inputs[0], k.inputs[0], attention.inputs[2], attention.inputs[3],
                        v.inputs[0],         k.inputs[1], v.inputs[1]};
    // A present no graph output names is the attention's alone: the node omits it.
    auto listed = [&](int value) { return graph_output[value] ? value : -1; };
    attention.outputs = {attention.outputs[0], listed(k.outputs[0]), listed(v.outputs[0])};
    attention.attributes["appends_kv"] = Attribute::Int(1);
    attention.attributes["cache_slot"] = Attribute::Int(slots++);
    report.Fuse(k, "octet.FloatAttention (KV append; Concat x2 folded)");
    removed[keys] = removed[values] = true;
  }
  if (slots > 0) RemoveNodes(g, removed);
}

void FuseMaskedSoftmax(Graph& g, QdqReport& report) {
  const std::vector<std::vector<int>> consumers = ConsumersOf(g);
  std::vector<bool> removed(g.nodes.size(), false);
  bool changed = false;
  auto producer = [&](int value) { return value >= 0 ? g.values[value].producer : -1; };
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    if (!IsOnnxOp(g, static_cast<int>(n), "Softmax", 1) || removed[n] ||
        !SoftmaxOverLastAxis(g.nodes[n]))
      continue;
    const int add = producer(g.nodes[n].inputs[0]);
    if (!IsOnnxOp(g, add, "Add", 2) || removed[add] ||
        SoleConsumer(g, consumers, g.nodes[add].outputs[0]) != static_cast<int>(n))
      continue;
    // The scores: a float lookup of 8-bit data read by the Add alone, else the first input.
    int x = g.nodes[add].inputs[0], table = -1, lookup = -1;
    bool mask_first = false;
    for (int i = 0; i < 2; ++i) {
      const int p = producer(g.nodes[add].inputs[i]);
      if (p < 0 || removed[p] || g.nodes[p].domain != kOctetDomain ||
          g.nodes[p].op_type != kLookupTableOp || g.nodes[p].inputs.size() != 2 ||
          SoleConsumer(g, consumers, g.nodes[add].inputs[i]) != add)
        continue;
      const Tensor* entries = ConstantValue(g, g.nodes[p].inputs[1]);
      if (!entries || entries->dtype() != DType::kFloat32) continue;
      lookup = p;
      x = g.nodes[p].inputs[0];
      table = g.nodes[p].inputs[1];
      mask_first = i == 1;
      break;
    }
    const int mask = g.nodes[add].inputs[mask_first ? 0 : 1];
    if (lookup < 0 && KnownDType(g, x) != DType::kFloat32) continue;
    // The quantization: one constant scale and an 8-bit zero point (or none).
    int quantize = SoleConsumer(g, consumers, g.nodes[n].outputs[0]);
    if (quantize >= 0) {
      const Node& q = g.nodes[quantize];
      const bool fits =
          !removed[quantize] && q.domain == kOnnxDomain && q.op_type == "QuantizeLinear" &&
          (q.inputs.size() == 2 || q.inputs.size() == 3) && q.outputs.size() == 1 &&
          q.attributes.count("block_size") == 0 && q.attributes.count("output_dtype") == 0 &&
          IsOneConstant(g, q.inputs[1], {DType::kFloat32}) &&
          (q.inputs.size() == 2 || q.inputs[2] < 0 ||
           IsOneConstant(g, q.inputs[2], {DType::kUInt8, DType::kInt8}));
      if (!fits) quantize = -1;
    }
    const Node& last = g.nodes[quantize >= 0 ? quantize : static_cast<int>(n)];

    Node fused;
    fused.name = (g.nodes[add].name.empty() ? "node" + std::to_string(add) : g.nodes[add].name) +
                 "/masked_softmax";
    fused.op_type = kMaskedSoftmaxOp;
    fused.domain = kOctetDomain;
    fused.opset = 1;
    fused.inputs = {x, table, mask, -1, -1};
    if (quantize >= 0) {
      fused.inputs[3] = last.inputs[1];
      if (last.inputs.size() == 3) fused.inputs[4] = last.inputs[2];
    }
    fused.outputs = {last.outputs[0]};
    if (mask_first) fused.attributes["mask_first"] = Attribute::Int(1);
    if (lookup >= 0)
      fused.attributes["min_rank"] = Attribute::Int(g.nodes[lookup].GetInt("min_rank", 0));
    report.Fuse(g.nodes[add], std::string("octet.MaskedSoftmax (") +
                                  (lookup >= 0 ? "LookupTable, " : "") + "Add, Softmax" +
                                  (quantize >= 0 ? ", QuantizeLinear" : "") + " folded)");
    const int keep = quantize >= 0 ? quantize : static_cast<int>(n);
    for (int node : {lookup, add, static_cast<int>(n), quantize})
      if (node >= 0 && node != keep) removed[node] = true;
    g.nodes[keep] = std::move(fused);
    changed = true;
  }
  if (changed) RemoveNodes(g, removed);
}

}  // namespace octet
