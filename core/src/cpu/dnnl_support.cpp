#include "dnnl_support.hpp"

#include <omp.h>

#include <unordered_map>

namespace remat::cpu {

ThreadScope::ThreadScope(int threads) : previous_(omp_get_max_threads()) {
  // A dynamic team size would let OpenMP run a primitive on fewer threads than it was created for.
  omp_set_dynamic(0);
  omp_set_num_threads(threads);
}

ThreadScope::~ThreadScope() { omp_set_num_threads(previous_); }

int everyCoreThreads() { return omp_get_num_procs(); }

int currentThreads() { return omp_get_max_threads(); }

dnnl::primitive_attr primitiveAttributes(bool accumulate) {
  dnnl::primitive_attr attributes;
  attributes.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (accumulate) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    attributes.set_post_ops(ops);
  }
  return attributes;
}

std::uint64_t ScratchLayout::add(std::uint64_t bytes) {
  constexpr std::uint64_t kAlign = 64;
  const std::uint64_t offset = (end_ + kAlign - 1) / kAlign * kAlign;
  end_ = offset + bytes;
  return offset;
}

Status execute(const DnnlContext& context, const Step& step, std::initializer_list<Arg> args, std::byte* scratch,
               std::string_view what) {
  const ThreadScope threads(step.threads);
  return dnnlTry(what, [&] {
    std::unordered_map<int, dnnl::memory> memories;
    for (const Arg& arg : args)
      memories.emplace(arg.id, dnnl::memory(*arg.desc, context.engine, const_cast<void*>(arg.data)));
    if (step.scratchpad.get_size() > 0)
      memories.emplace(DNNL_ARG_SCRATCHPAD,
                       dnnl::memory(step.scratchpad, context.engine, scratch + step.scratchpadOffset));
    step.primitive.execute(context.stream, memories);
    context.stream.wait();
  });
}

dnnl::memory::desc floatDesc(const dnnl::memory::dims& dims, dnnl::memory::format_tag tag) {
  return dnnl::memory::desc(dims, dnnl::memory::data_type::f32, tag);
}

bool dnnlRunsBfloat16() {
  static const bool runs = [] {
    using dnnl::memory;
    const memory::data_type bf16 = memory::data_type::bf16;
    Status made = dnnlTry("bf16 probe", [&] {
      const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
      const memory::desc src({1, 16, 8, 8}, bf16, memory::format_tag::any);
      const memory::desc weights({16, 16, 1, 1}, bf16, memory::format_tag::any);
      const memory::desc dst({1, 16, 8, 8}, bf16, memory::format_tag::any);
      const dnnl::convolution_forward::desc conv(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                                 src, weights, dst, {1, 1}, {0, 0}, {0, 0});
      const dnnl::convolution_forward::primitive_desc convPd(conv, engine);
      const memory::desc a({16, 16}, bf16, memory::format_tag::ab);
      const dnnl::matmul::primitive_desc matmulPd(dnnl::matmul::desc(a, a, a), engine);
    });
    return made.isOk();
  }();
  return runs;
}

std::string dnnlIsaName() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "another";
  }
}

}  // namespace remat::cpu
