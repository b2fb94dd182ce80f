// PyTorch memory snapshots (snapshot.hpp, pickle.hpp): pickles Python wrote with every protocol
// from 2 to 5 read as their JSON form does, a real CPU recording made with PyTorch 1.13 reads to
// the numbers Python's own replay found (tests/data/snapshots, make_snapshots.py), our timelines
// exported as snapshots (JSON and pickle) read back to the same timelines, and hostile pickles are
// refused at their byte offset without running anything.
#include "remat/report/snapshot.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "chain_helpers.hpp"
#include "golden.hpp"
#include "remat/cpu/cpu_device.hpp"
#include "remat/exec/interpreter.hpp"
#include "remat/input/json_document.hpp"
#include "remat/input/pickle.hpp"
#include "remat/memory/simulator.hpp"
#include "remat/report/exporters.hpp"
#include "remat/report/timeline_formats.hpp"
#include "temp_folder.hpp"
#include "timeline_checks.hpp"

namespace remat {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kFolder = fs::path(REMAT_TEST_DATA_DIR) / "snapshots";

std::string readBytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

json expected() { return json::parse(readBytes(kFolder / "expected.json")); }

void expectNumbers(const Timeline& t, const json& want) {
  EXPECT_EQ(t.dynamicPeakBytes(), want["dynamic_peak_bytes"].get<std::uint64_t>());
  ASSERT_FALSE(t.entries.empty());
  EXPECT_EQ(t.entries.back().liveAfterBytes, want["live_at_end_bytes"].get<std::uint64_t>());
  EXPECT_EQ(t.staticBytes, want["static_bytes"].get<std::uint64_t>());
  EXPECT_EQ(t.source, want["source"].get<std::string>());
}

TEST(Snapshot, PythonPicklesOfEveryProtocolReadAsTheirJson) {
  const std::string jsonPath = (kFolder / "shaped.json").string();
  auto fromJson = parseSnapshot(readBytes(jsonPath), jsonPath);
  ASSERT_TRUE(fromJson.isOk()) << fromJson.status().message();
  ASSERT_EQ(fromJson->size(), 1u);  // the second device's trace is empty
  expectNumbers(fromJson->front(), expected()["shaped"]);
  // Frames with a line are grouped by their place (the frameless free of a block alive before the
  // trace opens the step): the forward frames, then the backward ones.
  EXPECT_EQ(fromJson->front().layerNames,
            (std::vector<std::string>{"(no frame)", "/home/user/model.py:12:forward", "/home/user/train.py:30:step"}));
  for (int protocol = 2; protocol <= 5; ++protocol) {
    SCOPED_TRACE("protocol " + std::to_string(protocol));
    const fs::path path = kFolder / ("shaped-p" + std::to_string(protocol) + ".pickle");
    const std::string bytes = readBytes(path);
    auto timelines = parseSnapshot(bytes, path.string());
    ASSERT_TRUE(timelines.isOk()) << timelines.status().message();
    testing::expectSameTimelines(*fromJson, *timelines);
    // The decoded values are the JSON's (tuples become lists).
    auto doc = decodePickle(bytes, path.string(), kSnapshotMaxDepth);
    ASSERT_TRUE(doc.isOk()) << doc.status().message();
    auto value = doc->toJson(doc->root());
    ASSERT_TRUE(value.isOk());
    EXPECT_EQ(*value, json::parse(readBytes(jsonPath)));
  }
}

TEST(Snapshot, ARealCpuRecordingOfPyTorchReads) {
  const fs::path path = kFolder / "cpu-recording.pickle";
  auto timelines = readTimelines(path.string());  // by content: a pickle
  ASSERT_TRUE(timelines.isOk()) << timelines.status().message();
  ASSERT_EQ(timelines->size(), 1u);
  const Timeline& t = timelines->front();
  const json want = expected()["cpu-recording"];
  expectNumbers(t, want);
  // The events before the recording's forward_end are F ops, the rest B ops (of the aten op where
  // the recording names no module).
  std::size_t forward = 0, backward = 0;
  for (const TimelineEntry& e : t.entries) {
    if (backward > 0) {
      EXPECT_EQ(e.op.kind, OpKind::B) << "an F op after a B op";
    }
    forward += e.op.kind == OpKind::F;
    backward += e.op.kind == OpKind::B;
  }
  EXPECT_GT(forward, 3u);
  EXPECT_GT(backward, 3u);
  EXPECT_EQ(forward + backward, t.entries.size());
  EXPECT_NE(std::find(t.layerNames.begin(), t.layerNames.end(), "0"), t.layerNames.end());  // the conv
}

// A predicted and two measured timelines of a golden chain with recomputes, as exporters_test.
std::vector<Timeline> sampleTimelines() {
  Chain chain = testing::chainFromJson(testing::goldenExamples().at(2).at("chain"));
  Plan plan{{2}};
  auto sim = simulate(chain, plan);
  EXPECT_TRUE(sim.isOk());
  std::vector<Timeline> out{sim->timeline};
  out.back().planner = "uniform:2";
  out.back().staticBytes = 12345;
  cpu::CpuDevice device;
  RunOptions options;
  options.steps = 2;
  options.planner = "dp";
  auto run = runPlan(chain, plan, device, {}, options);
  EXPECT_TRUE(run.isOk()) << run.status().message();
  for (const Timeline& t : run->timelines) out.push_back(t);
  out.back().entries[0].timeUs = 0.1 + 0.2;  // a double with no short decimal form
  return out;
}

TEST(Snapshot, ExportedTimelinesReadBackTheSame) {
  const auto timelines = sampleTimelines();
  auto fromJson = parseSnapshot(timelinesToSnapshotJson(timelines), "t.snapshot.json");
  ASSERT_TRUE(fromJson.isOk()) << fromJson.status().message();
  testing::expectSameTimelines(timelines, *fromJson);
  const std::string pickle = timelinesToSnapshotPickle(timelines);
  EXPECT_EQ(static_cast<unsigned char>(pickle[0]), 0x80);
  EXPECT_EQ(pickle[1], 4);  // protocol 4
  auto fromPickle = parseSnapshot(pickle, "t.pickle");
  ASSERT_TRUE(fromPickle.isOk()) << fromPickle.status().message();
  testing::expectSameTimelines(timelines, *fromPickle);
}

// Ops that change nothing, free more than the newest block holds, or free everything.
TEST(Snapshot, AwkwardOpsRoundTrip) {
  Timeline t;
  t.planner = "hand";
  t.source = "predicted";
  t.layerNames = {"a", "b", "c"};
  t.entries = {{{OpKind::F, 1}, 100, 100, 1.5},    {{OpKind::F, 2}, 300, 250, 2.0}, {{OpKind::F, 3}, 250, 250, 0.0},
               {{OpKind::Seed, 0}, 260, 260, 0.0}, {{OpKind::B, 3}, 400, 30, 0.25}, {{OpKind::B, 2}, 30, 0, 0.0},
               {{OpKind::B, 1}, 0, 0, 0.0}};
  auto back = parseSnapshot(timelinesToSnapshotJson({t}), "t.json");
  ASSERT_TRUE(back.isOk()) << back.status().message();
  testing::expectSameTimelines({t}, *back);
}

// What PyTorch's Active Memory Timeline reads: alloc / free_completed with addr, size, frames;
// segments whose blocks add up to the segment (torch.cuda._memory_viz.stats asserts it).
TEST(Snapshot, ExportHasTheFieldsPyTorchsViewersRead) {
  const json snapshot = timelinesToSnapshot(sampleTimelines());
  ASSERT_EQ(snapshot["device_traces"].size(), 3u);
  for (const json& event : snapshot["device_traces"][0]) {
    for (const char* field : {"action", "addr", "size", "stream", "frames", "time_us"})
      EXPECT_TRUE(event.contains(field)) << field;
    const json& frame = event["frames"][0];
    EXPECT_EQ(frame["name"].get<std::string>().rfind("remat::", 0), 0u);
  }
  for (const json& segment : snapshot["segments"]) {
    std::uint64_t sum = 0;
    for (const json& block : segment["blocks"]) sum += block["size"].get<std::uint64_t>();
    EXPECT_EQ(sum, segment["total_size"].get<std::uint64_t>());
  }
  EXPECT_EQ(snapshot["remat"]["format"], kRecordingFormat);
}

class SnapshotFiles : public testing::TempFolderTest {};

TEST_F(SnapshotFiles, ChosenByExtensionAndByContent) {
  const auto timelines = sampleTimelines();
  EXPECT_EQ((*timelineFormatForPath("x.snapshot.json"))->name, "pytorch-snapshot-json");
  EXPECT_EQ((*timelineFormatForPath("x.PICKLE"))->name, "pytorch-snapshot");
  EXPECT_EQ((*timelineFormatForPath("x.pkl"))->name, "pytorch-snapshot-pkl");
  for (const char* name : {"t.snapshot.json", "t.pickle"}) {
    ASSERT_TRUE(writeTimelines(path(name), timelines).isOk());
    auto back = readTimelines(path(name));
    ASSERT_TRUE(back.isOk()) << back.status().message();
    testing::expectSameTimelines(timelines, *back);
  }
  // A snapshot in a plain .json file, and a pickle under any name, are still snapshots.
  fs::copy_file(path("t.snapshot.json"), path("plain.json"));
  fs::copy_file(path("t.pickle"), path("odd.csv"));
  for (const char* name : {"plain.json", "odd.csv"}) {
    auto back = readTimelines(path(name));
    ASSERT_TRUE(back.isOk()) << name << ": " << back.status().message();
    testing::expectSameTimelines(timelines, *back);
  }
}

// The encoder's every kind of value decodes to itself: ints at each width and sign (BININT1,
// BININT2, BININT, LONG1 of 8 and of 9 bytes), floats, long strings (BINUNICODE), nesting, and
// containers over the 1000-item batch.
TEST(Snapshot, EncodedValuesDecodeToThemselves) {
  json value = {{"ints",
                 {0, 255, 256, 65535, 65536, -1, -129, 2147483647, -2147483648LL, 2147483648LL,
                  -9223372036854775807LL - 1, 9223372036854775807LL, 18446744073709551615ULL}},
                {"floats", {0.5, -1e300, 0.1 + 0.2}},
                {"strings", {"", "ü€😀", std::string(300, 'x')}},
                {"nested", {{"a", {{{"b", nullptr}, {"c", true}, {"d", false}}}}}},
                {"long", json::array()}};
  for (int i = 0; i < 2500; ++i) value["long"].push_back(i);
  const std::string bytes = encodePickle(value);
  auto doc = decodePickle(bytes, "v.pickle", kSnapshotMaxDepth);
  ASSERT_TRUE(doc.isOk()) << doc.status().message();
  auto back = doc->toJson(doc->root());
  ASSERT_TRUE(back.isOk());
  EXPECT_EQ(*back, value);
}

// Opcode bytes for the hostile pickles below.
std::string pickleOf(std::initializer_list<int> bytes) {
  std::string out;
  for (int b : bytes) out.push_back(static_cast<char>(b));
  return out;
}

void expectRefused(const std::string& bytes, const std::string& needle) {
  auto read = parseSnapshot(bytes, "h.pickle");
  ASSERT_FALSE(read.isOk()) << needle;
  EXPECT_EQ(read.status().code(), ErrorCode::InvalidInput);
  EXPECT_EQ(read.status().message().rfind("h.pickle: byte offset ", 0), 0u) << read.status().message();
  EXPECT_NE(read.status().message().find(needle), std::string::npos) << read.status().message();
}

TEST(Snapshot, CodeRunningOpcodesAreRefusedWhereTheyAre) {
  // pickle.dumps(os.system) would start: PROTO 4, SHORT_BINUNICODE 'os', ..., STACK_GLOBAL.
  expectRefused(pickleOf({0x80, 4, 0x8c, 2, 'o', 's', 0x8c, 6, 's', 'y', 's', 't', 'e', 'm', 0x93, '.'}),
                "byte offset 14: opcode STACK_GLOBAL (0x93) not allowed");
  expectRefused(pickleOf({0x80, 2, 'c', 'o', 's', '\n', 's', 'y', 's', 't', 'e', 'm', '\n', '.'}),
                "byte offset 2: opcode GLOBAL ('c', 0x63) not allowed");
  expectRefused(pickleOf({0x80, 4, ']', ')', 'R', '.'}), "byte offset 4: opcode REDUCE ('R', 0x52) not allowed");
  for (int op : std::initializer_list<int>{'b', 'i', 'o', 0x81, 0x92, 'P', 'Q', 0x82})
    expectRefused(pickleOf({0x80, 4, ']', op, '.'}), "not allowed");
  expectRefused(pickleOf({0x80, 4, 0xff, '.'}), "byte 0xff is no pickle opcode");
}

TEST(Snapshot, MalformedPicklesAreRefusedWhereTheyBreak) {
  expectRefused(pickleOf({0x80, 1, 'N', '.'}), "protocol 1 is not read");
  expectRefused(pickleOf({0x80, 4, 'N'}), "ends before its STOP");
  expectRefused(pickleOf({0x80, 4, 'X', 5, 0, 0, 0, 'a'}), "ends inside BINUNICODE's argument");
  expectRefused(pickleOf({0x80, 4, 'N', '.', 'N'}), "1 bytes after the STOP");
  expectRefused(pickleOf({0x80, 4, 'N', 'N', '.'}), "2 values on the stack");
  expectRefused(pickleOf({0x80, 4, 'a', '.'}), "APPEND finds no value");
  expectRefused(pickleOf({0x80, 4, 'h', 3, '.'}), "memo 3, which holds nothing");
  expectRefused(pickleOf({0x80, 4, 0x8c, 1, 0xc3, '.'}), "not valid UTF-8");
  expectRefused(pickleOf({0x80, 4, 0x8a, 10, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, '.'}), "beyond 64 bits");
  expectRefused(pickleOf({0x80, 4, '}', 'K', 1, 'N', 's', '.'}), "a dict key must be a str, not int 1");
  // A list appended to itself through the memo, and a list changed after it went into another.
  expectRefused(pickleOf({0x80, 4, ']', 0x94, 'h', 0, 'a', '.'}), "would hold itself");
  expectRefused(pickleOf({0x80, 4, ']', 0x94, ']', 'h', 0, 'a', 'h', 0, 'N', 'a', '.'}),
                "changes a container that already sits inside another one");
  std::initializer_list<int> deep = {0x80, 4,   ']', ']', ']', ']', ']', ']', ']', ']', ']', ']',
                                     ']',  'a', 'a', 'a', 'a', 'a', 'a', 'a', 'a', 'a', 'a', '.'};
  expectRefused(pickleOf(deep), "nest deeper than 10 levels");
  expectRefused(pickleOf({0x80, 4, 0x95, 100, 0, 0, 0, 0, 0, 0, 0, 'N', '.'}), "FRAME is longer");
}

TEST(Snapshot, WrongShapesAreNamed) {
  auto read = [](const std::string& text) { return parseSnapshot(text, "s.json").status().message(); };
  EXPECT_NE(read("[]").find("a list of segments"), std::string::npos);
  EXPECT_NE(read("{}").find("field 'device_traces' is missing"), std::string::npos);
  EXPECT_NE(read(R"({"device_traces": [[]]})").find("holds no event"), std::string::npos);
  EXPECT_NE(read(R"({"device_traces": [[{"action": "alloc", "addr": 1}]]})")
                .find("device_traces[0][0]: field 'size' is missing"),
            std::string::npos);
  EXPECT_NE(read(R"({"device_traces": [[{"action": "malloc", "addr": 1, "size": 2}]]})").find("'malloc'"),
            std::string::npos);
  EXPECT_NE(read(R"({"device_traces": [[{"action": "alloc", "addr": 1, "size": 2},
                                        {"action": "alloc", "addr": 1, "size": 2}]]})")
                .find("is allocated again"),
            std::string::npos);
  EXPECT_NE(read(R"j({"device_traces": [[{"action": "alloc", "addr": 1, "size": 2, "frames":
                      [{"filename": "a", "line": 1, "name": "remat::F(99)"}]}]]})j")
                .find("outside 1..1"),
            std::string::npos);
  EXPECT_NE(read(R"({"device_traces": [[]], "remat": {"format": "x"}})").find("expected 'remat-torch-recording/1'"),
            std::string::npos);
  // Placed in the JSON text.
  EXPECT_EQ(read(R"({"device_traces": [[{"action": 3}]]})").rfind("s.json:1:", 0), 0u);
}

}  // namespace
}  // namespace remat
