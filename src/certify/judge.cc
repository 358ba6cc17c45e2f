#include "certify/judge.h"

#include <cmath>

#include "certify/dcgm_parser.h"
#include "certify/text_lines.h"
#include "certify/training_parser.h"
#include "core/json.h"

namespace gpufleet::certify {
namespace {

constexpr std::string_view kResult = "workload result";

// Holds the first reason by precedence and its message.
struct Outcome {
  std::optional<Reason> reason;
  std::string message;
  static int rank(Reason r) {
    switch (r) {
      case Reason::HardwareFailure: return 0;
      case Reason::Infrastructure: return 1;
      case Reason::WorkloadFailed: return 2;
      case Reason::MeasurementTimeout: return 3;
      case Reason::ThresholdViolated: return 4;
    }
    return 5;
  }
  void add(Reason r, std::string m) {
    if (!reason || rank(r) < rank(*reason)) {
      reason = r;
      message = std::move(m);
    }
  }
};

std::string join_ints(const std::vector<int>& v) {
  std::string s;
  for (int i : v) s += (s.empty() ? "" : ",") + std::to_string(i);
  return s;
}

}  // namespace

std::string_view output_kind_name(OutputKind k) noexcept {
  switch (k) {
    case OutputKind::Nccl: return "nccl";
    case OutputKind::Dcgm: return "dcgm";
    case OutputKind::Training: return "training";
    case OutputKind::Result: return "result";
  }
  return "result";
}

WorkloadResult parse_workload_result(std::string_view text) {
  check_output_size(kResult, text);
  core::Value doc;
  try {
    doc = core::parse_json(text, "workload result");
  } catch (const core::ParseError& e) {
    throw json_output_error(kResult, text, e);
  }
  auto fail = [](const std::string& what) { throw OutputError(kResult, 0, {}, what); };
  if (!doc.is_map()) fail("the result is not a JSON object");
  WorkloadResult r;
  for (const auto& entry : doc.as_map()) {
    if (entry.key == "metrics") {
      if (!entry.value.is_map()) fail("\"metrics\" is not an object");
      for (const auto& m : entry.value.as_map()) {
        if (!is_known_metric(m.key)) {
          fail("metric \"" + m.key.substr(0, 100) +
               "\" is not a known metric (see docs/certify.md)");
        }
        if (!m.value.is_number() || !std::isfinite(m.value.as_double())) {
          fail("metric \"" + m.key + "\" is not a finite number");
        }
        r.metrics[m.key] = m.value.as_double();
      }
    } else if (entry.key == "status") {
      const std::string* s = entry.value.if_string();
      if (s == nullptr || (*s != "Succeeded" && *s != "Failed")) {
        fail("\"status\" must be \"Succeeded\" or \"Failed\"");
      }
      r.succeeded = *s == "Succeeded";
    } else if (entry.key == "message") {
      const std::string* s = entry.value.if_string();
      if (s == nullptr) fail("\"message\" is not a string");
      r.message = s->substr(0, 1000);
    } else {
      fail("unknown key \"" + entry.key.substr(0, 100) + "\" (allowed: metrics, status, message)");
    }
  }
  return r;
}

Judgement judge_output(OutputKind kind, std::string_view output, int exit_code,
                       const ThresholdSet& thresholds, const ThresholdContext& context,
                       const JudgeOptions& options) {
  Judgement j;
  Outcome o;
  try {
    switch (kind) {
      case OutputKind::Nccl: {
        NcclResult r = parse_nccl(output);
        if (!r.failures.empty())
          o.add(Reason::WorkloadFailed, "nccl-tests failed: " + r.failures.front());
        j.transports = r.transports;
        std::optional<double> busbw;
        if (!r.rows.empty()) busbw = nccl_metrics(r, options.statistic).bus_bandwidth_gbs;
        // Before the thresholds: a run over sockets says why its bandwidth is low.
        if (auto wrong = transport_violation(r.transports, r.hosts.size(), options.transport, busbw,
                                             options.host_nodes)) {
          o.add(Reason::ThresholdViolated, *wrong);
        }
        if (!r.rows.empty()) {
          NcclMetrics m = nccl_metrics(r, options.statistic);
          j.metrics["busBandwidthGBps"] = m.bus_bandwidth_gbs;
          j.metrics["algBandwidthGBps"] = m.alg_bandwidth_gbs;
          j.metrics["ncclWrongElements"] = static_cast<double>(m.wrong);
          if (m.wrong > 0) {
            o.add(Reason::HardwareFailure,
                  std::to_string(m.wrong) + " wrong elements: the collective corrupted data");
          }
          if (r.out_of_bounds > 0) {
            o.add(Reason::HardwareFailure,
                  std::to_string(r.out_of_bounds) + " out-of-bounds values in the results");
          }
        }
        break;
      }
      case OutputKind::Dcgm: {
        DcgmReport r = parse_dcgm(output);
        j.metrics["dcgmFailedResults"] = r.failures();
        j.metrics["dcgmWarnResults"] = r.warnings();
        j.failed_gpus = r.failed_gpus();
        for (const DcgmResult& res : r.results) {
          if (res.status != DcgmStatus::Fail) continue;
          std::string msg = "DCGM " + res.test + " failed on GPU " + join_ints(res.gpus);
          if (!res.warnings.empty()) {
            const DcgmWarning& w = res.warnings.front();
            if (w.error_id) msg += " (error " + std::to_string(*w.error_id) + ")";
            if (!w.text.empty()) msg += ": " + w.text;
          }
          o.add(Reason::HardwareFailure, msg);
          break;
        }
        break;
      }
      case OutputKind::Training: {
        TrainingMetrics t = parse_training(output);
        j.metrics["avgStepTimeSec"] = t.avg_step_time_sec(options.training_warmup_intervals);
        if (auto tf = t.avg_tflops_per_gpu(options.training_warmup_intervals)) {
          j.metrics["avgTFLOPsPerGPU"] = *tf;
        }
        j.metrics["goodputRatio"] = t.goodput_ratio();
        if (!t.completed()) {
          o.add(Reason::WorkloadFailed, "training stopped at iteration " +
                                            std::to_string(t.last_iteration) + " of " +
                                            std::to_string(t.total_iterations));
        }
        break;
      }
      case OutputKind::Result: {
        WorkloadResult r = parse_workload_result(output);
        j.metrics = r.metrics;
        if (!r.succeeded) {
          o.add(Reason::WorkloadFailed,
                "the workload reported failure" + (r.message.empty() ? "" : ": " + r.message));
        }
        break;
      }
    }
  } catch (const OutputError& e) {
    o.add(Reason::WorkloadFailed, e.what());
  }
  if (exit_code != 0) {
    o.add(Reason::WorkloadFailed, std::string(output_kind_name(kind)) +
                                      " workload exited with status " + std::to_string(exit_code));
  }
  j.thresholds = thresholds.evaluate(j.metrics, context);
  for (const ThresholdOutcome& t : j.thresholds) {
    if (t.passed) continue;
    o.add(t.value ? Reason::ThresholdViolated : Reason::MeasurementTimeout, t.message);
  }
  j.passed = !o.reason.has_value();
  j.reason = o.reason;
  j.message =
      j.passed ? "passed " + std::to_string(j.thresholds.size()) + " threshold(s)" : o.message;
  return j;
}

Judgement judge_timeout(const ThresholdSet& thresholds, std::string_view what) {
  Judgement j;
  j.thresholds = thresholds.evaluate({}, {});
  j.reason = Reason::MeasurementTimeout;
  j.message = std::string(what) + " did not report a measurement before its timeout";
  return j;
}

}  // namespace gpufleet::certify
