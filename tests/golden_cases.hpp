// Golden cases as a GoogleTest parameter list (shared by reference_test and golden_test).
#pragma once

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

// GoogleTest prints a parameter when it lists tests; the case's name says it all.
inline void PrintTo(const Case& c, std::ostream* out) { *out << c.file << ":" << c.name; }

inline std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string n = info.param.name;
  for (char& ch : n) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return n;
}

}  // namespace poolgen::golden
