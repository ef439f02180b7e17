// A vector of at most N elements held in place: a call's views and a kernel's arguments, built
// on every call, cost no allocation (a heap block and its release were about 15% of a small
// call's instructions).
#pragma once

#include <array>
#include <cstddef>
#include <cstdlib>
#include <initializer_list>

namespace poolgen::detail {

template <typename T, size_t N>
class InlineVector {
 public:
  InlineVector() = default;
  InlineVector(std::initializer_list<T> items) {
    for (const T& item : items) push_back(item);
  }
  // Capacities are fixed by the callers (three views, a kernel's arguments): going past one is
  // a bug in the runtime, not in a call, and stops the program.
  void push_back(const T& item) {
    if (size_ == N) std::abort();
    items_[size_++] = item;
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* data() { return items_.data(); }
  T& operator[](size_t i) { return items_[i]; }
  const T& operator[](size_t i) const { return items_[i]; }
  const T& front() const { return items_[0]; }
  T* begin() { return items_.data(); }
  T* end() { return items_.data() + size_; }
  const T* begin() const { return items_.data(); }
  const T* end() const { return items_.data() + size_; }

 private:
  std::array<T, N> items_;  // default-initialized: slots past size() are never read
  size_t size_ = 0;
};

}  // namespace poolgen::detail
