#pragma once
// oneDNN inside the CPU backend: the engine and stream, oneDNN's exceptions turned into Status, the
// thread count every primitive is created and run with, and the layout of the scratch that the
// interpreter allocates for an op (the user-managed scratchpad). Internal to core/src/cpu: no
// oneDNN type leaves this folder (cpu_device.hpp does not include it).
//
// Exactness: every primitive is created with scratchpad_mode::user, so oneDNN takes the scratch it
// needs from the op's workspace (wf / wb, counted by the interpreter) instead of allocating it.
// Determinism: a primitive's results depend on the thread count it was created and run with, so
// both are the device's one fixed count (ThreadScope), one thread for the smallest ops
// (kSingleThreadElements), and never change between F, R and B.
#include <cstdint>
#include <initializer_list>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <string_view>

#include "remat/base/status.hpp"

namespace remat::cpu {

// One per device: every primitive runs on this engine and stream.
struct DnnlContext {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  // Waiting on a stream is not a const operation in oneDNN's API; the stream is the context's only
  // mutable part.
  mutable dnnl::stream stream{engine};
};

// Runs `body`, which may throw dnnl::error (oneDNN's C++ API does), and returns OK or an Internal
// error "<what>: oneDNN: <message>". No exception leaves the backend.
// The message is only built on failure, so calls in the timed path do no string work.
template <typename Body>
Status dnnlTry(std::string_view what, Body&& body) {
  try {
    body();
    return Status::ok();
  } catch (const dnnl::error& e) {
    return Status::internal(std::string(what) + ": oneDNN: " + e.what());
  } catch (const std::exception& e) {
    return Status::internal(std::string(what) + ": " + e.what());
  }
}

// Sets the calling thread's OpenMP thread count to the device's for the scope of a call (oneDNN
// reads it when it creates and when it runs a primitive) and restores the previous one after.
class ThreadScope {
 public:
  explicit ThreadScope(int threads);
  ~ThreadScope();
  ThreadScope(const ThreadScope&) = delete;
  ThreadScope& operator=(const ThreadScope&) = delete;

 private:
  int previous_;
};

// The threads every core gives: OpenMP's processor count.
int everyCoreThreads();
// The calling thread's OpenMP count (what a primitive made now is created for).
int currentThreads();

// Attributes of every primitive: the user-managed scratchpad; `accumulate` adds a sum post-op, so
// the primitive adds its result into its destination instead of overwriting it.
dnnl::primitive_attr primitiveAttributes(bool accumulate = false);

// The regions of one op's scratch: each starts at a multiple of 64 bytes (a cache line, oneDNN's
// preferred alignment); bytes() is what the op needs in all.
class ScratchLayout {
 public:
  std::uint64_t add(std::uint64_t bytes);  // returns the region's offset
  std::uint64_t bytes() const { return end_; }

 private:
  std::uint64_t end_ = 0;
};

// A primitive, where its scratchpad lies inside the op's scratch, and the thread count it was
// created with, which execute() runs it with.
struct Step {
  dnnl::primitive primitive;
  dnnl::memory::desc scratchpad;
  std::uint64_t scratchpadOffset = 0;
  int threads = 1;
};

// Creates a Step from a primitive descriptor (made under the current thread count), reserving its
// scratchpad in `layout`.
template <typename Primitive, typename Descriptor>
Step makeStep(const Descriptor& pd, ScratchLayout& layout) {
  Step step{Primitive(pd), pd.scratchpad_desc(), 0, currentThreads()};
  step.scratchpadOffset = layout.add(step.scratchpad.get_size());
  return step;
}

// Ops this small (Squeeze-and-Excitation's 1x1 convolutions and activations on [N, C, 1, 1]) are
// created and run on one thread: splitting a few microseconds of work costs a fork and a barrier,
// and on a busy host each barrier waits for a descheduled thread (issue 22: EfficientNet-B0 at two
// threads on the shared 2-core VM). Fixed per op, so F, R and B still run the same primitive.
constexpr std::int64_t kSingleThreadElements = 32768;  // input plus output floats
constexpr std::int64_t kSingleThreadMacs = 4 << 20;

// One argument of a primitive: a memory descriptor over caller memory.
struct Arg {
  int id = 0;
  const dnnl::memory::desc* desc = nullptr;
  const void* data = nullptr;
};

// Executes `step` on the context's stream with the arguments and its scratchpad at
// scratch + step.scratchpadOffset, then waits. Errors name `what`.
Status execute(const DnnlContext& context, const Step& step, std::initializer_list<Arg> args, std::byte* scratch,
               std::string_view what);

// Whether oneDNN has bfloat16 convolutions and matmuls on this CPU (2.6 needs AVX-512: a CPU with
// AVX2 alone has none, and every bf16 and bf16-mixed run needs them). Probed once per process by
// making the primitive descriptors of a small forward convolution and matmul in bfloat16.
bool dnnlRunsBfloat16();
// "avx2", "avx512_core", ...: the instruction set oneDNN dispatches to here.
std::string dnnlIsaName();

// The descriptor of plain float32 memory of the given dims and tag.
dnnl::memory::desc floatDesc(const dnnl::memory::dims& dims, dnnl::memory::format_tag tag);

}  // namespace remat::cpu
