// Golden cases as GoogleTest parameter lists (shared by reference_test and golden_test).
#pragma once

#include <cctype>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "golden.hpp"

#ifndef POOLGEN_GOLDEN_DIR
#error "POOLGEN_GOLDEN_DIR must name the directory of the golden vectors"
#endif

namespace poolgen::golden {

// Loads every case; a load failure becomes one case whose op carries the error, so the test
// run reports it instead of crashing while tests are being registered.
inline std::vector<Case> cases_for_gtest() {
  try {
    std::vector<Case> all = load_all(POOLGEN_GOLDEN_DIR);
    if (all.empty()) throw std::runtime_error("no golden cases in " POOLGEN_GOLDEN_DIR);
    return all;
  } catch (const std::exception& e) {
    Case c;
    c.name = "load_error";
    c.op = std::string("error: ") + e.what();
    return {c};
  }
}

// Every case, loaded once per process.
inline const std::vector<Case>& all_cases() {
  static const std::vector<Case> cases = cases_for_gtest();
  return cases;
}

inline std::string sanitize(std::string n) {
  for (char& ch : n) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return n;
}

// GoogleTest prints a parameter when it lists tests; the case's name says it all.
inline void PrintTo(const Case& c, std::ostream* out) {
  *out << c.file << ":" << c.name << " (" << dtype_str(c.dtype) << ", " << layout_str(c.layout)
       << ")";
}

inline std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return sanitize(info.param.name);
}

// One library run of a case: the index dtype and the layout every tensor of the call has (the
// case's own layout, or the other one: layouts must give the same results).
struct LibraryRun {
  size_t case_index = 0;
  DType index_dtype = DType::i64;
  Layout layout = Layout::contiguous;
  const Case& golden() const { return all_cases()[case_index]; }
};

inline std::vector<LibraryRun> runs_for_gtest() {
  std::vector<LibraryRun> runs;
  for (size_t i = 0; i < all_cases().size(); ++i) {
    for (DType idx : {DType::i64, DType::i32}) {
      for (Layout l : {Layout::contiguous, Layout::channels_last}) runs.push_back({i, idx, l});
    }
  }
  return runs;
}

inline void PrintTo(const LibraryRun& r, std::ostream* out) {
  PrintTo(r.golden(), out);
  *out << " with " << dtype_str(r.index_dtype) << " indices, run "
       << layout_str(r.layout);
}

// <case>_<index dtype>_<layout>, e.g. t2d_f16_cl_k3s2p1_i32_contiguous.
inline std::string run_name(const ::testing::TestParamInfo<LibraryRun>& info) {
  const LibraryRun& r = info.param;
  return sanitize(r.golden().name) + "_" + dtype_str(r.index_dtype) + "_" + layout_str(r.layout);
}

}  // namespace poolgen::golden
