// Schedules in files: brigade's JSON and PyTorch's CSV round-trip every generator; PyTorch-format files
// written by hand (tests/pipeline/schedule_files) load, validate, equal brigade's own schedules and run;
// invalid files are refused naming the action (row, column, text) and the reason.
#include "pipeline/schedule/schedule_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "pipeline/schedule/generators.h"
#include "pipeline_fixtures.h"
#include "test_support.h"

namespace brigade::pipeline {
namespace {

using ::testing::HasSubstr;

std::string fixture(const std::string& name) {
  return std::string(BRIGADE_TEST_DATA_DIR) + "/pipeline/schedule_files/" + name;
}

void expect_same(const Schedule& a, const Schedule& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.stages, b.stages);
  EXPECT_EQ(a.microbatches, b.microbatches);
  EXPECT_EQ(a.virtual_chunks, b.virtual_chunks);
  // On one stage every placement is the same layout (a CSV cannot tell them apart).
  if (a.stages > 1) {
    EXPECT_EQ(a.placement, b.placement);
  }
  EXPECT_EQ(a.recompute, b.recompute);
  EXPECT_EQ(a.actions, b.actions);
}

std::vector<Action> compute_only(const std::vector<Action>& list) {
  std::vector<Action> out;
  std::copy_if(list.begin(), list.end(), std::back_inserter(out),
               [](const Action& a) { return is_compute(a.kind) && a.kind != ActionKind::OptimizerStep; });
  return out;
}

// Every generator on a few shapes it takes, with every recompute policy.
template <typename F>
void for_every_generator(F&& check) {
  for (const std::string& name : schedule_names()) {
    for (int S : {1, 2, 4}) {
      for (int M : {1, 4, 8}) {
        if (M < smallest_microbatches(name, S) || (name == "interleaved" && M % S != 0)) continue;
        for (Recompute r : {Recompute::Never, Recompute::Always, Recompute::ExceptLast}) {
          const int v = schedule_traits(name).chunks_per_stage == 0 ? 2 : 1;
          SCOPED_TRACE(name + " S=" + std::to_string(S) + " M=" + std::to_string(M) + " recompute " +
                       to_string(r));
          check(make_schedule(name, S, M, v, r));
        }
      }
    }
  }
}

TEST(ScheduleFiles, JsonRoundTripsEveryGeneratorExactly) {
  int checked = 0;
  for_every_generator([&](const Schedule& s) {
    expect_same(schedule_from_json(schedule_to_json(s)), s);
    ++checked;
  });
  EXPECT_GT(checked, 200);
}

TEST(ScheduleFiles, PyTorchCsvRoundTripsEveryGeneratorWithAndWithoutTransfers) {
  for_every_generator([&](const Schedule& s) {
    for (bool transfers : {false, true}) {
      // The CSV has no R and no name: a read schedule is named by the caller and recomputes nothing until
      // with_recompute places the R actions where the generators place them.
      const Schedule read = schedule_from_pytorch_csv(schedule_to_pytorch_csv(s, transfers), s.name);
      expect_same(with_recompute(read, s.recompute), s);
    }
  });
}

TEST(ScheduleFiles, ActionsAreWrittenInPyTorchsNotation) {
  // Model chunks are PyTorch's stage indices: stage 1 of a V holds chunks 1 and 2.
  const std::string csv = schedule_to_pytorch_csv(make_schedule("zb-v", 2, 2), true);
  EXPECT_THAT(csv, HasSubstr("0F0,0SEND_F0,"));
  EXPECT_THAT(csv, HasSubstr("\n1RECV_F0,1F0,2F0,2SEND_F0,"));  // the turn needs no transfer
  const std::string json = schedule_to_json(make_schedule("1f1b", 2, 2));
  EXPECT_THAT(json, HasSubstr("\"format\": \"brigade.schedule\""));
  EXPECT_THAT(json, HasSubstr("[\"F0.c0\", \"send F0.c0 ->s1\", \"F1.c0\""));
}

// PyTorch's Schedule1F1B as its lock-step picture: idle cells and REDUCE_GRAD are skipped, the transfers
// added; what is left is brigade's 1f1b.
TEST(ScheduleFiles, AHandWrittenPyTorchOneFOneBIsBrigadesOneFOneB) {
  const Schedule s = read_schedule_file(fixture("1f1b_2rank_3mb.csv"));
  EXPECT_EQ(s.name, "1f1b_2rank_3mb");
  EXPECT_EQ(s.stages, 2);
  EXPECT_EQ(s.microbatches, 3);
  EXPECT_EQ(s.virtual_chunks, 1);
  EXPECT_EQ(s.actions, make_schedule("1f1b", 2, 3).actions);
}

// Every send and receive written out, two stages per rank in interleaved placement: PyTorch's LoopedBFS.
TEST(ScheduleFiles, AHandWrittenPyTorchScheduleWithTransfersIsTakenAsItIs) {
  const Schedule s = read_schedule_file(fixture("looped_bfs_2rank_4stage_comms.csv"));
  EXPECT_EQ(s.placement, Placement::Interleaved);
  EXPECT_EQ(s.virtual_chunks, 2);
  EXPECT_EQ(s.actions, make_schedule("looped-bfs", 2, 2, 2).actions);
}

// DualPipeV in PyTorch's notation: a V (rank 0 holds stages 0 and 3), overlapped pairs run as two actions,
// split backwards. Its compute order is brigade's dualpipev, and it trains like the unpipelined model.
TEST(ScheduleFiles, AHandWrittenPyTorchDualPipeVRunsLikeBrigadesAndLikeNoPipeline) {
  const Schedule s = read_schedule_file(fixture("dualpipev_2rank_4mb.csv"));
  EXPECT_EQ(s.placement, Placement::V);
  EXPECT_EQ(s.virtual_chunks, 2);
  const Schedule ours = make_schedule("dualpipev", 2, 4);
  for (int st = 0; st < 2; ++st) EXPECT_EQ(compute_only(s.actions[st]), compute_only(ours.actions[st]));
  PipelineConfig pc;
  pc.stages = 2;
  pc.microbatches = 4;
  pc.schedule_lists = s;
  pc.recv_timeout_seconds = 60;
  testing::expect_matches_unpipelined(pc, 4);
}

class ScheduleFileDirTest : public brigade::testing::TempDirTest {};

TEST_F(ScheduleFileDirTest, FilesRoundTripByExtension) {
  const Schedule s = make_schedule("v-half", 2, 4, 1, Recompute::ExceptLast);
  write_schedule_file(s, file("v.json"));
  expect_same(read_schedule_file(file("v.json")), s);
  write_schedule_file(s, file("v.csv"), /*with_transfers=*/true);
  const Schedule csv = read_schedule_file(file("v.csv"));
  EXPECT_EQ(csv.name, "v");
  EXPECT_EQ(with_recompute(csv, Recompute::ExceptLast).actions, s.actions);
  EXPECT_THROW(write_schedule_file(s, file("v.txt")), ValueError);
  EXPECT_THAT(brigade::testing::message_of<ScheduleFileError>([&] { read_schedule_file(file("v.txt")); }),
              HasSubstr("is .json (brigade's) or .csv (PyTorch's), not '.txt'"));
  EXPECT_THAT(brigade::testing::message_of<ScheduleFileError>([&] { read_schedule_file(file("none.csv")); }),
              HasSubstr("none.csv: cannot be opened"));
}

std::string csv_error(const std::string& text) {
  return brigade::testing::message_of<ScheduleFileError>(
      [&] { schedule_from_pytorch_csv(text, "t", "t.csv"); });
}

TEST(ScheduleFiles, InvalidPyTorchFilesAreRefusedNamingTheAction) {
  EXPECT_THAT(csv_error("0F0,0F1,0X0\n1F0\n"),
              HasSubstr("t.csv: row 1, column 3 ('0X0'): unknown action type 'X'"));
  EXPECT_THAT(csv_error("0F0,0F\n"),
              HasSubstr("row 1, column 2 ('0F'): the action type F needs a microbatch"));
  EXPECT_THAT(csv_error("F0\n"), HasSubstr("row 1, column 1 ('F0'): not an action"));
  EXPECT_THAT(csv_error("(0F0;0SEND_F0)OVERLAP_F_B\n"),
              HasSubstr("holds compute actions only, found SEND_F"));
  EXPECT_THAT(csv_error("0F0,1F0\n1F0,1B0\n"),
              HasSubstr("row 2, column 1 ('1F0'): stage 1 is also on rank 0 (row 1, column 2)"));
  EXPECT_THAT(csv_error("0F0,1F0,1B0,0B0\n2F0,3F0,3B0,2B0\n"),
              HasSubstr("row 1, column 2 ('1F0'): stage 1 is on rank 0, but brigade places it on rank 1"));
  EXPECT_THAT(csv_error("0F0,2F0\n1F0\n"), HasSubstr("3 is not a multiple of its 2 rows"));
  EXPECT_THAT(csv_error("0F0,0SEND_B0,0B0\n"), HasSubstr("stage 0 is the first of the model"));
  // What the validator finds, at the file's action: a backward before its forward, a forward without
  // backward, and a deadlock (stage 1 wants F1 before it returns B0; stage 0 sends F1 only after B0).
  EXPECT_THAT(csv_error("0F0,0F1,0B0,0B1\n1F0,1B1,1F1,1B0\n"),
              HasSubstr("row 2, column 2 ('1B1'): stage 1 step 2: B1 comes before its F1"));
  EXPECT_THAT(csv_error("0F0,0F1,0B0\n1F0,1B0,1F1,1B1\n"),
              HasSubstr("row 1, column 2 ('0F1'): stage 0: has F1 but"));
  const std::string deadlock = csv_error(
      "0F0,0SEND_F0,0RECV_B0,0B0,0F1,0SEND_F1,0RECV_B1,0B1\n"
      "1RECV_F0,1F0,1RECV_F1,1F1,1B0,1SEND_B0,1B1,1SEND_B1\n");
  EXPECT_THAT(deadlock, HasSubstr("row 1, column 3 ('0RECV_B0'): deadlock"));
  EXPECT_THAT(deadlock, HasSubstr("[B0<s1]"));
  // In the compute-only format the receive is brigade's: the error names the forward it feeds.
  EXPECT_THAT(csv_error("0F0,0B0\n1B0,1F0\n"), HasSubstr("row 2, column 1 ('1B0')"));
  EXPECT_THAT(csv_error("\n\n"), HasSubstr("has no rows"));
  // Counts the file's actions cannot hold are refused before anything is sized by them (found by fuzzing:
  // this 12-byte file once asked for 2 GB).
  EXPECT_THAT(csv_error("019641252B0,"),
              HasSubstr("runs 19641253 model chunks x 1 microbatches, but its 1 actions"));
}

std::string json_error(const std::string& text) {
  return brigade::testing::message_of<ScheduleFileError>([&] { schedule_from_json(text, "t.json"); });
}

TEST(ScheduleFiles, InvalidJsonFilesAreRefusedNamingTheAction) {
  const std::string good = schedule_to_json(make_schedule("1f1b", 2, 2));
  EXPECT_THAT(json_error("{\"format\": "), HasSubstr("t.json: is not JSON"));
  EXPECT_THAT(json_error("[1, 2]"), HasSubstr("is not a JSON object"));
  std::string wrong = good;
  wrong.replace(wrong.find("brigade.schedule"), 16, "pytorch.schedule");
  EXPECT_THAT(json_error(wrong), HasSubstr("\"format\" is not \"brigade.schedule\""));
  std::string label = good;
  label.replace(label.find("\"F1.c0\""), 7, "\"F1.x0\"");
  EXPECT_THAT(json_error(label), HasSubstr("actions[0][2] ('F1.x0'): not an action"));
  std::string stages = good;
  stages.replace(stages.find("\"stages\": 2"), 11, "\"stages\": 3");
  EXPECT_THAT(json_error(stages), HasSubstr("\"actions\" has 2 lists for 3 stages"));
  std::string missing = good;
  missing.replace(missing.find(", \"send F1.c0 ->s1\""), 19, "");
  EXPECT_THAT(json_error(missing),
              HasSubstr("actions[0][2] ('F1.c0'): stage 0 step 2: F1 feeds stage 1, but there is no"));
  std::string peer = good;
  peer.replace(peer.find("\"send F1.c0 ->s1\""), 17, "\"send F1.c0 ->s7\"");
  EXPECT_THAT(json_error(peer), HasSubstr("actions[0][3] ('send F1.c0 ->s7'): stage 0 step 3"));
  // Found by fuzzing: a number too large for any type is refused like a syntax error, and counts the lists
  // cannot hold are refused before the validator sizes anything by them.
  EXPECT_THAT(json_error("{\"stages\": 99e99999992}"), HasSubstr("t.json: is not JSON"));
  std::string many = good;
  many.replace(many.find("\"microbatches\": 2"), 17, "\"microbatches\": 1000000");
  EXPECT_THAT(json_error(many), HasSubstr("runs 2 model chunks x 1000000 microbatches, but its"));
}

TEST(ScheduleFiles, RecomputationIsAddedToASchedulesThatHasNone) {
  const Schedule plain = make_schedule("zb-h1", 4, 8);
  const Schedule recomputed = with_recompute(plain, Recompute::Always);
  expect_same(recomputed, make_schedule("zb-h1", 4, 8, 1, Recompute::Always));
  expect_same(with_recompute(recomputed, Recompute::Never), recomputed);  // never: left as it is
  EXPECT_THROW(with_recompute(recomputed, Recompute::ExceptLast), ValueError);
}

}  // namespace
}  // namespace brigade::pipeline
