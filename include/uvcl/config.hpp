// uvcl/config.hpp — engine configuration.
//
// A config is a JSON object; every key is optional and defaults as below.
// Parsing is strict: an unknown key, a wrong type or an out-of-range value is
// an InvalidConfig error naming the key path ("opencl.window: expected an
// integer 1..65536, got \"x\""); malformed JSON reports the byte offset.
//
//   {
//     "opencl": {
//       "platform_ids": null | [i, ...],  // null/absent: all; []: none
//       "queues": "auto",                 // in-order queues per device, 1..64 or "auto" (below)
//       "window": 100,                    // micro-batch window, 1..65536
//       "library": "/path/libOpenCL.so.1",// tried before the default names
//       "absorb_sigabrt": false,          // install zyx's SIGABRT handler
//       "cache_dir": null | "dir",        // on-disk program binary cache
//       "program_memo": 64,               // built programs kept in memory, 0..4096
//       "profile": false,                 // profiling queues (device times in traces)
//       "spin_us": "auto",                // spin for completions, 0..1000000 us or "auto" (below)
//       "loop_budget_us": 200,            // engine work per loop iteration, 0..1000000 us (0: no bound)
//       "read_burst_us": "auto",          // reads this close make a burst, 0..1000000 us or "auto" (below)
//       "cross_wait_us": 5,               // what the scheduler takes a wait across queues to cost, 0..1000000 us
//       "cross_copy_chunk_mib": 4,        // a copy between devices moves chunks this large, 1..1024 MiB
//       "cross_copy_ring": 4,             // and has up to this many of them in flight, 1..64
//       "command_events": "auto",         // "auto" | "all" | "awaited" (below)
//       "completion": "auto",             // "auto" | "callback" | "poll" (below)
//       "compile": "process",             // "process" | "inline" (below)
//       "compiler": "",                   // uvcl-compiler's path; "": found from libuvcl (below)
//       "compilers": 1,                   // compiler processes per device, 1..64
//       "compile_timeout_ms": 60000,      // a build's limit in a compiler process
//       "compiler_idle_ms": 10000,        // an idle compiler process exits after this
//       "build_options": "-cl-finite-math-only -cl-no-signed-zeros -cl-mad-enable"
//     },
//     "debug": { "backends": false, "asm": false }
//   }
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "uvcl/status.hpp"

namespace uvcl {

// The ranges the config file format admits; Engine::create checks a Config
// built in code against the same ones.
inline constexpr unsigned kMaxQueues = 64;
// Config::queues "auto": compute queues on a GPU or accelerator (independent
// chains run side by side up to about this many) and on a CPU device.
inline constexpr unsigned kAutoGpuQueues = 16;
inline constexpr unsigned kAutoCpuQueues = 8;
inline constexpr unsigned kMaxWindow = 65536;
inline constexpr unsigned kMaxProgramMemo = 4096;
inline constexpr unsigned kMaxSpinUs = 1000000;
// Config::spin_us "auto": GPUs and accelerators spin this long for an
// awaited command, CPU devices not at all.
inline constexpr unsigned kAutoSpinUs = 100;
inline constexpr unsigned kMaxLoopBudgetUs = 1000000;
inline constexpr unsigned kMaxCrossWaitUs = 1000000;
inline constexpr unsigned kMaxReadBurstUs = 1000000;
// Config::read_burst_us "auto": on GPUs and accelerators; none on CPU devices.
inline constexpr unsigned kAutoReadBurstUs = 10;
inline constexpr unsigned kMaxCrossCopyChunkMib = 1024;
inline constexpr unsigned kMaxCrossCopyRing = 64;
inline constexpr unsigned kMaxCompilers = 64;
inline constexpr unsigned kMaxCompileTimeoutMs = 86400000;  // a day
inline constexpr unsigned kMaxCompilerIdleMs = 86400000;
// The options every build gets unless opencl.build_options says otherwise
// (zyx's OpenCL backend's set).
inline constexpr const char* kDefaultBuildOptions = "-cl-finite-math-only -cl-no-signed-zeros -cl-mad-enable";

// Which commands get an OpenCL event of their own. Awaited: only those
// someone waits for (a read, a timed launch, a callback, tracing); every
// other command completes with the next event on its in-order queue (a
// fence per flushed window). All: every command (PoCL 3.1 aborts the process
// when a failure reaches a command enqueued without an event). Auto: All on
// PoCL, Awaited elsewhere.
enum class CommandEvents { Auto, All, Awaited };

// How the loop learns that an awaited command finished once it stops
// spinning (spin_us) and may sleep. Callback: the driver's completion
// callback wakes it (clSetEventCallback, then uv_async). Poll: the engine
// never registers a driver callback; the loop polls on a timer, first
// kFirstPollUs after the wait begins, each interval an eighth longer than
// the last, up to the 1 ms poll: at most an eighth of the wait late. On
// NVIDIA's driver, a context in which one callback has been registered
// stays slower per launch and per flush for the rest of its life. Auto:
// Poll on NVIDIA's platform, Callback elsewhere.
enum class CompletionMode { Auto, Callback, Poll };
inline constexpr unsigned kFirstPollUs = 50;

// Where programs are built. Process: in a uvcl-compiler child process per
// device, so the loop is never held by a build (PoCL builds inside
// clBuildProgram, for seconds) and a compiler crash kills only that process;
// the result comes back as a binary the engine loads. Inline: with
// clBuildProgram on the loop thread (for drivers whose binaries cannot be
// reloaded); also what the engine falls back to when the compiler program
// cannot be started: said once per engine on stderr and counted in
// EngineStats::compiler_fallbacks.
enum class CompileMode { Process, Inline };

struct Config {
  std::optional<std::vector<std::size_t>> platform_ids;  // nullopt: all
  // In-order compute queues per device; nullopt ("auto"): kAutoGpuQueues on
  // GPUs and accelerators, kAutoCpuQueues on CPU devices.
  std::optional<unsigned> queues;
  unsigned window = 100;
  std::string library;  // empty: search the default names
  bool absorb_sigabrt = false;
  std::string cache_dir;  // empty: no cache
  // Built programs kept in memory (LRU) so compiling the same source again
  // on the same device with the same options does not rebuild; 0: off.
  unsigned program_memo = 64;
  bool profile = false;   // create every queue with CL_QUEUE_PROFILING_ENABLE
  // After submitting a command with a callback (a read, a write or copy with
  // on_done), the loop polls for completions without sleeping for up to
  // this many microseconds: callbacks arrive sooner (a driver's callback
  // thread and the wake-up it sends cost tens of microseconds on a GPU), a
  // core stays busy meanwhile (EngineStats::spin_ns). 0: never; the
  // driver's callbacks and the 1 ms poll only. nullopt ("auto"):
  // kAutoSpinUs on GPUs and accelerators, 0 on CPU devices, where a
  // spinning loop takes a core from the kernels.
  std::optional<unsigned> spin_us;
  // How long one loop iteration may spend retiring completions and running
  // the callbacks they bring, before the engine yields to the loop's other
  // handles (timers, sockets) and goes on in the next iteration. 0: no bound.
  unsigned loop_budget_us = 200;
  // A read is submitted at once (a sync point) unless it is issued within
  // this many microseconds after the previous read returned, with no
  // prepare step of the loop in between: such a burst of reads stays in the
  // window and is submitted together when the window fills, at the prepare
  // step or at the end of poll() — one submission per window and at most
  // one flush per queue, not one per read. 0: every read is submitted at
  // once. nullopt ("auto"):
  // kAutoReadBurstUs on GPUs and accelerators, where a flush costs more than
  // a small read; 0 on CPU devices, where the device's threads share the
  // host's cores and a burst's enqueues, all at once, compete with them.
  std::optional<unsigned> read_burst_us;
  // What the scheduler takes a wait of one queue on another to cost when it
  // chooses a command's queue: this much later on the device (the hand-over
  // between queues) and as much again on the host (a marker, a flush, a
  // wait list). A command moves off the queue it would continue only where
  // that saves more. Larger keeps chains of short kernels on one queue; 0
  // spreads work wherever a queue is free first.
  unsigned cross_wait_us = 5;
  // A copy between two devices is staged through pinned host memory in
  // chunks of this many MiB: each chunk is read from the source, then
  // written to the destination while later chunks are read. At most
  // cross_copy_ring chunks are in flight, so a copy holds at most
  // chunk x ring of pinned memory whatever its size. A chunk at least the
  // copy's size makes it one read, then one write.
  unsigned cross_copy_chunk_mib = 4;
  unsigned cross_copy_ring = 4;
  CommandEvents command_events = CommandEvents::Auto;
  CompletionMode completion = CompletionMode::Auto;
  CompileMode compile = CompileMode::Process;
  // The uvcl-compiler program; empty: the first executable of: next to
  // libuvcl (or the program linking it statically: a build tree), the
  // libexecdir relative to libuvcl's folder (an installed tree wherever it
  // was moved), the libexecdir configured at build time.
  std::string compiler;
  unsigned compilers = 1;  // compiler processes per device: builds that run at once
  // A build in a compiler process that takes longer is killed (and the
  // process restarted for the next build); its compile fails.
  unsigned compile_timeout_ms = 60000;
  // A compiler process with nothing to build exits after this long; the
  // next compile starts one again (creating a context is itself slow).
  unsigned compiler_idle_ms = 10000;
  // Given to every build before the compile's own options; a compile can
  // replace them (BuildOptionsMode::Replace; a job kernel's "build_options").
  std::string build_options = kDefaultBuildOptions;
  bool debug_backends = false;
  bool debug_asm = false;
};

// InvalidConfig naming the first field out of range (as its JSON key path),
// its value and the range.
UVCL_EXPORT Result<void> validate_config(const Config& config);
// Parses a config document. `origin` names it in messages (a file path).
UVCL_EXPORT Result<Config> parse_config(std::string_view json, std::string_view origin = "config");
// Reads and parses a file.
UVCL_EXPORT Result<Config> load_config_file(const std::string& path);
// --config FILE if given (non-empty), else $UVCL_CONFIG, else defaults.
UVCL_EXPORT Result<Config> load_config(const std::string& path_or_empty);

}  // namespace uvcl
