#pragma once
// A byte or element count built as a sum of products that remembers an overflow instead of
// wrapping (the Swin kinds' numbers, swin.cpp; docs/memory-model.md section 12.6). Internal to core.
#include <cstdint>
#include <initializer_list>

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

}  // namespace remat::detail
