// running.hpp — whether this thread is inside uv_run.
//
// libuv forbids running a loop from inside one of its callbacks, and has no
// query for "a loop is running": the engine's blocking helpers ask here
// before they run the loop. The answer comes from the call stack: a return
// address inside uv_run's own code means a loop callback is running now.
// It cannot tell which loop (a callback of another loop counts as well),
// and it says false where the stack cannot be walked to uv_run (frames
// without unwind information, such as a JIT's).
#pragma once

namespace uvcl::loop {

bool inside_uv_run() noexcept;

}  // namespace uvcl::loop
