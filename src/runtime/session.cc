#include "runtime/session.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <numeric>
#include <set>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "core/memory_limit.h"
#include "core/thread_pool.h"
#include "core/weight_arena.h"
#include "graph/octet_ops.h"
#include "model/onnx_loader.h"
#include "ops/evaluate.h"
#include "ops/kv_cache.h"
#include "ops/registry.h"
#include "rewrite/last_row.h"
#include "rewrite/rewrite.h"
#include "runtime/guarded.h"

namespace octet {

namespace {

struct CompiledNode {
  const Node *node;
  std::unique_ptr<OpKernel> kernel;
  std::vector<DType> output_types;
  // Per input: its initializer, else null (a run's value, or an omitted input),
  // so a run does not look each input up in the graph.
  std::vector<const Tensor *> constants;
};

// The records a node's run reads first: its node, kernel and the arrays they hold.
void PrefetchRecords(const CompiledNode &c) {
  __builtin_prefetch(c.node);
  __builtin_prefetch(c.kernel.get());
  __builtin_prefetch(c.constants.data());
  __builtin_prefetch(c.output_types.data());
}

// Then what those records point to: the node's input and output ids, the values it
// reads, and the list of values released after it.
void PrefetchInputs(const CompiledNode &c, const std::vector<Tensor> &slots,
                    const std::vector<int> &released) {
  __builtin_prefetch(c.node->inputs.data());
  __builtin_prefetch(c.node->outputs.data());
  for (int in : c.node->inputs)
    if (in >= 0) __builtin_prefetch(&slots[in]);
  __builtin_prefetch(released.data());
}

TensorInfo MakeInfo(const Value &v) {
  TensorInfo info{v.name, v.dtype, {}, v.shape.has_value()};
  if (v.shape) info.shape = *v.shape;
  return info;
}

std::string DimToString(const Dim &d) {
  if (d.value) return std::to_string(*d.value);
  return d.symbol.empty() ? "?" : d.symbol;
}

// Copies the initializers the graph's nodes or outputs still read (octet's own padded
// storage) and drops the others: after this no initializer is a view of borrowed memory.
void KeepUsedInitializers(Graph &g) {
  std::vector<bool> used(g.values.size(), false);
  for (const Node &n : g.nodes)
    for (int in : n.inputs)
      if (in >= 0) used[in] = true;
  for (int v : g.outputs) used[v] = true;
  for (auto it = g.initializers.begin(); it != g.initializers.end();) {
    if (used[it->first]) {
      it->second = it->second.Clone();  // same map node: Value::initializer stays valid
      ++it;
    } else {
      g.values[it->first].initializer = nullptr;
      it = g.initializers.erase(it);
    }
  }
}

bool EnvIs(const char *name, const char *value) {
  const char *v = std::getenv(name);
  return v != nullptr && std::string(v) == value;
}

std::string DeclaredShape(const std::vector<Dim> &dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ",";
    s += DimToString(dims[i]);
  }
  return s + "]";
}

// A kernel's error names its node; one that does not (a tensor over the size limit,
// thrown where it is allocated) gets the node's description in front.
[[noreturn]] void FailInNode(const Node &node, const Error &e) {
  const std::string what = e.what(), node_name = node.Describe();
  if (what.find(node_name) != std::string::npos) throw;
  FailWithContext(e, node_name, ": ");
}

// Initializer bytes freed after which a session's creation hands memory back to the
// system: often enough to bound its peak, seldom enough that the allocator's walk of
// its heap costs little.
constexpr size_t kReleaseEveryBytes = size_t{16} << 20;

uint64_t MaxTensorBytesFor(const SessionOptions &options) {
  return options.max_tensor_bytes != 0 ? options.max_tensor_bytes : DefaultMaxTensorBytes();
}

}  // namespace

struct InferenceSession::Impl {
  Model model;
  std::unique_ptr<ThreadPool> pool;
  // What the kernels pack from their constant inputs; outlives them.
  WeightArena weights;
  std::vector<CompiledNode> compiled;
  std::vector<TensorInfo> input_infos, output_infos, intermediate_infos;
  bool keep_intermediates = false;
  std::map<std::string, int> intermediate_ids;  // name -> value, for Run's output names
  std::vector<DType> value_types;               // inferred dtype of every value
  // For each node, the values whose last consumer it is (freed after it runs).
  std::vector<std::vector<int>> release_after;
  // Kernels share one thread pool, so runs are serialized (the profile too).
  mutable std::mutex run_mutex;
  uint64_t max_tensor_bytes = 0;  // SessionOptions::max_tensor_bytes or the default
  // Time per op type over the profiled runs (SetProfiling); with
  // OCTET_PROFILE=1 on from creation and printed when the session ends.
  struct OpTotal {
    double seconds = 0;
    int64_t calls = 0;
  };
  bool profile = false, print_profile = false;
  int64_t profiled_runs = 0;
  std::map<std::string, OpTotal> op_times;
  // What a KvCache holds: the past inputs and present outputs of the attention nodes
  // that append to it (FuseKvAppend), one slot per node.
  std::vector<int> cached_inputs, cached_outputs;
  std::vector<bool> held_by_cache;  // per value: one of the above
  int64_t cache_slots = 0;
  // Names the session to its caches: a later session may reuse this one's address.
  const uint64_t id = [] {
    static std::atomic<uint64_t> sessions{0};
    return ++sessions;
  }();

  ~Impl() {
    if (print_profile) PrintProfile();
  }
  SessionProfile Totals() const;
  void PrintProfile() const;

  void Prepare(const SessionOptions &options);
  std::vector<Tensor> Run(const std::vector<std::pair<std::string, Tensor>> &feeds,
                          const std::vector<std::string> &output_names, KvCacheState *cache);
  void FindCachedValues();
  void CheckFeed(const Value &v, const Tensor &t, std::map<std::string, int64_t> &symbols) const;
};

void InferenceSession::Impl::Prepare(const SessionOptions &options) {
  int threads = options.threads;
  keep_intermediates = options.keep_intermediates;
  OCTET_CHECK(threads >= 0, "threads must be >= 0 (0 = one per core), got ", threads);
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  try {
    pool = std::make_unique<ThreadPool>(threads);
  } catch (const std::system_error &e) {
    Fail("cannot start ", threads, " threads: ", e.what());
  }

  const char *profile_env = std::getenv("OCTET_PROFILE");
  profile = print_profile = profile_env && std::string(profile_env) == "1";

  Graph &g = model.graph;
  const RewriteOptions rewrite_options{options.rewrites, options.float_matmul == FloatMatMul::kInt8,
                                       !options.keep_intermediates, true};
  std::string report_text;
  for (const std::string &line : KeepLastRows(g, options.last_row_outputs))
    report_text += line + "\n";
  const QdqReport report = ApplyRewrites(g, EvaluateNode, rewrite_options);
  report_text += FormatQdqReport(report);
  if (options.borrowed_initializers) KeepUsedInitializers(g);
  if (options.rewrite_report) {
    options.rewrite_report(report_text);
  } else if (rewrite_options.enabled && !EnvIs("OCTET_QDQ", "0") && EnvIs("OCTET_QDQ_DEBUG", "1")) {
    std::fprintf(stderr, "%s", report_text.c_str());
  }
  value_types.assign(g.values.size(), DType::kUndefined);
  for (int v : g.inputs) {
    const Value &val = g.values[v];
    OCTET_CHECK(val.dtype != DType::kUndefined, "graph input '", val.name, "' has no tensor type");
    OCTET_CHECK(IsSupportedStorage(val.dtype), "graph input '", val.name, "' has type ",
                DTypeName(val.dtype), ", which octet does not support");
    value_types[v] = val.dtype;
  }
  for (auto &[v, t] : g.initializers) value_types[v] = t.dtype();

  // Readers left to compile of each initializer, and whether one reads its data in
  // Run: the data of one whose readers all packed it at creation
  // (OpKernel::ReadsConstantInRun) is freed after the last, so a model's weights are
  // not held twice; its dtype and shape stay for Run's checks.
  std::vector<int> readers_left(g.values.size(), 0);
  std::vector<bool> read_in_run(g.values.size(), false);
  for (const Node &node : g.nodes)
    for (int in : node.inputs)
      if (in >= 0) ++readers_left[in];
  for (int v : g.outputs) {
    read_in_run[v] = true;
    // A run hands the graph's outputs to the caller in octet's byte-per-element form.
    if (auto it = g.initializers.find(v); it != g.initializers.end())
      it->second = UnpackedNibbles(it->second);
  }

  // Types first, in graph order; then the kernels, the nodes with the most constant bytes
  // first: a kernel packing a weight holds the weight's pages beside its packed copy, so
  // the biggest are packed while little else is held (a decoder's LM head, packed last,
  // would add its source on top of every other packed weight).
  struct Pending {
    const KernelDef *def;
    std::vector<DType> in_types, out_types;
    std::vector<const Tensor *> constants;
    size_t constant_bytes = 0;
  };
  const KernelRegistry &registry = KernelRegistry::Global();
  std::vector<Pending> pending;
  pending.reserve(g.nodes.size());
  for (const Node &node : g.nodes) {
    Pending p;
    for (int in : node.inputs) {
      p.in_types.push_back(in < 0 ? DType::kUndefined : value_types[in]);
      p.constants.push_back(in < 0 ? nullptr : g.values[in].initializer);
      if (p.constants.back()) p.constant_bytes += p.constants.back()->nbytes();
    }
    OCTET_CHECK(!node.outputs.empty(), node.Describe(), ": has no outputs");
    p.def = &registry.Find(node, p.in_types);
    p.out_types = p.def->infer_types(node, p.in_types);
    OCTET_CHECK(p.out_types.size() >= node.outputs.size(), node.Describe(), ": has ",
                node.outputs.size(), " outputs, the operator defines ", p.out_types.size());
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      int out = node.outputs[i];
      if (out < 0) continue;
      DType declared = g.values[out].dtype;
      OCTET_CHECK(declared == DType::kUndefined || declared == p.out_types[i], node.Describe(),
                  ": output '", g.values[out].name, "' is declared ", DTypeName(declared),
                  " but the operator produces ", DTypeName(p.out_types[i]));
      value_types[out] = p.out_types[i];
    }
    pending.push_back(std::move(p));
  }
  std::vector<size_t> order(g.nodes.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return pending[a].constant_bytes > pending[b].constant_bytes;
  });

  std::vector<std::unique_ptr<OpKernel>> kernels(g.nodes.size());
  size_t freed = 0;  // initializer bytes freed since memory last went back to the system
  for (size_t n : order) {
    const Node &node = g.nodes[n];
    const Pending &p = pending[n];
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      // In place, so that the later readers share the unpacked bytes.
      if (!NeedsUnpackedNibbles(*p.def, p.constants[i])) continue;
      Tensor &t = g.initializers.at(node.inputs[i]);
      t = UnpackedNibbles(t);
    }
    KernelInit init{node, p.in_types, p.constants, pool.get(), &weights};
    std::unique_ptr<OpKernel> kernel;
    try {
      kernel = p.def->create(init);
    } catch (const Error &e) {
      FailInNode(node, e);
    } catch (const std::bad_alloc &) {
      Fail(node.Describe(), ": out of memory (std::bad_alloc)");
    } catch (const std::exception &e) {
      FailInternal(node.Describe(), ": ", e.what());
    }
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const int in = node.inputs[i];
      if (in < 0 || !g.values[in].initializer) continue;
      if (kernel->ReadsConstantInRun(i)) read_in_run[in] = true;
      if (--readers_left[in] == 0 && !read_in_run[in]) {
        Tensor &t = g.initializers.at(in);
        freed += t.nbytes();
        t = Tensor::View(t.dtype(), t.shape(), nullptr);
        if (freed >= kReleaseEveryBytes) {
          ReleaseCachedTensorMemory();  // back to the system before the next nodes pack
          freed = 0;
        }
      }
    }
    kernels[n] = std::move(kernel);
  }
  for (size_t n = 0; n < g.nodes.size(); ++n)
    compiled.push_back(CompiledNode{&g.nodes[n], std::move(kernels[n]), pending[n].out_types,
                                    pending[n].constants});
  if (freed > 0) ReleaseCachedTensorMemory();

  std::set<int> keep(g.outputs.begin(), g.outputs.end());
  for (int v : g.inputs) {
    TensorInfo info = MakeInfo(g.values[v]);
    // An input that is also an output comes back as itself, so it needs octet's padding.
    info.reads_only_own_bytes = !keep.count(v);
    for (const CompiledNode &c : compiled)
      for (size_t i = 0; i < c.node->inputs.size(); ++i)
        if (c.node->inputs[i] == v && !c.kernel->ReadsOnlyInputBytes(i))
          info.reads_only_own_bytes = false;
    input_infos.push_back(info);
  }
  for (int v : g.outputs) {
    OCTET_CHECK(value_types[v] != DType::kUndefined, "graph output '", g.values[v].name,
                "' is not produced by any node");
    TensorInfo info = MakeInfo(g.values[v]);
    info.dtype = value_types[v];
    output_infos.push_back(info);
  }
  for (const Node &node : g.nodes)
    for (int out : node.outputs)
      if (out >= 0 && !keep.count(out)) {
        TensorInfo info = MakeInfo(g.values[out]);
        info.dtype = value_types[out];
        intermediate_infos.push_back(info);
        intermediate_ids.emplace(info.name, out);
      }

  FindCachedValues();

  // Free intermediate values after their last consumer; graph outputs and
  // initializers are never freed.
  std::vector<int> last_use(g.values.size(), -1);
  for (size_t n = 0; n < g.nodes.size(); ++n)
    for (int in : g.nodes[n].inputs)
      if (in >= 0) last_use[in] = static_cast<int>(n);
  release_after.assign(g.nodes.size(), {});
  if (keep_intermediates) return;
  for (size_t v = 0; v < g.values.size(); ++v)
    if (last_use[v] >= 0 && !keep.count(static_cast<int>(v)) && !g.values[v].initializer)
      release_after[last_use[v]].push_back(static_cast<int>(v));
}

void InferenceSession::Impl::FindCachedValues() {
  std::vector<std::pair<int64_t, const Node *>> appending;
  for (const Node &node : model.graph.nodes)
    if (node.domain == kOctetDomain && node.op_type == kFloatAttentionOp &&
        node.GetInt("appends_kv", 0) != 0)
      appending.emplace_back(node.GetInt("cache_slot", -1), &node);
  std::sort(appending.begin(), appending.end());
  for (size_t i = 0; i < appending.size(); ++i) {
    const Node &node = *appending[i].second;
    OCTET_CHECK(appending[i].first == static_cast<int64_t>(i), "internal: ", node.Describe(),
                " has cache slot ", appending[i].first, ", expected ", i);
    cached_inputs.insert(cached_inputs.end(), {node.inputs[1], node.inputs[4]});
    for (int present : {node.outputs[1], node.outputs[2]})
      if (present >= 0) cached_outputs.push_back(present);
  }
  cache_slots = static_cast<int64_t>(appending.size());
  // In the model's order, as a caller lists them.
  auto model_order = [](std::vector<int> &values, const std::vector<int> &order) {
    std::vector<int> sorted;
    for (int v : order)
      if (std::find(values.begin(), values.end(), v) != values.end()) sorted.push_back(v);
    values = std::move(sorted);
  };
  model_order(cached_inputs, model.graph.inputs);
  model_order(cached_outputs, model.graph.outputs);
  held_by_cache.assign(model.graph.values.size(), false);
  for (const std::vector<int> *values : {&cached_inputs, &cached_outputs})
    for (int v : *values) held_by_cache[v] = true;
}

void InferenceSession::Impl::CheckFeed(const Value &v, const Tensor &t,
                                       std::map<std::string, int64_t> &symbols) const {
  OCTET_CHECK(t.dtype() == v.dtype, "input '", v.name, "' must be ", DTypeName(v.dtype), ", got ",
              DTypeName(t.dtype()));
  if (!v.shape) return;
  const auto &dims = *v.shape;
  OCTET_CHECK(t.rank() == dims.size(), "input '", v.name, "' must have rank ", dims.size(), " ",
              DeclaredShape(dims), ", got shape ", ShapeToString(t.shape()));
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i].value) {
      OCTET_CHECK(t.dim(i) == *dims[i].value, "input '", v.name, "' dimension ", i, " must be ",
                  *dims[i].value, " ", DeclaredShape(dims), ", got shape ",
                  ShapeToString(t.shape()));
    } else if (!dims[i].symbol.empty()) {
      auto [it, inserted] = symbols.emplace(dims[i].symbol, t.dim(i));
      OCTET_CHECK(inserted || it->second == t.dim(i), "input '", v.name, "' dimension ", i, " ('",
                  dims[i].symbol, "') is ", t.dim(i), " but another input set it to ", it->second);
    }
  }
}

std::vector<Tensor> InferenceSession::Impl::Run(
    const std::vector<std::pair<std::string, Tensor>> &feeds,
    const std::vector<std::string> &output_names, KvCacheState *cache) {
  std::lock_guard<std::mutex> lock(run_mutex);
  const Graph &g = model.graph;
  std::vector<Tensor> slots(g.values.size());
  std::map<std::string, int64_t> symbols;
  auto held = [&](int v) { return cache && held_by_cache[v]; };
  for (const auto &[name, tensor] : feeds) {
    int id = -1;
    for (int v : g.inputs)
      if (g.values[v].name == name) id = v;
    if (id < 0) {
      std::string names;
      for (int v : g.inputs) names += (names.empty() ? "" : ", ") + g.values[v].name;
      Fail("unknown input name '", name, "'; the model's inputs are: ", names);
    }
    OCTET_CHECK(!slots[id].defined(), "input '", name, "' is fed more than once");
    OCTET_CHECK(!held(id), "input '", name,
                "' is held by the KV cache given to this run: feed it only to runs without one");
    CheckFeed(g.values[id], tensor, symbols);
    slots[id] = tensor;
  }
  for (int v : g.inputs)
    OCTET_CHECK(slots[v].defined() || held(v), "input '", g.values[v].name, "' was not fed");

  std::vector<int> wanted;
  if (output_names.empty()) {
    wanted = g.outputs;
  } else {
    for (const auto &name : output_names) {
      int id = -1;
      for (int v : g.outputs)
        if (g.values[v].name == name) id = v;
      if (id < 0) {
        auto it = intermediate_ids.find(name);
        if (it != intermediate_ids.end()) {
          OCTET_CHECK(keep_intermediates, "'", name,
                      "' is an intermediate value; create the session with keep_intermediates "
                      "to read it");
          id = it->second;
        }
      }
      if (id < 0) {
        bool input = false, folded = false;
        for (int v : g.inputs) input |= g.values[v].name == name;
        for (const Value &v : g.values) folded |= v.name == name && !v.initializer && !input;
        OCTET_CHECK(!folded, "'", name,
                    "' is not computed by octet's graph: a rewrite folded it into a fused node");
      }
      OCTET_CHECK(id >= 0, "unknown output name '", name, "'");
      wanted.push_back(id);
    }
  }

  if (cache) {
    cache->appended = -1;
    cache->presents_wanted = false;
    for (int v : wanted) cache->presents_wanted |= held(v);
  }

  auto lookup = [&](int v) -> const Tensor * {
    if (v < 0) return nullptr;
    if (g.values[v].initializer) return g.values[v].initializer;
    return &slots[v];
  };
  for (size_t n = 0; n < compiled.size(); ++n) {
    const CompiledNode &c = compiled[n];
    // A decoding step streams its weights through the caches, which drops the next
    // nodes' run-time records from them: fetch those while this kernel runs.
    if (n + 4 < compiled.size()) __builtin_prefetch(&compiled[n + 4]);
    if (n + 2 < compiled.size()) PrefetchRecords(compiled[n + 2]);
    if (n + 1 < compiled.size()) PrefetchInputs(compiled[n + 1], slots, release_after[n + 1]);
    std::vector<const Tensor *> inputs(c.constants);
    for (size_t i = 0; i < inputs.size(); ++i) {
      const int in = c.node->inputs[i];
      if (inputs[i] == nullptr && in >= 0) inputs[i] = &slots[in];
    }
    KernelContext ctx(*c.node, std::move(inputs), pool.get());
    ctx.set_kv_cache(cache);
    const auto start =
        profile ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
    try {
      c.kernel->Run(ctx);
    } catch (const Error &e) {
      FailInNode(*c.node, e);
    } catch (const std::bad_alloc &) {
      Fail(c.node->Describe(), ": out of memory (std::bad_alloc)");
    } catch (const std::exception &e) {
      FailInternal(c.node->Describe(), ": ", e.what());
    }
    if (profile) {
      OpTotal &t = op_times[c.node->domain.empty() ? c.node->op_type
                                                   : c.node->domain + "." + c.node->op_type];
      t.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      ++t.calls;
    }
    for (size_t i = 0; i < c.node->outputs.size(); ++i) {
      int out = c.node->outputs[i];
      if (out < 0) continue;
      Tensor &t = ctx.outputs()[i];
      // The presents of a run with a KV cache are only written when asked for.
      if (!t.defined() && cache && !cache->presents_wanted && held(out)) continue;
      // A kernel that returns the wrong type is a bug in octet; never pass it
      // on.
      if (!t.defined() || t.dtype() != c.output_types[i])
        FailInternal(c.node->Describe(), " produced ",
                     t.defined() ? DTypeName(t.dtype()) : "nothing", " for output '",
                     g.values[out].name, "', expected ", DTypeName(c.output_types[i]));
      slots[out] = std::move(t);
    }
    for (int v : release_after[n]) slots[v] = Tensor();
  }

  if (profile) ++profiled_runs;
  if (cache && cache->appended > 0) cache->length += cache->appended;
  std::vector<Tensor> results;
  for (int v : wanted) results.push_back(*lookup(v));
  return results;
}

SessionProfile InferenceSession::Impl::Totals() const {
  SessionProfile result{profiled_runs, {}};
  for (const auto &[op, t] : op_times) result.ops.push_back({op, t.seconds, t.calls});
  std::stable_sort(result.ops.begin(), result.ops.end(),
                   [](const OpTime &a, const OpTime &b) { return a.seconds > b.seconds; });
  return result;
}

void InferenceSession::Impl::PrintProfile() const {
  const SessionProfile p = Totals();
  if (p.runs == 0) return;
  double total = 0;
  for (const OpTime &t : p.ops) total += t.seconds;
  std::fprintf(stderr, "octet profile: %lld runs, %.3f ms per run in kernels\n",
               static_cast<long long>(p.runs), 1e3 * total / p.runs);
  for (const OpTime &t : p.ops)
    std::fprintf(stderr, "  %-36s %9.3f ms/run %5.1f%% %7lld calls/run\n", t.op.c_str(),
                 1e3 * t.seconds / p.runs, 100 * t.seconds / total,
                 static_cast<long long>(t.calls / p.runs));
}

InferenceSession::InferenceSession(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
InferenceSession::~InferenceSession() = default;

std::unique_ptr<InferenceSession> InferenceSession::FromFile(const std::string &path,
                                                             const SessionOptions &options) {
  const uint64_t max_bytes = MaxTensorBytesFor(options);
  return Guarded(max_bytes, [&] {
    auto impl = std::make_unique<Impl>();
    impl->max_tensor_bytes = max_bytes;
    impl->model = LoadModelFromFile(path);
    impl->Prepare(options);
    return std::unique_ptr<InferenceSession>(new InferenceSession(std::move(impl)));
  });
}

std::unique_ptr<InferenceSession> InferenceSession::FromBytes(const void *data, size_t size,
                                                              const SessionOptions &options) {
  const uint64_t max_bytes = MaxTensorBytesFor(options);
  return Guarded(max_bytes, [&] {
    auto impl = std::make_unique<Impl>();
    impl->max_tensor_bytes = max_bytes;
    impl->model = LoadModelFromBytes(data, size, "");
    impl->Prepare(options);
    return std::unique_ptr<InferenceSession>(new InferenceSession(std::move(impl)));
  });
}

std::unique_ptr<InferenceSession> InferenceSession::FromGraph(Graph graph,
                                                              const SessionOptions &options) {
  const uint64_t max_bytes = MaxTensorBytesFor(options);
  return Guarded(max_bytes, [&] {
    auto impl = std::make_unique<Impl>();
    impl->max_tensor_bytes = max_bytes;
    impl->model.graph = std::move(graph);
    impl->Prepare(options);
    return std::unique_ptr<InferenceSession>(new InferenceSession(std::move(impl)));
  });
}

const std::vector<TensorInfo> &InferenceSession::inputs() const { return impl_->input_infos; }
const std::vector<TensorInfo> &InferenceSession::outputs() const { return impl_->output_infos; }
const std::vector<TensorInfo> &InferenceSession::intermediates() const {
  return impl_->intermediate_infos;
}

void InferenceSession::SetProfiling(bool on) {
  std::lock_guard<std::mutex> lock(impl_->run_mutex);
  impl_->profile = on;
}

SessionProfile InferenceSession::Profile() const {
  std::lock_guard<std::mutex> lock(impl_->run_mutex);
  return impl_->Totals();
}

std::vector<Tensor> InferenceSession::Run(const std::vector<std::pair<std::string, Tensor>> &feeds,
                                          const std::vector<std::string> &output_names) {
  return Guarded(impl_->max_tensor_bytes, [&] { return impl_->Run(feeds, output_names, nullptr); });
}

std::vector<Tensor> InferenceSession::Run(const std::vector<std::pair<std::string, Tensor>> &feeds,
                                          const std::vector<std::string> &output_names,
                                          KvCache &cache) {
  OCTET_CHECK(cache.session_id_ == impl_->id,
              "the KV cache was made by another session: a cache serves the session that made it");
  return Guarded(impl_->max_tensor_bytes,
                 [&] { return impl_->Run(feeds, output_names, cache.state_.get()); });
}

std::unique_ptr<KvCache> InferenceSession::NewKvCache(int64_t reserve_rows) {
  OCTET_CHECK(reserve_rows >= 0, "a KV cache's reserve_rows must be >= 0, got ", reserve_rows);
  OCTET_CHECK(impl_->cache_slots > 0,
              "this model has no KV cache octet can hold: each present key and value must be "
              "Concat(past, new, axis=2) of a past graph input that the Concat alone reads, "
              "feeding a decoder's attention that octet's rewrites fuse (not with OCTET_QDQ=0 "
              "or rewrites off)");
  std::unique_ptr<KvCache> cache(new KvCache());
  cache->session_id_ = impl_->id;
  cache->state_ = std::make_unique<KvCacheState>();
  cache->state_->reserve = reserve_rows;
  cache->state_->nodes.resize(impl_->cache_slots);
  const Graph &g = impl_->model.graph;
  for (int v : impl_->cached_inputs) cache->inputs_.push_back(g.values[v].name);
  for (int v : impl_->cached_outputs) cache->outputs_.push_back(g.values[v].name);
  return cache;
}

KvCache::KvCache() = default;
KvCache::~KvCache() = default;
int64_t KvCache::length() const { return state_->length; }

void KvCache::Truncate(int64_t length) {
  OCTET_CHECK(length >= 0 && length <= state_->length, "a KV cache of ", state_->length,
              " positions cannot be truncated to ", length);
  state_->length = length;
}

}  // namespace octet
