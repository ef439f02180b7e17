#include "knobs.h"

#include <algorithm>
#include <sstream>

namespace poolgen {

using namespace Halide;

std::vector<std::string> split(const std::string& s, char separator) {
  std::vector<std::string> parts;
  std::stringstream stream(s);
  std::string part;
  while (std::getline(stream, part, separator)) {
    if (!part.empty()) parts.push_back(part);
  }
  return parts;
}

bool sets_knob(const std::string& cpu_schedule, const std::string& name) {
  for (const std::string& entry : split(cpu_schedule, '/')) {
    const size_t at = entry.find('@');
    for (const std::string& knob : split(at == std::string::npos ? entry : entry.substr(at + 1), ',')) {
      const size_t colon = knob.find(':');
      if (colon == std::string::npos || knob.substr(0, colon) != name) continue;
      const std::string value = knob.substr(colon + 1);
      if (value != "0" && value != "false") return true;
    }
  }
  return false;
}

namespace {

// How specific `key` is for `target`: its feature count, or -1 where it does not apply.
int specificity(const Target& key, const Target& target) {
  if (key.arch != target.arch || key.bits != target.bits) return -1;
  int features = 0;
  for (int f = 0; f < Target::FeatureEnd; ++f) {
    const auto feature = static_cast<Target::Feature>(f);
    if (!key.has_feature(feature)) continue;
    if (!target.has_feature(feature)) return -1;
    ++features;
  }
  return features;
}

}  // namespace

Knobs Knobs::for_target(const std::string& cpu_schedule, const Target& target) {
  std::string common;
  std::vector<std::string> specific;  // the most specific entries, in their order
  int best = -1;
  bool first = true;
  for (const std::string& entry : split(cpu_schedule, '/')) {
    const size_t at = entry.find('@');
    if (at == std::string::npos) {
      _halide_user_assert(first) << "cpu_schedule: only the first entry may omit its target: " << entry;
      common = entry;
    } else {
      const std::string key = entry.substr(0, at);
      _halide_user_assert(Target::validate_target_string(key))
          << "cpu_schedule: not a Halide target: " << key;
      const int score = specificity(Target(key), target);
      if (score > best) {
        best = score;
        specific.clear();
      }
      if (score == best) specific.push_back(entry.substr(at + 1));
    }
    first = false;
  }
  Knobs knobs;
  // The tuner varies some knobs only (tools/tune.py), so a tuned entry overrides the hand
  // values knob by knob and keeps the rest (say, the halved vectors a family goes without);
  // entries of one target apply in order (a variant's hand knobs, then its tuning). An
  // autoscheduler, on either side, takes nothing from the other.
  const auto names_autoscheduler = [](const std::string& entry) {
    return entry.find("autoscheduler:") != std::string::npos;
  };
  std::vector<std::string> layers{common};
  if (best >= 0) {
    const auto found = std::find_if(specific.begin(), specific.end(), names_autoscheduler);
    if (found != specific.end()) {
      layers = {*found};
    } else if (names_autoscheduler(common)) {
      layers = specific;
    } else {
      layers.insert(layers.end(), specific.begin(), specific.end());
    }
  }
  for (const std::string& entry : layers) {
    knobs.entry_ += (knobs.entry_.empty() ? "" : " then ") + entry;
    for (const std::string& knob : split(entry, ',')) {
      const size_t colon = knob.find(':');
      _halide_user_assert(colon != std::string::npos && colon > 0)
          << "cpu_schedule: expected name:value, got " << knob;
      knobs.values_[knob.substr(0, colon)] = knob.substr(colon + 1);
    }
  }
  return knobs;
}

void Knobs::take(const char* name, int* value) {
  auto it = values_.find(name);
  if (it == values_.end()) return;
  size_t used = 0;
  int parsed = 0;
  try {
    parsed = std::stoi(it->second, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  _halide_user_assert(used > 0 && used == it->second.size())
      << "cpu_schedule: knob " << name << " expects a 32-bit integer, got " << it->second;
  *value = parsed;
  taken_.insert(name);
}

void Knobs::take(const char* name, bool* value) {
  auto it = values_.find(name);
  if (it == values_.end()) return;
  _halide_user_assert(it->second == "true" || it->second == "false")
      << "cpu_schedule: knob " << name << " expects true or false, got " << it->second;
  *value = it->second == "true";
  taken_.insert(name);
}

std::string Knobs::autoscheduler() const {
  auto it = values_.find("autoscheduler");
  return it == values_.end() ? "" : it->second;
}

void Knobs::check_all_taken() const {
  for (const auto& [name, value] : values_) {
    // The build gives every family of POOLGEN_AVX512_NARROW the lanes below which its calls run
    // another variant: a fact about the calls, which a schedule that lays out no code by width
    // (the channels-last scatter's) has no use for.
    if (name == "handed_off_below") continue;
    _halide_user_assert(taken_.count(name)) << "cpu_schedule: this schedule has no knob " << name
                                    << " (entry \"" << entry_ << "\")";
  }
}

void Knobs::autoschedule(const std::vector<Func>& outputs, const Target& target) {
  // Every other knob is the autoscheduler's own parameter (Adams2019: parallelism, beam_size).
  AutoschedulerParams params(autoscheduler());
  params.extra["parallelism"] = "16";  // a server's cores: the machine it runs on is unknown here
  for (const auto& [name, value] : values_) {
    if (name != "autoscheduler") params.extra[name] = value;
  }
  Pipeline(outputs).apply_autoscheduler(target, params);
}

}  // namespace poolgen
