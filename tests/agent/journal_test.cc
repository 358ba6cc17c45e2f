#include "agent/journal.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "core/errors.h"
#include "core/json.h"

namespace gpufleet::agent {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "journal-test-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

JournalOptions small(const fs::path& dir) {
  JournalOptions o;
  o.dir = dir;
  o.segment_bytes = 4096;
  o.max_bytes = 3 * 4096;
  return o;
}

std::string file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

fs::path only_segment(const fs::path& dir) {
  fs::path found;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind("seg-", 0) == 0) found = e.path();
  return found;
}

TEST(Crc32c, KnownVector) {
  // The check value of CRC-32C (RFC 3720 appendix B.4 uses the same polynomial).
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(""), 0u);
}

TEST(Journal, AppendPendingAckSurviveReopen) {
  TempDir tmp;
  {
    Journal j(small(tmp.path()));
    EXPECT_EQ(j.append("health", R"({"a":1})"), 1u);
    EXPECT_EQ(j.append("health", R"({"a":2})"), 2u);
    NewRecord batch[] = {{"agent.boot", "b1"}, {"health", "x"}};
    EXPECT_EQ(j.append_batch(batch), 4u);
    auto p = j.pending(10);
    ASSERT_EQ(p.size(), 4u);
    EXPECT_EQ(p[2], (Record{3, "agent.boot", "b1"}));
    j.ack(2);
    j.ack(1);  // a late duplicate ack does not move delivery back
    EXPECT_EQ(j.stats().acked_id, 2u);
  }
  Journal j(small(tmp.path()));
  auto p = j.pending(10);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].id, 3u);
  EXPECT_EQ(j.append("health", "y"), 5u);  // ids continue, never reused
  EXPECT_EQ(j.pending(2).size(), 2u);      // bounded by max
  j.ack(5);
  EXPECT_TRUE(j.pending(10).empty());
}

TEST(Journal, TornTailCutAtEveryByteOffset) {
  TempDir tmp;
  const fs::path golden = tmp.path() / "golden";
  std::vector<Record> written;
  std::vector<std::size_t> ends;  // file length after each record
  {
    Journal j(small(golden));
    for (int i = 0; i < 6; ++i) {
      std::string payload = "payload-" + std::string(static_cast<std::size_t>(i * 3), 'x');
      std::string kind = i % 2 ? "health" : "agent.boot";
      auto id = j.append(kind, payload);
      written.push_back({id, kind, payload});
      ends.push_back(j.stats().bytes);
    }
  }
  const fs::path seg = only_segment(golden);
  const std::string bytes = file_bytes(seg);
  ASSERT_EQ(bytes.size(), ends.back());
  for (std::size_t cut = 0; cut <= bytes.size(); ++cut) {
    SCOPED_TRACE("cut at byte " + std::to_string(cut));
    const fs::path dir = tmp.path() / ("cut-" + std::to_string(cut));
    fs::create_directories(dir);
    {
      std::ofstream out(dir / seg.filename(), std::ios::binary);
      out.write(bytes.data(), static_cast<std::streamsize>(cut));
    }
    std::size_t whole = 0;
    while (whole < ends.size() && ends[whole] <= cut) ++whole;
    {
      Journal j(small(dir));
      auto p = j.pending(100);
      ASSERT_EQ(p.size(), whole);
      for (std::size_t i = 0; i < whole; ++i) EXPECT_EQ(p[i], written[i]);
      EXPECT_EQ(j.stats().torn_bytes, cut - (whole ? ends[whole - 1] : 0));
      // The journal keeps working after the cut: the next record lands on a clean boundary.
      EXPECT_EQ(j.append("health", "after"), whole + 1);
    }
    Journal again(small(dir));
    auto p = again.pending(100);
    ASSERT_EQ(p.size(), whole + 1);
    EXPECT_EQ(p.back().payload, "after");
    EXPECT_EQ(again.stats().torn_bytes, 0u);
    fs::remove_all(dir);
  }
}

TEST(Journal, BitFlipStopsReadingAtTheBadRecord) {
  TempDir tmp;
  std::uint64_t second_end = 0;
  {
    Journal j(small(tmp.path()));
    j.append("health", "one");
    j.append("health", "two");
    second_end = j.stats().bytes;
    j.append("health", "three");
  }
  const fs::path seg = only_segment(tmp.path());
  std::string bytes = file_bytes(seg);
  bytes[second_end + 14] ^= 0x01;  // inside the third record's body: its checksum fails
  std::ofstream(seg, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  Journal j(small(tmp.path()));
  auto p = j.pending(10);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[1].payload, "two");
}

JournalOptions no_fsync(const fs::path& dir) {
  JournalOptions o = small(dir);
  o.fsync = false;  // compaction logic, not durability, is under test here (and it is faster)
  return o;
}

TEST(Journal, CompactionSummarisesUndeliveredRecordsPerKind) {
  TempDir tmp;
  Journal j(no_fsync(tmp.path()));
  std::map<std::string, std::uint64_t> appended;
  const std::string payload(200, 'p');
  for (int i = 0; i < 400; ++i) {
    std::string kind = i % 3 == 0 ? "agent.boot" : "health";
    j.append(kind, payload);
    ++appended[kind];
  }
  auto s = j.stats();
  EXPECT_LE(s.bytes, 3 * 4096u + 4096u);
  EXPECT_GT(s.compacted, 0u);
  // Every appended record is either still pending or counted in a summary: nothing vanishes.
  std::map<std::string, std::uint64_t> seen;
  std::uint64_t last_id = 0;
  int summaries = 0;
  for (const auto& r : j.pending(100000)) {
    EXPECT_GT(r.id, last_id);  // in order
    last_id = r.id;
    if (r.kind == kCompactedKind) {
      ++summaries;
      auto v = core::parse_json(r.payload);
      for (const auto& [k, n] : v.find("counts")->as_map())
        seen[k] += static_cast<std::uint64_t>(n.as_double());
    } else {
      ++seen[r.kind];
    }
  }
  EXPECT_EQ(seen, appended);
  EXPECT_GE(summaries, 1);
}

TEST(Journal, CompactionOfDeliveredRecordsNeedsNoSummary) {
  TempDir tmp;
  Journal j(no_fsync(tmp.path()));
  const std::string payload(200, 'p');
  for (int i = 0; i < 400; ++i) {
    auto id = j.append("health", payload);
    j.ack(id);
  }
  EXPECT_EQ(j.stats().compacted, 0u);
  EXPECT_TRUE(j.pending(10).empty());
  EXPECT_LE(j.stats().bytes, 4u * 4096);
}

TEST(Journal, InterleavedDeliveryAcrossSegmentsIsExactlyOnceInOrder) {
  TempDir tmp;
  JournalOptions o = small(tmp.path());
  o.fsync = false;
  o.max_bytes = 64 * 4096;  // no compaction here: delivery position only
  Journal j(o);
  std::uint64_t appended = 0, delivered = 0;
  const std::string payload(100, 'q');
  for (int round = 0; round < 200; ++round) {
    for (int k = 0; k < round % 7; ++k) {
      j.append("health", payload);
      ++appended;
    }
    auto p = j.pending(static_cast<std::size_t>(1 + round % 5));
    for (const auto& r : p) EXPECT_EQ(r.id, ++delivered);
    if (!p.empty()) j.ack(p.back().id);
  }
  for (auto p = j.pending(3); !p.empty(); p = j.pending(3)) {
    for (const auto& r : p) EXPECT_EQ(r.id, ++delivered);
    j.ack(p.back().id);
  }
  EXPECT_EQ(delivered, appended);
  EXPECT_GT(j.stats().segments, 3u);
}

TEST(Journal, RejectsBadOptionsAndRecordsWithClearMessages) {
  TempDir tmp;
  JournalOptions o = small(tmp.path());
  o.max_bytes = 4096;
  try {
    Journal j(o);
    FAIL() << "accepted max_bytes below twice segment_bytes";
  } catch (const core::InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("max_bytes 4096 must be at least twice segment_bytes"),
              std::string::npos);
  }
  Journal j(small(tmp.path()));
  EXPECT_THROW(j.append("", "x"), core::InvalidInput);
  EXPECT_THROW(j.append("health", std::string((1 << 20) + 1, 'x')), core::InvalidInput);
  EXPECT_EQ(j.append("health", "ok"), 1u);  // a refused record takes no id
}

}  // namespace
}  // namespace gpufleet::agent
