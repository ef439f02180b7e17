// ThreadSanitizer builds only. Halide's runtime, generated with its tsan feature, calls
// __tsan_memcpy, __tsan_memset and __tsan_memmove, which clang 14's TSan library does not
// export; these forward them to the C library's, which TSan intercepts (and so checks). Weak:
// a TSan library that has them wins.
#include <cstddef>
#include <cstring>

extern "C" {

__attribute__((weak)) void* __tsan_memcpy(void* to, const void* from, std::size_t size) {
  return std::memcpy(to, from, size);
}

__attribute__((weak)) void* __tsan_memset(void* to, int byte, std::size_t size) {
  return std::memset(to, byte, size);
}

__attribute__((weak)) void* __tsan_memmove(void* to, const void* from, std::size_t size) {
  return std::memmove(to, from, size);
}

}  // extern "C"
