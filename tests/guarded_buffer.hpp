// A test buffer fenced by inaccessible pages. The kernels are compiled by Halide, not by the
// sanitizers, so an out-of-bounds access by them is only caught if it touches memory the MMU
// refuses: the data sits between PROT_NONE guard pages, flush against one of them, and the slack
// on the other side (the rest of the last page) holds a canary pattern that check() verifies.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace poolgen::test {

class GuardedBuffer {
 public:
  // Which end of the data touches a guard page (the other end borders the canary slack).
  enum Align { catch_overrun, catch_underrun };
  static constexpr uint8_t kCanary = 0xCB;

  GuardedBuffer() = default;
  explicit GuardedBuffer(size_t bytes, Align align = catch_overrun) : size_(bytes) {
    page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    // At least one data page even for 0 bytes, so every buffer has its own valid address.
    data_pages_ = (bytes + page_ - 1) / page_;
    if (data_pages_ == 0) data_pages_ = 1;
    mapped_ = (data_pages_ + 2) * page_;
    void* m = mmap(nullptr, mapped_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
      std::fprintf(stderr, "GuardedBuffer: mmap of %zu bytes failed\n", mapped_);
      std::abort();
    }
    base_ = static_cast<uint8_t*>(m);
    region_ = base_ + page_;
    set_protection(PROT_READ | PROT_WRITE);
    for (size_t i = 0; i < data_pages_ * page_; ++i) region_[i] = kCanary;
    const size_t slack = data_pages_ * page_ - bytes;
    data_ = align == catch_overrun ? region_ + slack : region_;
  }
  ~GuardedBuffer() {
    if (base_) munmap(base_, mapped_);
  }
  GuardedBuffer(GuardedBuffer&& other) noexcept { *this = static_cast<GuardedBuffer&&>(other); }
  GuardedBuffer& operator=(GuardedBuffer&& other) noexcept {
    if (this != &other) {
      if (base_) munmap(base_, mapped_);
      base_ = other.base_, region_ = other.region_, data_ = other.data_;
      size_ = other.size_, page_ = other.page_, data_pages_ = other.data_pages_;
      mapped_ = other.mapped_;
      other.base_ = nullptr;
    }
    return *this;
  }
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

  // Read-only while a call must not write (an input): any write faults at once.
  void protect() { set_protection(PROT_READ); }
  void unprotect() { set_protection(PROT_READ | PROT_WRITE); }

  // True when the slack beside the data still holds the canary (no write that stayed inside
  // the page escaped the data).
  bool check() const {
    if (!base_) return true;
    for (uint8_t* p = region_; p < data_; ++p) {
      if (*p != kCanary) return false;
    }
    for (uint8_t* p = data_ + size_; p < region_ + data_pages_ * page_; ++p) {
      if (*p != kCanary) return false;
    }
    return true;
  }

 private:
  void set_protection(int prot) {
    if (base_ && mprotect(region_, data_pages_ * page_, prot) != 0) {
      std::fprintf(stderr, "GuardedBuffer: mprotect failed\n");
      std::abort();
    }
  }

  uint8_t* base_ = nullptr;    // the mapping: guard page, data pages, guard page
  uint8_t* region_ = nullptr;  // the data pages
  uint8_t* data_ = nullptr;
  size_t size_ = 0, page_ = 0, data_pages_ = 0, mapped_ = 0;
};

}  // namespace poolgen::test
