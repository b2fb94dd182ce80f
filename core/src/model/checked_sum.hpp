#pragma once
// A byte or element count built as a sum of products that remembers an overflow instead of
// wrapping (the transformer kinds' numbers, transformer.cpp and swin.cpp; docs/memory-model.md
// section 12). Internal to core.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "remat/base/status.hpp"
#include "remat/model/chain.hpp"

namespace remat::detail {

class CheckedSum {
 public:
  CheckedSum& add(std::initializer_list<std::uint64_t> factors) {
    std::uint64_t product = 1;
    for (std::uint64_t f : factors) overflow_ = overflow_ || __builtin_mul_overflow(product, f, &product);
    overflow_ = overflow_ || __builtin_add_overflow(value_, product, &value_);
    return *this;
  }
  bool overflow() const { return overflow_; }
  std::uint64_t value() const { return value_; }

 private:
  std::uint64_t value_ = 0;
  bool overflow_ = false;
};

// A layer's e as named parts (ChainLayer::extraParts, which the explorer lists): each add names what
// it counts; the parts add up to the sum, which checks overflow as CheckedSum does.
class NamedSum {
 public:
  NamedSum& add(std::string name, std::initializer_list<std::uint64_t> factors) {
    CheckedSum part;
    part.add(factors);
    sum_.add(factors);
    if (part.overflow() || part.value() == 0) return *this;
    for (SavedPart& same : parts_)  // parts of one name are summed, in the order first named
      if (same.name == name) {
        same.bytes += part.value();
        return *this;
      }
    parts_.push_back({std::move(name), part.value()});
    return *this;
  }
  const CheckedSum& sum() const { return sum_; }
  void writeTo(ChainLayer& out) const {
    out.numbers.extraBytes = sum_.value();
    out.extraParts = parts_;
  }

 private:
  CheckedSum sum_;
  std::vector<SavedPart> parts_;
};

inline std::uint64_t u(std::int64_t v) { return static_cast<std::uint64_t>(v); }
inline double toD(std::uint64_t v) { return static_cast<double>(v); }

// A LayerNorm's epsilon field: in [0, 1).
inline Status checkEpsilon(double epsilon) {
  if (!(epsilon >= 0.0 && epsilon < 1.0))
    return Status::invalid("epsilon is " + std::to_string(epsilon) + ", must be in [0, 1)");
  return Status::ok();
}

// InvalidInput "<what> overflow 64-bit bytes" when any of the sums overflowed.
inline Status checkedNumbers(std::initializer_list<const CheckedSum*> sums, std::string_view what) {
  for (const CheckedSum* sum : sums)
    if (sum->overflow()) return Status::invalid(std::string(what) + " overflow 64-bit bytes");
  return Status::ok();
}

}  // namespace remat::detail
