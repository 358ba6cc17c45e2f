#include "kube/watch_decoder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/errors.h"
#include "kube/http.h"
#include "support/source_paths.h"

namespace gpufleet::kube {
namespace {

std::string fixture(const std::string& name) {
  std::ifstream in(std::string(GPUFLEET_SOURCE_DIR) + "/tests/kube/testdata/" + name);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Decoded {
  std::vector<WatchEvent> events;
  std::optional<ApiError> error;
};

// Feeds the stream in chunks of `chunk` bytes, as the network would deliver it.
Decoded decode_in_chunks(const std::string& text, std::size_t chunk, const core::JsonPrune* prune) {
  Decoded out;
  LineSplitter lines;
  RequestInfo info{"watch", "configmaps", "gpufleet", ""};
  for (std::size_t pos = 0; pos < text.size(); pos += chunk) {
    lines.feed(std::string_view(text).substr(pos, chunk));
    while (auto line = lines.next_line()) {
      try {
        out.events.push_back(decode_watch_event(*line, prune, info));
      } catch (const ApiError& e) {
        out.error = e;
      }
    }
  }
  EXPECT_EQ(lines.pending(), 0u);
  return out;
}

TEST(WatchDecoder, EventsSurviveAnyChunking) {
  std::string text = fixture("watch-configmaps.jsonl");
  ASSERT_FALSE(text.empty());
  core::JsonPrune prune = watch_event_prune({"metadata.managedFields"});
  for (std::size_t chunk : {1u, 2u, 7u, 64u, 333u, 100000u}) {
    Decoded d = decode_in_chunks(text, chunk, &prune);
    ASSERT_EQ(d.events.size(), 4u) << "chunk " << chunk;
    EXPECT_EQ(d.events[0].type, WatchEvent::Type::Added);
    EXPECT_EQ(d.events[1].type, WatchEvent::Type::Modified);
    EXPECT_EQ(d.events[2].type, WatchEvent::Type::Bookmark);
    EXPECT_EQ(d.events[3].type, WatchEvent::Type::Deleted);
    EXPECT_EQ(resource_version_of(d.events[1].object), "1057");
    EXPECT_EQ(d.events[1].object.get_string({"data", "driver"}), "550.127.05");
    EXPECT_EQ(resource_version_of(d.events[2].object), "1102");
    // Pruned while decoding.
    EXPECT_EQ(d.events[0].object.get({"metadata", "managedFields"}), nullptr);
    EXPECT_EQ(name_of(d.events[0].object), "recipe");
    ASSERT_TRUE(d.error.has_value());
    EXPECT_EQ(d.error->code(), 410);
    EXPECT_TRUE(d.error->is(Reason::Expired));
    EXPECT_THAT(d.error->server_message(), ::testing::HasSubstr("too old resource version"));
  }
}

TEST(WatchDecoder, BadLinesAreParseErrors) {
  RequestInfo info{"watch", "pods", "", ""};
  EXPECT_THROW(decode_watch_event(R"({"type":"ADDED"})", nullptr, info), core::ParseError);
  EXPECT_THROW(decode_watch_event(R"({"type":"RENAMED","object":{}})", nullptr, info),
               core::ParseError);
  EXPECT_THROW(decode_watch_event(R"({"type":"ADDED","object":{)", nullptr, info),
               core::ParseError);
}

TEST(LineSplitter, HandlesCrLfAndBlankLines) {
  LineSplitter s;
  s.feed("a\r\n\nb");
  EXPECT_EQ(s.next_line(), "a");
  EXPECT_EQ(s.next_line(), std::nullopt);
  EXPECT_EQ(s.pending(), 1u);
  s.feed("c\n");
  EXPECT_EQ(s.next_line(), "bc");
  EXPECT_EQ(s.next_line(), std::nullopt);
  EXPECT_EQ(s.pending(), 0u);
}

}  // namespace
}  // namespace gpufleet::kube

namespace gpufleet::kube {
namespace {

TEST(LineSplitter, RefusesALineLongerThanTheBound) {
  LineSplitter s;
  std::string chunk(1 << 20, 'x');
  EXPECT_THROW(
      {
        for (std::size_t fed = 0; fed <= LineSplitter::kMaxLine; fed += chunk.size()) {
          s.feed(chunk);
          (void)s.next_line();
        }
      },
      core::ParseError);
}

// A full buffer refuses more bytes (the transport then ends the transfer with an error); what was
// buffered is still read.
TEST(HttpStream, BufferIsBounded) {
  HttpStream s;
  s.on_status(200);
  std::string big(HttpStream::kBufferLimit, 'a');
  EXPECT_TRUE(s.on_data(big.data(), big.size()));
  EXPECT_FALSE(s.on_data("b", 1));
  std::string out;
  EXPECT_TRUE(s.read(out));
  EXPECT_EQ(out.size(), HttpStream::kBufferLimit);
  EXPECT_TRUE(s.on_data("b", 1));
  s.on_done(std::nullopt);
  out.clear();
  EXPECT_TRUE(s.read(out));
  EXPECT_EQ(out, "b");
  EXPECT_FALSE(s.read(out));
}

}  // namespace
}  // namespace gpufleet::kube

namespace gpufleet::kube {
namespace {

// Every chunking of a list answer yields the same items and envelope.
TEST(ListItemSplitter, SplitsItemsAtAnyChunkBoundary) {
  const std::string body =
      R"({"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"42","continue":"c"},)"
      R"("items":[{"metadata":{"name":"a","labels":{"x":"}]\"{["}},"l":[1,[2,{}]]} ,)"
      "\n"
      R"({"metadata":{"name":"b"},"s":"items"}],"extra":"items"})";
  for (std::size_t chunk = 1; chunk <= body.size(); ++chunk) {
    std::vector<std::string> items;
    ListItemSplitter s([&](std::string_view item) { items.emplace_back(item); });
    for (std::size_t pos = 0; pos < body.size(); pos += chunk) {
      s.feed(std::string_view(body).substr(pos, chunk));
    }
    s.finish();
    ASSERT_EQ(items.size(), 2u) << "chunk " << chunk;
    EXPECT_EQ(core::parse_json(items[0], "item").get_string({"metadata", "labels", "x"}), "}]\"{[");
    EXPECT_EQ(core::parse_json(items[1], "item").get_string({"metadata", "name"}), "b");
    core::Value env = core::parse_json(s.envelope(), "envelope");
    EXPECT_EQ(env.get_string({"metadata", "resourceVersion"}), "42");
    EXPECT_EQ(env.get_string({"metadata", "continue"}), "c");
    EXPECT_EQ(env.find("items")->size(), 0u);
    EXPECT_EQ(env.get_string({"extra"}), "items");
  }
}

TEST(ListItemSplitter, RejectsTruncatedAndMalformedLists) {
  auto run = [](std::string_view body) {
    ListItemSplitter s([](std::string_view) {});
    s.feed(body);
    s.finish();
  };
  EXPECT_THROW(run(R"({"items":[{"a":1},{"b")"), core::ParseError);
  EXPECT_THROW(run(R"({"items":[1,2]})"), core::ParseError);
  EXPECT_THROW(run(R"([{"a":1}])"), core::ParseError);
  EXPECT_THROW(run(""), core::ParseError);
  EXPECT_NO_THROW(run(R"({"items":[]})"));
  EXPECT_NO_THROW(run(R"({"metadata":{},"items":null})"));
}

// A stream with a pause threshold asks the transport to pause once that many bytes wait, and
// stops asking once the reader has taken half of them (the transport then resumes it).
TEST(HttpStream, PausesAtItsThresholdAndResumesAtHalf) {
  HttpStream s(256 * 1024);
  s.on_status(200);
  const std::string block(64 * 1024, 'a');
  int taken = 0;
  while (!s.pause_now()) {
    ASSERT_TRUE(s.on_data(block.data(), block.size()));
    ++taken;
  }
  EXPECT_EQ(taken, 4);
  EXPECT_EQ(s.pauses(), 1u);
  EXPECT_TRUE(s.pause_now());  // still full: still paused, counted once
  EXPECT_EQ(s.pauses(), 1u);
  std::string out;
  ASSERT_TRUE(s.read(out));  // 192 KiB left: still paused (resumed only at half)
  out.clear();
  ASSERT_TRUE(s.read(out));  // 128 KiB left: half, resumed; takes bytes again
  EXPECT_FALSE(s.pause_now());
  ASSERT_TRUE(s.on_data(block.data(), block.size()));
  ASSERT_TRUE(s.on_data(block.data(), block.size()));
  EXPECT_TRUE(s.pause_now());  // full again: a second pause
  EXPECT_EQ(s.pauses(), 2u);
  EXPECT_EQ(s.peak_buffered(), 256u * 1024);
  // Without a threshold a stream never pauses (HTTP/2 watches: bounded by kBufferLimit only).
  HttpStream plain;
  ASSERT_TRUE(plain.on_data(block.data(), block.size()));
  EXPECT_FALSE(plain.pause_now());
}

// Bytes come out in order and in bounded pieces (a consumer behind a fast sender never holds a
// second copy of the whole backlog).
TEST(HttpStream, ReadsTheBacklogInOrderInBoundedPieces) {
  HttpStream s;
  s.on_status(200);
  std::string sent;
  for (int i = 0; i < 20000; ++i) {
    std::string piece = std::to_string(i) + ",";
    sent += piece;
    ASSERT_TRUE(s.on_data(piece.data(), piece.size()));
  }
  s.on_done(std::nullopt);
  std::string got;
  std::string chunk;
  int reads = 0;
  while (s.read(chunk)) {
    EXPECT_LE(chunk.size(), std::size_t{64} * 1024);
    got += chunk;
    chunk.clear();
    ++reads;
  }
  EXPECT_EQ(got, sent);
  EXPECT_GT(reads, 1);
}

}  // namespace
}  // namespace gpufleet::kube
