// Timeline exports: CSV and the JSON timeline read back to the very same numbers (doubles
// included), the Chrome trace has the fields Perfetto needs, files are chosen by extension and
// written atomically, and the readers reject broken files with messages that say where.
#include "remat/report/exporters.hpp"

#include <gtest/gtest.h>

#include <clocale>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "chain_helpers.hpp"
#include "golden.hpp"
#include "remat/cpu/cpu_device.hpp"
#include "remat/exec/interpreter.hpp"
#include "remat/memory/simulator.hpp"
#include "remat/model/precision.hpp"
#include "remat/report/snapshot.hpp"
#include "remat/report/timeline_formats.hpp"
#include "timeline_checks.hpp"

namespace remat {
namespace {

// A predicted and two measured timelines of a golden chain with extras and recomputes, with
// names that need CSV quoting.
std::vector<Timeline> sampleTimelines() {
  Chain chain = testing::chainFromJson(testing::goldenExamples().at(2).at("chain"));
  chain.layers[0].name = "conv, \"first\"";
  Plan plan{{2}};
  auto sim = simulate(chain, plan);
  EXPECT_TRUE(sim.isOk());
  std::vector<Timeline> out;
  out.push_back(sim->timeline);
  out.back().planner = "uniform:2";
  cpu::CpuDevice device;
  RunOptions options;
  options.steps = 2;
  options.planner = "dp,linear";
  auto run = runPlan(chain, plan, device, {}, options);
  EXPECT_TRUE(run.isOk()) << run.status().message();
  for (const Timeline& t : run->timelines) out.push_back(t);
  out.back().entries[0].timeUs = 0.1 + 0.2;  // a double with no short decimal form
  return out;
}

TEST(Exporters, CsvRoundTripsExactly) {
  const auto timelines = sampleTimelines();
  const std::string csv = timelinesToCsv(timelines);
  EXPECT_EQ(csv.substr(0, csv.find('\n')), kTimelineCsvHeader);
  EXPECT_EQ(
      csv.substr(0, 95).find("planner,run,op_index,op,layer,layer_name,phase,time_us,footprint_bytes,live_after_bytes"),
      0u);
  auto back = parseTimelinesCsv(csv, "t.csv");
  ASSERT_TRUE(back.isOk()) << back.status().message();
  testing::expectSameTimelines(timelines, *back);
  // SEED rows leave the layer empty.
  EXPECT_NE(csv.find(",SEED,,,backward,"), std::string::npos);
}

TEST(Exporters, JsonTimelineRoundTripsExactly) {
  const auto timelines = sampleTimelines();
  const std::string text = timelinesToJson(timelines);
  auto back = parseTimelinesJson(text, "t.json");
  ASSERT_TRUE(back.isOk()) << back.status().message();
  testing::expectSameTimelines(timelines, *back);
  const auto j = nlohmann::json::parse(text);
  EXPECT_EQ(j["format"], kTimelineFormat);
  EXPECT_EQ(j["timelines"][1]["source"], "cpu");
  EXPECT_EQ(j["timelines"][1]["dynamic_peak_bytes"], timelines[1].dynamicPeakBytes());
}

TEST(Exporters, ChromeTraceHasCompleteEventsAndCounters) {
  const auto timelines = sampleTimelines();
  const auto j = nlohmann::json::parse(timelinesToChromeTrace(timelines));
  ASSERT_TRUE(j["traceEvents"].is_array());
  std::map<int, std::size_t> complete, counters;
  std::map<int, double> end;
  for (const auto& e : j["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph") && e.contains("pid") && e.contains("name"));
    const int pid = e["pid"];
    if (e["ph"] == "X") {
      ASSERT_TRUE(e["ts"].is_number() && e["dur"].is_number() && e.contains("tid"));
      EXPECT_DOUBLE_EQ(e["ts"].get<double>(), end[pid]) << "ops are laid end to end";
      end[pid] = e["ts"].get<double>() + e["dur"].get<double>();
      const std::string cat = e["cat"];
      EXPECT_TRUE(cat == "forward" || cat == "recompute" || cat == "backward") << cat;
      EXPECT_TRUE(e["args"]["footprint_bytes"].is_number_unsigned());
      ++complete[pid];
    } else if (e["ph"] == "C") {
      ASSERT_TRUE(e["ts"].is_number());
      for (const auto& [k, v] : e["args"].items()) EXPECT_TRUE(v.is_number()) << k;
      ++counters[pid];
    }
  }
  ASSERT_EQ(complete.size(), timelines.size());
  for (std::size_t i = 0; i < timelines.size(); ++i) {
    EXPECT_EQ(complete[int(i) + 1], timelines[i].entries.size());
    EXPECT_EQ(counters[int(i) + 1], timelines[i].entries.size() + 1);
    double total = 0;
    for (const auto& e : timelines[i].entries) total += e.timeUs;
    if (total > 0) {
      EXPECT_NEAR(end[int(i) + 1], total, 1e-6 * total);
    }
  }
}

TEST(TimelineFormats, OneTableChoosesByTheLongestExtension) {
  std::vector<std::string_view> names;
  for (const TimelineFormat& format : timelineFormats()) names.push_back(format.name);
  EXPECT_EQ(names, (std::vector<std::string_view>{"csv", "chrome-trace", "json", "pytorch-snapshot-json",
                                                  "pytorch-snapshot", "pytorch-snapshot-pkl"}));
  EXPECT_EQ((*timelineFormatForPath("a/b.CSV"))->name, "csv");
  EXPECT_EQ((*timelineFormatForPath("x.trace.json"))->name, "chrome-trace");
  EXPECT_EQ((*timelineFormatForPath("x.Trace.JSON"))->name, "chrome-trace");
  EXPECT_EQ((*timelineFormatForPath("x.json"))->name, "json");
  EXPECT_FALSE((*timelineFormatForPath("x.trace.json"))->readable());
  const Status unknown = timelineFormatForPath("x.txt").status();
  EXPECT_EQ(unknown.code(), ErrorCode::InvalidInput);
  EXPECT_EQ(unknown.message(),
            "x.txt: unknown timeline format; use a name ending in .csv, .trace.json, .json, .snapshot.json, "
            ".pickle or .pkl");
  // The CLI's --timeline help lists every row, with its note.
  EXPECT_EQ(timelineFormatsHelp(),
            ".csv, .trace.json (Chrome/Perfetto), .json, .snapshot.json (PyTorch memory snapshot, JSON), .pickle "
            "(PyTorch memory snapshot, for pytorch.org/memory_viz) or .pkl (PyTorch memory snapshot)");
  // Each row's writer is what writeTimelines writes for its extension.
  const auto timelines = sampleTimelines();
  EXPECT_EQ((*timelineFormatForPath("t.csv"))->write(timelines), timelinesToCsv(timelines));
  EXPECT_EQ((*timelineFormatForPath("t.json"))->write(timelines), timelinesToJson(timelines));
}

TEST(Exporters, FilesByExtensionAndLocaleIndependent) {
  // A locale with a decimal comma must not leak into the files.
  const bool german = std::setlocale(LC_ALL, "de_DE.UTF-8") != nullptr;
  const auto timelines = sampleTimelines();
  const auto folder = std::filesystem::temp_directory_path() / ("remat_export_" + std::to_string(::getpid()));
  std::filesystem::create_directories(folder);
  for (const char* name : {"t.csv", "t.json", "t.trace.json"}) {
    const std::string path = (folder / name).string();
    ASSERT_TRUE(writeTimelines(path, timelines).isOk());
    if (std::string(name) == "t.trace.json") {
      EXPECT_EQ(readTimelines(path).status().message(),
                path +
                    ": a Chrome trace is export-only; read the .csv, .json, .snapshot.json, .pickle or .pkl "
                    "timeline instead");
      continue;
    }
    auto back = readTimelines(path);
    ASSERT_TRUE(back.isOk()) << back.status().message();
    testing::expectSameTimelines(timelines, *back);
  }
  std::size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << "temporary file left behind";
    ++files;
  }
  EXPECT_EQ(files, 3u);
  std::filesystem::remove_all(folder);
  if (german) std::setlocale(LC_ALL, "C");
  EXPECT_EQ(readTimelines((folder / "missing.csv").string()).status().code(), ErrorCode::IoError);
}

// Every format carries the step options it was predicted or measured under (precision included),
// and reads them back; a timeline without them stays without.
TEST(Exporters, StepOptionsTravelWithEveryFormat) {
  Chain chain = testing::chainFromJson(testing::goldenExamples().at(2).at("chain"));
  const StepOptions mixed{OptimizerKind::AdamW, false, GradMode::OnBackward, Precision::Bf16Mixed};
  auto stepped = withStepOptions(chain, mixed);
  ASSERT_TRUE(stepped.isOk()) << stepped.status().message();
  auto sim = simulate(*stepped, Plan{{2}});
  ASSERT_TRUE(sim.isOk());
  ASSERT_EQ(sim->timeline.step, mixed);
  Timeline unknown = sim->timeline;
  unknown.step.reset();
  unknown.run = 1;
  const std::vector<Timeline> timelines = {sim->timeline, unknown};
  auto csv = parseTimelinesCsv(timelinesToCsv(timelines), "t.csv");
  ASSERT_TRUE(csv.isOk()) << csv.status().message();
  testing::expectSameTimelines(timelines, *csv);
  EXPECT_NE(timelinesToCsv(timelines).find(",adamw,off,on-backward,bf16-mixed\n"), std::string::npos);
  auto json = parseTimelinesJson(timelinesToJson(timelines), "t.json");
  ASSERT_TRUE(json.isOk()) << json.status().message();
  testing::expectSameTimelines(timelines, *json);
  const auto trace = nlohmann::json::parse(timelinesToChromeTrace(timelines));
  EXPECT_EQ(trace["otherData"]["timelines"][0]["step"]["precision"], "bf16-mixed");
  EXPECT_FALSE(trace["otherData"]["timelines"][1].contains("step"));
  auto snapshot = parseSnapshot(timelinesToSnapshotJson(timelines), "t.snapshot.json");
  ASSERT_TRUE(snapshot.isOk()) << snapshot.status().message();
  ASSERT_EQ(snapshot->size(), 2u);
  EXPECT_EQ((*snapshot)[0].step, mixed);
  EXPECT_FALSE((*snapshot)[1].step.has_value());
}

TEST(Exporters, StepOptionsThatAreNotNamesAreLocated) {
  const std::string header = kTimelineCsvHeader;
  auto csv = parseTimelinesCsv(header + "\np,0,0,F,1,L1,forward,1,0,0,cpu,0,adamw,on,static,bf17\n", "s.csv");
  ASSERT_FALSE(csv.isOk());
  EXPECT_NE(csv.status().message().find("line 2, column 16 'precision'"), std::string::npos) << csv.status().message();
  EXPECT_NE(csv.status().message().find("bf17"), std::string::npos);
  auto json = parseTimelinesJson(R"({"format": "remat-timeline/1", "timelines": [{"planner": "p", "source": "cpu",
      "run": 0, "static_bytes": 0, "step": {"optimizer": "rmsprop", "foreach": true, "grads": "static",
      "precision": "fp32"}, "layer_names": [], "entries": []}]})",
                                 "s.json");
  ASSERT_FALSE(json.isOk());
  EXPECT_NE(json.status().message().find("timelines[0], step"), std::string::npos) << json.status().message();
  EXPECT_NE(json.status().message().find("rmsprop"), std::string::npos);
}

TEST(Exporters, ReadersSayWhatIsWrong) {
  const std::string header = kTimelineCsvHeader;
  auto noColumn = parseTimelinesCsv("planner,run\nx,0\n", "a.csv");
  ASSERT_FALSE(noColumn.isOk());
  EXPECT_NE(noColumn.status().message().find("a.csv"), std::string::npos);
  EXPECT_NE(noColumn.status().message().find("op_index"), std::string::npos);
  auto badNumber = parseTimelinesCsv(header + "\np,0,0,F,1,L1,forward,1.5,12x,0,cpu,0,,,,\n", "b.csv");
  ASSERT_FALSE(badNumber.isOk());
  EXPECT_NE(badNumber.status().message().find("line 2"), std::string::npos);
  EXPECT_NE(badNumber.status().message().find("footprint_bytes"), std::string::npos);
  auto outOfOrder = parseTimelinesCsv(header + "\np,0,1,F,1,L1,forward,1,0,0,cpu,0,,,,\n", "c.csv");
  EXPECT_FALSE(outOfOrder.isOk());
  auto badPhase = parseTimelinesCsv(header + "\np,0,0,F,1,L1,backward,1,0,0,cpu,0,,,,\n", "d.csv");
  EXPECT_FALSE(badPhase.isOk());
  auto badJson = parseTimelinesJson(R"({"format": "remat-timeline/1", "timelines": [{"planner": "p"}]})", "e.json");
  ASSERT_FALSE(badJson.isOk());
  EXPECT_NE(badJson.status().message().find("timelines[0]"), std::string::npos);
  EXPECT_FALSE(parseTimelinesJson("{", "f.json").isOk());
  EXPECT_FALSE(parseTimelinesJson(R"({"format": "other"})", "g.json").isOk());
}

}  // namespace
}  // namespace remat
