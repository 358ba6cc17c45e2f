// The node-local journal: what a node's agent observed, kept on the node's disk until the
// API server has it. Append-only segment files of checksummed records, fsync'd before
// append() returns; bounded in bytes (the oldest segments go first, and the undelivered
// records they held are replaced by ONE summary record with counts per kind, so a long
// outage loses detail, never the fact that something happened); crash-safe (a torn tail —
// a record half written when the node lost power — is cut off at open, never misread).
//
// Delivery is at-least-once: pending() returns undelivered records in id order and ack()
// persists how far delivery got. A crash between a successful delivery and ack() redelivers;
// the receiving side makes that harmless by remembering the last record id it applied.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gpufleet::agent {

// One journal record. `kind` names what the payload is ("health", "agent.boot", ...);
// `payload` is opaque to the journal (the agent writes JSON).
struct Record {
  std::uint64_t id = 0;  // 1, 2, 3, ... never reused, also across restarts
  std::string kind;
  std::string payload;
  friend bool operator==(const Record&, const Record&) = default;
};

// What append_batch() takes: a record before it has an id.
struct NewRecord {
  std::string_view kind;
  std::string_view payload;
};

// The kind of the record that summarises compacted, undelivered records. Its payload is
// JSON: {"firstId":N,"lastId":M,"counts":{"<kind>":n,...}}.
inline constexpr std::string_view kCompactedKind = "journal.compacted";

struct JournalOptions {
  std::filesystem::path dir;              // created if missing; one journal per directory
  std::uint64_t max_bytes = 64 << 20;     // bound on all segment files together
  std::uint64_t segment_bytes = 4 << 20;  // a segment is closed once it reaches this size
  bool fsync = true;  // false only for tests and benchmarks that measure without the disk
};

struct JournalStats {
  std::uint64_t bytes = 0;  // on disk, all segments
  std::size_t segments = 0;
  std::uint64_t last_id = 0;           // the newest record's id (0: none yet)
  std::uint64_t acked_id = 0;          // delivery has reached this id
  std::uint64_t compacted = 0;         // undelivered records replaced by summaries since open
  std::uint64_t torn_bytes = 0;        // bytes cut from the tail at open (a torn write)
  std::uint64_t corrupt_segments = 0;  // closed segments whose reading stopped at a bad record
};

class Journal {
 public:
  // Opens (or creates) the journal in options.dir, cutting a torn tail. Throws
  // core::InvalidInput for bad options (naming the field) and std::system_error for I/O.
  explicit Journal(JournalOptions options);
  ~Journal();
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  // Appends one record and makes it durable; returns its id. Throws core::InvalidInput for
  // an empty kind, a kind over 255 bytes, or a record over 1 MiB.
  std::uint64_t append(std::string_view kind, std::string_view payload);
  // Group commit: appends every record with one write and one fsync; returns the last id.
  std::uint64_t append_batch(std::span<const NewRecord> records);

  // Up to `max` undelivered records (id > acked_id), oldest first.
  [[nodiscard]] std::vector<Record> pending(std::size_t max) const;
  // Delivery reached `id` (every record up to it is applied); durable when it returns.
  // Acking below the current mark is ignored (a late duplicate ack).
  void ack(std::uint64_t id);

  [[nodiscard]] JournalStats stats() const;
  [[nodiscard]] const std::filesystem::path& dir() const noexcept { return options_.dir; }

 private:
  struct Segment {
    std::uint64_t first_id = 0;  // from the file name
    std::uint64_t last_id = 0;   // 0 while empty
    std::uint64_t bytes = 0;
    std::filesystem::path path;
  };
  void load();
  void open_active();
  void roll_if_full();
  void compact();
  void write_cursor();
  std::uint64_t write_encoded(const std::string& encoded, std::uint64_t last_id);

  JournalOptions options_;
  std::vector<Segment> segments_;  // oldest first; the last one is the active segment
  int active_fd_ = -1;
  std::uint64_t next_id_ = 1;
  std::uint64_t acked_id_ = 0;
  JournalStats counters_;
  // Where pending() starts reading: every record before it has id <= acked_id_.
  std::uint64_t read_first_ = 0;  // a segment's first id (0: the oldest segment)
  std::uint64_t read_off_ = 0;
  // Where each record of the last pending() answer ends, so ack() can move the position.
  struct Position {
    std::uint64_t id;
    std::uint64_t segment;
    std::uint64_t end;
  };
  mutable std::vector<Position> returned_;
};

// Encodes one record as it lies on disk (exposed for tests that corrupt files).
std::string encode_record(std::uint64_t id, std::string_view kind, std::string_view payload);

// Decodes the records of one segment file's bytes, stopping at the first record that is
// incomplete or fails its checksum; `valid_bytes` receives the length of the good prefix.
std::vector<Record> decode_records(std::string_view bytes, std::size_t* valid_bytes);

// CRC-32C (Castagnoli), as iSCSI and ext4 use: detects torn and bit-flipped records.
std::uint32_t crc32c(std::string_view data, std::uint32_t crc = 0) noexcept;

}  // namespace gpufleet::agent
