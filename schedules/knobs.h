// Which CPU schedule a kernel gets on each of its targets: a hand schedule's knob values, or a
// Halide autoscheduler. The choice arrives in one GeneratorParam string, so that one multitarget
// library can hold a different tuning per variant:
//
//   cpu_schedule = <knobs>[/<halide target>@<knobs>...]     knobs = name:value[,name:value...]
//
// (GenGen takes no '=' inside a parameter's value.)
// The leading entry (schedules/cpu_knobs.cmake) serves every target; an entry naming a target
// serves the variants of the same architecture and bits that have all its features; the most
// specific such entries (several for one target apply in order: a variant's hand knobs, then its
// tuning) override the leading one knob by knob (tuned entries come from
// schedules/<target>/tuned.txt, written by tools/tune.py, which varies only some knobs). The OS
// is ignored: a tuning measured on Linux serves Windows too. The knob `autoscheduler:<name>`
// (Adams2019, Mullapudi2016) replaces the hand schedule, and its entry then stands alone; its
// other knobs are that autoscheduler's parameters (parallelism: 16 unless given).
#pragma once

#include "Halide.h"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace poolgen {

class Knobs {
 public:
  // The knobs the `cpu_schedule` string gives `target`.
  static Knobs for_target(const std::string& cpu_schedule, const Halide::Target& target);

  // Overwrite *value with the knob's value, when the entry sets it.
  void take(const char* name, int* value);
  void take(const char* name, bool* value);

  // The autoscheduler the entry names, or "" for the hand schedule.
  std::string autoscheduler() const;

  // Fails generation on a knob the schedule has no use for (a typo would otherwise be ignored).
  void check_all_taken() const;

  // Runs the entry's autoscheduler on `outputs` (whose estimates, and their inputs', are set).
  void autoschedule(const std::vector<Halide::Func>& outputs, const Halide::Target& target);

 private:
  std::map<std::string, std::string> values_;
  std::set<std::string> taken_;
  std::string entry_;  // as written, for error messages
};

// The non-empty parts of `s` between separators ("7,14" -> "7", "14").
std::vector<std::string> split(const std::string& s, char separator);

// Whether some entry of `cpu_schedule`, for any target, sets knob `name` to other than 0 or
// false: what a generator asks where the knob changes a kernel's signature, which every variant
// of one multitarget library shares (cmake/PoolgenKernels.cmake asks the same of the string).
bool sets_knob(const std::string& cpu_schedule, const std::string& name);

// Hand schedule S with its knobs for `target`, which a generator may ask how to define its
// algorithm; none where the knobs name an autoscheduler.
template <class S>
std::optional<S> hand_written_schedule(const std::string& cpu_schedule,
                                       const Halide::Target& target) {
  Knobs knobs = Knobs::for_target(cpu_schedule, target);
  if (!knobs.autoscheduler().empty()) return std::nullopt;
  S schedule;
  schedule.read(knobs);
  return schedule;
}

// Applies hand schedule S (a struct with read(Knobs&) and apply(stages, target)) with its knobs
// for `target`, or the autoscheduler the knobs name.
template <class S, class Stages>
void apply_cpu_schedule(const std::string& cpu_schedule, const Stages& stages,
                        const std::vector<Halide::Func>& outputs, const Halide::Target& target) {
  Knobs knobs = Knobs::for_target(cpu_schedule, target);
  if (!knobs.autoscheduler().empty()) {
    knobs.autoschedule(outputs, target);
    return;
  }
  S schedule;
  schedule.read(knobs);
  knobs.check_all_taken();
  schedule.apply(stages, target);
}

}  // namespace poolgen
